"""The Scanner over real directories: what it records, what it skips, and what it rereads."""

from __future__ import annotations

import os
import stat
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from earshot.cas.digest import Digest, blob_digest
from earshot.cas.keep import KeepIgnored
from earshot.cas.objects import Location, ObjectStore
from earshot.cas.progress import QUIET, Progress
from earshot.cas.recording import TEMP_PREFIX, ScanOptions, ScanReport
from earshot.cas.scan import Scanner
from earshot.cas.statcache import SMUDGED, load_record
from earshot.cas.tree import Ident, Kind, TreeEntry, Unrecorded

AGED = ScanOptions(racy_margin_ns=20_000_000)  # files older than 20 ms are trusted


@pytest.fixture
def store(tmp_path: Path) -> Iterator[ObjectStore]:
    s = ObjectStore.open(tmp_path / "store")
    yield s
    s.close()


@pytest.fixture
def root(tmp_path: Path) -> Path:
    r = tmp_path / "root"
    r.mkdir()
    return r.resolve()


def scan(
    store: ObjectStore,
    root: Path,
    options: ScanOptions | None = None,
    use_cache: bool = True,
    progress: Progress = QUIET,
) -> tuple[Digest, ScanReport]:
    with store.writer() as writer:
        scanner = Scanner(root, writer, options, progress=progress, use_cache=use_cache)
        tree = scanner.scan_root(root.parent / "scan.marker")
    return tree, scanner.report


def flatten(store: ObjectStore, tree: Digest) -> dict[bytes, TreeEntry]:
    """Every entry below a tree, by its path bytes."""
    out: dict[bytes, TreeEntry] = {}
    with store.reader() as reader:

        def walk(digest: Digest, prefix: bytes) -> None:
            for e in reader.read_tree(digest):
                out[prefix + e.name] = e
                if e.kind is Kind.DIR:
                    assert e.digest is not None
                    walk(e.digest, prefix + e.name + b"/")

        walk(tree, b"")
    return out


def age(*paths: Path, seconds: float = 10) -> None:
    """Push mtimes into the past (ctime stays: wait past the racy margin for that)."""
    past = time.time_ns() - int(seconds * 1e9)
    for p in paths:
        os.utime(p, ns=(past, past), follow_symlinks=False)


# -- what is recorded ---------------------------------------------------------------


def test_scan_records_files_links_and_dirs_with_kind_mode_size_and_digest(
    store: ObjectStore, root: Path
) -> None:
    (root / "f.txt").write_bytes(b"hello")
    (root / "run.sh").write_bytes(b"#!/bin/sh\n")
    (root / "run.sh").chmod(0o755)
    (root / "sub").mkdir(mode=0o750)
    (root / "sub").chmod(0o750)
    (root / "sub" / "inner").write_bytes(b"")
    (root / "empty").mkdir()
    os.symlink("f.txt", root / "link")
    os.symlink("sub", root / "dirlink")
    os.symlink("/nonexistent/target", root / "dangling")
    tree, report = scan(store, root)
    entries = flatten(store, tree)
    assert set(entries) == {
        b"f.txt",
        b"run.sh",
        b"sub",
        b"sub/inner",
        b"empty",
        b"link",
        b"dirlink",
        b"dangling",
    }
    assert entries[b"f.txt"] == TreeEntry(b"f.txt", Kind.FILE, 0o644, 5, blob_digest(b"hello"))
    assert entries[b"run.sh"].mode == 0o755
    assert entries[b"sub"].kind is Kind.DIR and entries[b"sub"].mode == 0o750
    assert entries[b"sub/inner"] == TreeEntry(b"inner", Kind.FILE, 0o644, 0, blob_digest(b""))
    assert entries[b"link"] == TreeEntry(b"link", Kind.SYMLINK, 0o777, 5, blob_digest(b"f.txt"))
    assert entries[b"dirlink"].kind is Kind.SYMLINK
    assert entries[b"dangling"].digest == blob_digest(b"/nonexistent/target")
    assert (report.files, report.content_bytes, report.files_read) == (3, 15, 3)
    with store.reader() as reader:
        assert reader.read_blob(entries[b"link"].digest) == b"f.txt"  # type: ignore[arg-type]


def test_scan_does_not_follow_a_symlink_to_a_directory_outside_the_root(
    store: ObjectStore, root: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret").write_bytes(b"not ours")
    os.symlink(outside, root / "out")
    tree, report = scan(store, root)
    assert list(flatten(store, tree)) == [b"out"]
    assert report.files == 0
    with store.reader() as reader:
        assert not reader.has(blob_digest(b"not ours"))


def test_scan_records_unicode_and_undecodable_names_as_their_bytes(
    store: ObjectStore, root: Path
) -> None:
    (root / "ünïcödé 名前.txt").write_bytes(b"u")
    with open(os.path.join(os.fsencode(root), b"bad\xff"), "wb") as handle:
        handle.write(b"undecodable")
    os.mkdir(os.path.join(os.fsencode(root), b"dir\xfe"))
    with open(os.path.join(os.fsencode(root), b"dir\xfe", b"x\x01y"), "wb") as handle:
        handle.write(b"ctl")
    tree, _ = scan(store, root)
    entries = flatten(store, tree)
    assert set(entries) == {"ünïcödé 名前.txt".encode(), b"bad\xff", b"dir\xfe", b"dir\xfe/x\x01y"}
    assert entries[b"bad\xff"].digest == blob_digest(b"undecodable")


def test_scan_skips_git_entries_and_restore_temp_files_at_every_level(
    store: ObjectStore, root: Path
) -> None:
    (root / ".git" / "objects").mkdir(parents=True)
    (root / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (root / "sub" / ".git").mkdir(parents=True)
    (root / "sub" / ".git" / "config").write_text("[core]\n")
    (root / "wt").mkdir()
    (root / "wt" / ".git").write_text("gitdir: ../.git/worktrees/wt\n")
    # An undo's or a restore's temp file (tagged with its intent), a write's.
    (root / f"{TEMP_PREFIX}18ed3cd7ae72c48f-5ac8d7f4-1").write_bytes(b"half written")
    (root / "sub" / f"{TEMP_PREFIX}w4242-0a1b2c3d").write_bytes(b"half written")
    (root / "sub" / "kept").write_bytes(b"k")
    (root / ".gitkeep").write_bytes(b"")
    # A person's file that merely starts like one is theirs: recorded.
    (root / f"{TEMP_PREFIX}notes").write_bytes(b"mine")
    tree, report = scan(store, root)
    names = {b"sub", b"sub/kept", b"wt", b".gitkeep", f"{TEMP_PREFIX}notes".encode()}
    assert set(flatten(store, tree)) == names
    assert report.files == 3


def test_scan_skips_the_excluded_directory(store: ObjectStore, root: Path) -> None:
    (root / "data" / "store").mkdir(parents=True)
    (root / "data" / "store" / "data.mdb").write_bytes(b"db")
    (root / "data" / "notes").write_bytes(b"n")
    (root / "f").write_bytes(b"f")
    tree, _ = scan(store, root, ScanOptions(exclude_dirs=frozenset({str(root / "data" / "store")})))
    assert set(flatten(store, tree)) == {b"data", b"data/notes", b"f"}


def test_scan_keeps_only_the_existence_of_what_the_root_gitignore_excludes_when_told_to(
    store: ObjectStore, root: Path
) -> None:
    (root / ".gitignore").write_text("*.log\nout/\n")
    (root / "a.log").write_bytes(b"log")
    (root / "out").mkdir()
    (root / "out" / "out.o").write_bytes(b"obj")
    (root / "src").mkdir()
    (root / "src" / "b.log").write_bytes(b"log")
    (root / "src" / "main.c").write_bytes(b"int main;")
    tree, report = scan(store, root, ScanOptions(keep=KeepIgnored(enabled=False)))
    entries = flatten(store, tree)
    assert set(entries) == {
        b".gitignore",
        b"a.log",
        b"out",
        b"out/out.o",
        b"src",
        b"src/b.log",
        b"src/main.c",
    }
    assert entries[b"out"].kind is Kind.DIR  # listed: each entry's existence
    for path in (b"a.log", b"out/out.o", b"src/b.log"):
        entry = entries[path]
        assert (entry.kind, entry.reason, entry.digest) == (
            Kind.UNRECORDED,
            Unrecorded.IGNORED,
            None,
        )
        assert entry.ident is not None and not entry.ident.is_dir
    # Existence only: not counted among the files, nor listed as "not recorded".
    assert (report.files, report.existence_only, report.unrecorded) == (2, 3, [])


# -- unrecorded entries ---------------------------------------------------------------


def test_scan_records_a_file_over_the_size_limit_as_unrecorded_without_reading_it(
    store: ObjectStore, root: Path
) -> None:
    (root / "big").write_bytes(b"x" * 1001)
    (root / "fits").write_bytes(b"x" * 1000)
    tree, report = scan(store, root, ScanOptions(max_file_size=1000))
    entries = flatten(store, tree)
    st = (root / "big").stat()
    assert entries[b"big"] == TreeEntry(
        b"big",
        Kind.UNRECORDED,
        0o644,
        1001,
        None,
        Unrecorded.TOO_LARGE,
        Ident(st.st_ino, st.st_mtime_ns),
    )
    assert entries[b"fits"].kind is Kind.FILE
    assert report.unrecorded == [("big", Unrecorded.TOO_LARGE)]
    assert (report.files, report.files_read, report.content_bytes) == (2, 1, 2001)
    with store.reader() as reader:
        assert not reader.has(blob_digest(b"x" * 1001))


def test_scan_records_a_fifo_as_unrecorded_special_and_does_not_block(
    store: ObjectStore, root: Path
) -> None:
    os.mkfifo(root / "pipe")
    (root / "f").write_bytes(b"f")
    result: list[tuple[Digest, ScanReport]] = []
    worker = threading.Thread(target=lambda: result.append(scan(store, root)), daemon=True)
    worker.start()
    worker.join(timeout=20)
    assert not worker.is_alive(), "scan blocked on a fifo"
    tree, report = result[0]
    assert flatten(store, tree)[b"pipe"].reason is Unrecorded.SPECIAL
    assert report.unrecorded == [("pipe", Unrecorded.SPECIAL)]
    assert any("pipe" in w for w in report.warnings)


@pytest.mark.without_dac_override
def test_scan_records_an_unreadable_file_as_unrecorded(store: ObjectStore, root: Path) -> None:
    (root / "secret").write_bytes(b"s")
    (root / "secret").chmod(0)
    try:
        tree, report = scan(store, root)
    finally:
        (root / "secret").chmod(0o600)
    assert flatten(store, tree)[b"secret"].reason is Unrecorded.UNREADABLE
    assert report.unrecorded == [("secret", Unrecorded.UNREADABLE)]


def test_scan_records_a_file_it_may_not_open_as_unrecorded(
    store: ObjectStore, root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The same path as chmod 000 for a non-root user, reached by refusing the open.
    (root / "secret").write_bytes(b"s")
    (root / "ok").write_bytes(b"o")
    real_open = os.open

    def refusing(path, flags, mode=0o777, *, dir_fd=None):  # type: ignore[no-untyped-def]
        if os.fsdecode(path) == str(root / "secret"):
            raise PermissionError(13, "Permission denied", path)
        return real_open(path, flags, mode, dir_fd=dir_fd)

    monkeypatch.setattr(os, "open", refusing)
    tree, report = scan(store, root)
    monkeypatch.undo()
    entries = flatten(store, tree)
    st = (root / "secret").stat()
    assert entries[b"secret"] == TreeEntry(
        b"secret",
        Kind.UNRECORDED,
        0o644,
        1,
        None,
        Unrecorded.UNREADABLE,
        Ident(st.st_ino, st.st_mtime_ns),
    )
    assert entries[b"ok"].kind is Kind.FILE
    assert report.unrecorded == [("secret", Unrecorded.UNREADABLE)]


def test_scan_records_a_directory_it_may_not_list_as_unrecorded(
    store: ObjectStore, root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (root / "locked").mkdir()
    (root / "locked" / "inside").write_bytes(b"i")
    real_scandir = os.scandir

    def refusing(path):  # type: ignore[no-untyped-def]
        if os.fsdecode(path) == str(root / "locked"):
            raise PermissionError(13, "Permission denied", path)
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", refusing)
    tree, report = scan(store, root)
    monkeypatch.undo()
    locked = (root / "locked").stat()
    assert flatten(store, tree) == {
        b"locked": TreeEntry(
            b"locked",
            Kind.UNRECORDED,
            0o755,
            0,
            None,
            Unrecorded.UNREADABLE,
            Ident(locked.st_ino, locked.st_mtime_ns, is_dir=True),
        )
    }
    assert report.unrecorded == [("locked", Unrecorded.UNREADABLE)]


def test_scan_omits_a_file_that_vanishes_before_it_is_opened(
    store: ObjectStore, root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (root / "gone").write_bytes(b"g")
    (root / "stays").write_bytes(b"s")
    real_open = os.open

    def vanishing(path, flags, mode=0o777, *, dir_fd=None):  # type: ignore[no-untyped-def]
        if os.fsdecode(path) == str(root / "gone"):
            os.unlink(path)
        return real_open(path, flags, mode, dir_fd=dir_fd)

    monkeypatch.setattr(os, "open", vanishing)
    tree, _ = scan(store, root)
    monkeypatch.undo()
    assert set(flatten(store, tree)) == {b"stays"}


def test_scan_records_a_file_that_keeps_changing_but_does_not_trust_it_next_time(
    store: ObjectStore, root: Path
) -> None:
    path = root / "busy"
    path.write_bytes(b"busy")
    age(path)
    time.sleep(0.05)
    with store.writer() as writer:
        real_put_file = writer.put_file

        def put_and_touch(fd: int, size: int) -> Digest:
            digest = real_put_file(fd, size)
            os.utime(path, ns=(time.time_ns(), time.time_ns() + 10**9))  # a writer is busy
            return digest

        writer.put_file = put_and_touch  # type: ignore[method-assign]
        scanner = Scanner(root, writer, AGED)
        tree = scanner.scan_root(root.parent / "scan.marker")
    assert any("kept changing" in w for w in scanner.report.warnings)
    assert flatten(store, tree)[b"busy"].digest == blob_digest(b"busy")
    _, again = scan(store, root, AGED)
    assert again.files_read == 1


# -- the stat cache -----------------------------------------------------------------


def make_aged_tree(root: Path, dirs: int = 3, files: int = 4) -> None:
    for d in range(dirs):
        (root / f"d{d}").mkdir()
        for f in range(files):
            (root / f"d{d}" / f"f{f}").write_bytes(f"{d}/{f}".encode())
    time.sleep(0.05)  # past AGED's racy margin


def test_second_scan_reads_only_the_changed_file_and_keeps_other_subtree_digests(
    store: ObjectStore, root: Path
) -> None:
    make_aged_tree(root)
    first, report = scan(store, root, AGED)
    assert report.files_read == 12
    (root / "d1" / "f2").write_bytes(b"changed")
    second, report = scan(store, root, AGED)
    assert (report.files_read, report.files) == (1, 12)
    before, after = flatten(store, first), flatten(store, second)
    assert before[b"d0"] == after[b"d0"] and before[b"d2"] == after[b"d2"]
    assert before[b"d1"] != after[b"d1"]
    assert after[b"d1/f2"].digest == blob_digest(b"changed")
    assert first != second


def test_unchanged_tree_scans_to_the_same_digest_without_reading_a_file(
    store: ObjectStore, root: Path
) -> None:
    make_aged_tree(root)
    first, _ = scan(store, root, AGED)
    second, report = scan(store, root, AGED)
    assert second == first
    assert (report.files_read, report.bytes_read, report.files) == (0, 0, 12)


def test_scan_without_the_cache_reads_every_file_and_gets_the_same_digest(
    store: ObjectStore, root: Path
) -> None:
    make_aged_tree(root)
    first, _ = scan(store, root, AGED)
    second, report = scan(store, root, AGED, use_cache=False)
    assert second == first
    assert report.files_read == 12


def test_file_modified_within_the_racy_margin_is_smudged_and_read_again(
    store: ObjectStore, root: Path
) -> None:
    (root / "fresh").write_bytes(b"fresh")
    (root / "old").write_bytes(b"old")
    time.sleep(0.05)
    (root / "fresh").write_bytes(b"FRESH")  # within the margin of the scan below
    tree, _ = scan(store, root, ScanOptions(racy_margin_ns=30_000_000))
    with store.reader() as reader:
        record = load_record(reader.view, "")
    assert record is not None and record.tree == tree
    assert record.entries["fresh"][3] == SMUDGED
    assert record.entries["old"][3] == (root / "old").stat().st_mtime_ns
    time.sleep(0.05)
    again, report = scan(store, root, ScanOptions(racy_margin_ns=30_000_000))
    assert report.files_read == 1  # "fresh" only
    assert again == tree


def test_same_size_edit_with_mtime_put_back_is_seen_through_ctime(
    store: ObjectStore, root: Path
) -> None:
    path = root / "f"
    path.write_bytes(b"version-1")
    time.sleep(0.05)
    first, _ = scan(store, root, AGED)
    with store.reader() as reader:
        record = load_record(reader.view, "")
    assert record is not None and record.entries["f"][3] != SMUDGED  # trusted by mtime
    assert flatten(store, first)[b"f"].digest == blob_digest(b"version-1")
    st = path.stat()
    path.write_bytes(b"version-2")
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert path.stat().st_mtime_ns == st.st_mtime_ns and path.stat().st_size == st.st_size
    second, report = scan(store, root, AGED)
    assert report.files_read == 1
    assert flatten(store, second)[b"f"].digest == blob_digest(b"version-2")


def test_file_whose_mtime_was_set_back_but_whose_ctime_is_fresh_is_read_again_next_time(
    store: ObjectStore, root: Path
) -> None:
    # touch -d, tar x and cp -p put mtimes in the past; the ctime still says
    # "just changed", and a same-size edit in that ctime tick would keep it.
    path = root / "f"
    path.write_bytes(b"version-1")
    age(path)
    scan(store, root)
    with store.reader() as reader:
        record = load_record(reader.view, "")
    assert record is not None and record.entries["f"][3] == SMUDGED
    _, again = scan(store, root)
    assert again.files_read == 1


def test_directory_listed_within_the_racy_margin_is_listed_again_next_time(
    store: ObjectStore, root: Path
) -> None:
    (root / "d").mkdir()
    (root / "d" / "a").write_bytes(b"a")
    age(root / "d" / "a")
    scan(store, root)
    listed_mtime = (root / "d").stat().st_mtime_ns
    # A name added within the same mtime tick leaves the directory's mtime as listed.
    (root / "d" / "b").write_bytes(b"b")
    os.utime(root / "d", ns=(listed_mtime, listed_mtime))
    tree, _ = scan(store, root)
    assert b"d/b" in flatten(store, tree)


class _Counted(Progress):
    def __init__(self) -> None:
        self.stages: list[str] = []
        self.counts: list[int] = []
        self.nbytes = 0

    def stage(
        self, label: str, total: int | None = None, total_bytes: int | None = None, unit: str = ""
    ) -> None:
        self.stages.append(label)

    def advance(self, count: int = 1, nbytes: int = 0) -> None:
        self.counts.append(count)
        self.nbytes += nbytes


def test_progress_counts_every_entry_walked_and_every_byte_read(
    store: ObjectStore, root: Path
) -> None:
    for d in range(3):
        (root / f"d{d}").mkdir()
        for f in range(5):
            (root / f"d{d}" / f"f{f}").write_bytes(b"x" * f)
    counted = _Counted()
    scan(store, root, progress=counted)
    assert len(counted.counts) > 1, "progress told once, at the end"
    assert sum(counted.counts) == 3 + 15
    assert counted.nbytes == 3 * (0 + 1 + 2 + 3 + 4)


def test_scan_stores_each_distinct_content_once(store: ObjectStore, root: Path) -> None:
    for i in range(10):
        (root / f"copy{i}").write_bytes(b"same content")
    with store.writer() as writer:
        Scanner(root, writer).scan_root(root.parent / "scan.marker")
    with store.reader() as reader:
        locations = [Location.decode(v, k) for k, v in reader.view.items("index")]
    assert [loc.type.name for loc in locations].count("BLOB") == 1


def test_scan_records_modes_of_files_with_special_bits(store: ObjectStore, root: Path) -> None:
    (root / "s").write_bytes(b"s")
    (root / "s").chmod(0o4755)
    (root / "sticky").mkdir()
    (root / "sticky").chmod(0o1777)
    tree, _ = scan(store, root)
    entries = flatten(store, tree)
    assert entries[b"s"].mode == stat.S_IMODE((root / "s").stat().st_mode) == 0o4755
    assert entries[b"sticky"].mode == 0o1777


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", 64 << 20),
        ("500000", 500_000),
        ("2K", 2048),
        ("64M", 64 << 20),
        ("1g", 1 << 30),
        ("1.5M", int(1.5 * (1 << 20))),
        ("10MiB", 10 << 20),
    ],
)
def test_max_file_size_comes_from_the_environment(
    monkeypatch: pytest.MonkeyPatch, text: str, expected: int
) -> None:
    from earshot.cas.recording import max_file_size_from_env

    monkeypatch.setenv("EARSHOT_MAX_FILE_SIZE", text)
    assert max_file_size_from_env() == expected


@pytest.mark.parametrize("text", ["abc", "-5", "12X", "M"])
def test_a_bad_max_file_size_is_a_clear_error_naming_what_was_given(
    monkeypatch: pytest.MonkeyPatch, text: str
) -> None:
    from earshot.cas.recording import BadSize, max_file_size_from_env

    monkeypatch.setenv("EARSHOT_MAX_FILE_SIZE", text)
    with pytest.raises(BadSize, match=f"EARSHOT_MAX_FILE_SIZE={text!r}"):
        max_file_size_from_env()


def test_a_stat_cache_record_with_a_flipped_byte_is_not_trusted(
    store: ObjectStore, root: Path
) -> None:
    # A flipped byte in a record's digest would otherwise name, for an
    # unchanged file, content it never had: the record's checksum catches it.
    from earshot.cas import schema

    make_aged_tree(root)
    first, _ = scan(store, root, AGED)
    with store.reader() as reader:
        raw = schema.get_dir_record(reader.view, "d1")
    assert raw is not None
    with store.backend.write() as batch:
        damaged = bytearray(raw)
        damaged[len(raw) // 2] ^= 0x01
        schema.put_dir_record(batch, "d1", bytes(damaged))
    tree, report = scan(store, root, AGED)
    assert (tree, report.files_read) == (first, 4)  # d1 read again, recorded the same
