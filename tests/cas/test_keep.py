"""What a scan keeps of what git ignores: small files outside caches, within a budget.

Real files, a real LMDB store, real git where the index matters. Each test
states what is kept (content recorded), what is kept as existence only (the
tree says it is there, with its identity, never its content), and why.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from earshot.cas import keep as keep_module
from earshot.cas.digest import Digest, blob_digest
from earshot.cas.keep import CACHEDIR_SIGNATURE, BadSetting, KeepIgnored
from earshot.cas.objects import ObjectStore
from earshot.cas.project import Project
from earshot.cas.recording import ScanOptions, ScanReport
from earshot.cas.scan import Scanner
from earshot.cas.tree import Ident, Kind, TreeEntry, Unrecorded

Git = Callable[..., str]
SMALL = KeepIgnored(max_file=100, dir_files=5, dir_bytes=300)


@pytest.fixture
def store(tmp_path: Path) -> ObjectStore:
    s = ObjectStore.open(tmp_path / "store")
    yield s  # type: ignore[misc]
    s.close()


@pytest.fixture
def root(tmp_path: Path) -> Path:
    r = tmp_path / "root"
    r.mkdir()
    return r


def scan(
    store: ObjectStore, root: Path, keep: KeepIgnored = SMALL
) -> tuple[dict[str, TreeEntry], ScanReport]:
    options = ScanOptions(racy_margin_ns=0, keep=keep)
    with store.writer() as writer:
        scanner = Scanner(root, writer, options)
        tree = scanner.scan_root(root.parent / "scan.marker")
    return flatten(store, tree), scanner.report


def flatten(store: ObjectStore, tree: Digest) -> dict[str, TreeEntry]:
    out: dict[str, TreeEntry] = {}
    with store.reader() as reader:

        def walk(digest: Digest, prefix: str) -> None:
            for e in reader.read_tree(digest):
                path = prefix + e.name.decode()
                out[path] = e
                if e.kind is Kind.DIR:
                    assert e.digest is not None
                    walk(e.digest, path + "/")

        walk(tree, "")
    return out


def put(root: Path, rel: str, data: bytes = b"x\n") -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def existence(entry: TreeEntry) -> Unrecorded | None:
    """The reason an entry is kept as existence only, or None if its content is held."""
    assert entry.kind is not Kind.UNRECORDED or entry.ident is not None
    return entry.reason if entry.kind is Kind.UNRECORDED else None


# -- files -------------------------------------------------------------------------------


def test_a_small_ignored_file_is_kept_with_its_content(store: ObjectStore, root: Path) -> None:
    put(root, ".gitignore", b".env\n*.sqlite\n")
    put(root, ".env", b"KEY=1\n")
    put(root, "db.sqlite", b"S" * 100)  # at the limit: kept
    entries, report = scan(store, root)
    assert entries[".env"].digest == blob_digest(b"KEY=1\n")
    assert entries["db.sqlite"].kind is Kind.FILE
    assert (report.files, report.existence_only) == (3, 0)


def test_an_ignored_file_over_the_limit_is_kept_as_existence_with_its_identity(
    store: ObjectStore, root: Path
) -> None:
    put(root, ".gitignore", b"*.bin\n")
    big = put(root, "model.bin", b"M" * 101)
    entries, report = scan(store, root)
    entry = entries["model.bin"]
    st = big.stat()
    assert existence(entry) is Unrecorded.IGNORED
    assert entry.ident is not None
    assert (entry.ident.ino, entry.ident.mtime_ns, entry.size) == (st.st_ino, st.st_mtime_ns, 101)
    assert report.existence_only == 1 and report.unrecorded == []
    with store.reader() as reader:
        assert not reader.has(blob_digest(b"M" * 101))


def test_compiled_output_is_kept_as_existence_only_whatever_its_name(
    store: ObjectStore, root: Path
) -> None:
    put(root, ".gitignore", b"*.o\nout\n*.pyc\n")
    put(root, "main.o", b"\x7fELF\x02\x01\x01" + b"\0" * 20)
    put(root, "out", b"!<arch>\nmember")
    put(root, "m.pyc", b"\xa7\r\r\n" + b"\0" * 12)
    put(root, "notes.o", b"a text file that only looks like an object by its name\n")
    entries, _ = scan(store, root)
    assert existence(entries["main.o"]) is Unrecorded.BUILD
    assert existence(entries["out"]) is Unrecorded.BUILD
    assert existence(entries["m.pyc"]) is Unrecorded.BUILD
    assert existence(entries["notes.o"]) is None


def test_earshotignore_excludes_what_it_names_even_when_small(
    store: ObjectStore, root: Path
) -> None:
    put(root, ".gitignore", b"secrets/\n")
    put(root, ".earshotignore", b"*.key\n")
    put(root, "id.key", b"k")  # not ignored by git: earshot's own rule excludes it
    put(root, "secrets/a.txt", b"a")
    put(root, "secrets/b.key", b"b")  # in a kept directory: still excluded
    entries, _ = scan(store, root)
    assert existence(entries["id.key"]) is Unrecorded.EXCLUDED
    assert existence(entries["secrets/b.key"]) is Unrecorded.EXCLUDED
    assert existence(entries["secrets/a.txt"]) is None


def test_keeping_turned_off_keeps_the_existence_of_every_ignored_path(
    store: ObjectStore, root: Path
) -> None:
    put(root, ".gitignore", b".env\ndata/\n")
    put(root, ".env", b"KEY=1\n")
    put(root, "data/db", b"d")
    entries, _ = scan(store, root, KeepIgnored(enabled=False))
    assert existence(entries[".env"]) is Unrecorded.IGNORED
    assert entries["data"].kind is Kind.DIR  # listed
    assert existence(entries["data/db"]) is Unrecorded.IGNORED


# -- directories -------------------------------------------------------------------------


def test_an_ignored_directory_within_the_budget_is_kept_whole(
    store: ObjectStore, root: Path
) -> None:
    put(root, ".gitignore", b"data/\n")
    for i in range(5):
        put(root, f"data/sub/{i}.csv", b"1,2\n")
    entries, _ = scan(store, root)
    assert entries["data"].kind is Kind.DIR
    assert entries["data/sub/4.csv"].digest == blob_digest(b"1,2\n")


@pytest.mark.parametrize("over", ["files", "bytes"])
def test_an_ignored_directory_over_the_budget_is_listed_as_existence_entry_by_entry(
    store: ObjectStore, root: Path, over: str
) -> None:
    put(root, ".gitignore", b"out/\n")
    sizes = [10] * 6 if over == "files" else [100, 100, 100, 1]
    for i, size in enumerate(sizes):
        put(root, f"out/d{i % 2}/{i}", b"o" * size)
    entries, report = scan(store, root)
    assert entries["out"].kind is Kind.DIR and entries["out/d0"].kind is Kind.DIR
    for i, size in enumerate(sizes):
        entry = entries[f"out/d{i % 2}/{i}"]
        st = (root / "out" / f"d{i % 2}" / str(i)).stat()
        assert existence(entry) is Unrecorded.IGNORED
        assert entry.ident == Ident(st.st_ino, st.st_mtime_ns, False) and entry.size == size
    assert report.files_read == 1  # .gitignore only: nothing in out/ was read


def test_a_directory_with_more_entries_than_are_listed_is_one_entry(
    store: ObjectStore, root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("earshot.cas.scan.MAX_LISTED", 4)
    put(root, ".gitignore", b"out/\n")
    for i in range(6):
        put(root, f"out/{i}", b"o")
    entries, _ = scan(store, root)
    entry = entries["out"]
    st = (root / "out").stat()
    assert existence(entry) is Unrecorded.IGNORED
    assert entry.ident == Ident(st.st_ino, st.st_mtime_ns, True)
    assert not any(p.startswith("out/") for p in entries)


def test_a_kept_directory_that_outgrows_the_budget_is_listed_next_time(
    store: ObjectStore, root: Path
) -> None:
    put(root, ".gitignore", b"data/\n")
    put(root, "data/a", b"a")
    entries, _ = scan(store, root)
    assert entries["data"].kind is Kind.DIR
    for i in range(6):
        put(root, f"data/deep/{i}", b"b")  # its own listing changes only below it
    entries, _ = scan(store, root)
    assert entries["data"].kind is Kind.DIR
    assert existence(entries["data/a"]) is Unrecorded.IGNORED  # listed, no more kept


def test_a_directory_over_the_budget_is_not_measured_again_while_its_listing_stays(
    store: ObjectStore, root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    put(root, ".gitignore", b"out/\n")
    for i in range(6):
        put(root, f"out/{i}", b"o")
    measured: list[str] = []
    real = keep_module.within_budget

    def counting(path: str, keep: KeepIgnored) -> bool:
        measured.append(path)
        return real(path, keep)

    monkeypatch.setattr("earshot.cas.scan.within_budget", counting)
    scan(store, root)
    scan(store, root)
    assert measured == [str(root / "out")]
    os.unlink(root / "out" / "0")  # the listing changed: judged again, now within
    entries, _ = scan(store, root)
    assert measured == [str(root / "out")] * 2
    assert entries["out"].kind is Kind.DIR


def test_caches_are_kept_as_existence_by_name_and_by_marker(store: ObjectStore, root: Path) -> None:
    put(root, ".gitignore", b"node_modules/\n.venv/\ntmp/\nscratch/\n/build/\n")
    put(root, "node_modules/a/index.js", b"x")
    put(root, ".venv/pyvenv.cfg", b"home = /usr\n")
    put(root, "tmp/CACHEDIR.TAG", CACHEDIR_SIGNATURE + b"\n")
    put(root, "scratch/CACHEDIR.TAG", b"not the signature\n")  # not a cache: kept
    put(root, "build/x", b"x")
    put(root, "src/build/x", b"x")  # not ignored: a name alone makes no cache
    entries, _ = scan(store, root)
    for cache in ("node_modules", ".venv", "tmp", "build"):
        assert existence(entries[cache]) is Unrecorded.CACHE, cache
    assert entries["scratch/CACHEDIR.TAG"].kind is Kind.FILE
    assert entries["src/build/x"].kind is Kind.FILE


def test_a_cache_inside_a_kept_directory_is_kept_as_existence(
    store: ObjectStore, root: Path
) -> None:
    put(root, ".gitignore", b"work/\n")
    put(root, "work/notes.md", b"n")
    put(root, "work/__pycache__/m.cpython-311.pyc", b"p")
    entries, _ = scan(store, root)
    assert entries["work/notes.md"].kind is Kind.FILE
    assert existence(entries["work/__pycache__"]) is Unrecorded.CACHE


def test_an_earshotignore_negation_records_an_ignored_directory_whatever_its_size(
    store: ObjectStore, root: Path
) -> None:
    put(root, ".gitignore", b"data/\n")
    put(root, ".earshotignore", b"!data/\n")
    for i in range(8):
        put(root, f"data/{i}", b"d" * 200)
    entries, _ = scan(store, root)
    assert entries["data/7"].kind is Kind.FILE


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_what_git_tracks_below_a_directory_not_kept_is_recorded_and_the_rest_exists(
    store: ObjectStore, root: Path, git: Git
) -> None:
    git(root, "init", "-q")
    put(root, ".gitignore", b"out/\n")
    put(root, "out/keep/config.h", b"tracked")
    for i in range(6):
        put(root, f"out/junk/{i}", b"j")
    put(root, "out/loose", b"l")
    git(root, "add", "-f", "out/keep/config.h")
    entries, _ = scan(store, root)
    assert entries["out/keep/config.h"].digest == blob_digest(b"tracked")
    assert existence(entries["out/junk/0"]) is Unrecorded.IGNORED
    assert existence(entries["out/loose"]) is Unrecorded.IGNORED


# -- through a project: the stat cache, scoped restages ------------------------------------


def test_a_rescan_reads_no_kept_file_again(root: Path, earshot_home: Path) -> None:
    put(root, ".gitignore", b".env\ndata/\n")
    put(root, ".env", b"KEY=1\n")
    put(root, "data/a", b"a")
    with Project(root, options=ScanOptions(racy_margin_ns=0, keep=SMALL)) as project:
        project.snapshot()
        again = project.snapshot()
    assert again.reused and again.report.files_read == 0


def test_a_scoped_restage_judges_an_ignored_path_as_a_walk_does(
    root: Path, earshot_home: Path
) -> None:
    put(root, ".gitignore", b"*.env\ndata/\n")
    put(root, "a.txt", b"a")
    options = ScanOptions(racy_margin_ns=0, keep=SMALL)
    with Project(root, options=options) as project:
        project.snapshot()
        put(root, "new.env", b"N=1\n")
        put(root, "data/db", b"d")
        put(root, "big.env", b"B" * 101)
        scoped = project.restage(["new.env", "data/db", "big.env"])
        walked = project.snapshot()
        assert scoped.snapshot.tree == walked.snapshot.tree
        with project.store.reader() as reader:
            entries = {e.name: e for e in reader.read_tree(walked.snapshot.tree)}
    assert entries[b"new.env"].digest == blob_digest(b"N=1\n")
    assert existence(entries[b"big.env"]) is Unrecorded.IGNORED
    assert entries[b"data"].kind is Kind.DIR


# -- settings ------------------------------------------------------------------------------


def test_the_limits_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EARSHOT_IGNORED_MAX_FILE", "2M")
    monkeypatch.setenv("EARSHOT_IGNORED_DIR_FILES", "50")
    monkeypatch.setenv("EARSHOT_IGNORED_DIR_BYTES", "1G")
    assert KeepIgnored.from_env() == KeepIgnored(True, 2 << 20, 50, 1 << 30)
    monkeypatch.setenv("EARSHOT_KEEP_IGNORED", "0")
    assert not KeepIgnored.from_env().enabled


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("EARSHOT_KEEP_IGNORED", "maybe"),
        ("EARSHOT_IGNORED_MAX_FILE", "lots"),
        ("EARSHOT_IGNORED_DIR_FILES", "1.5k"),
        ("EARSHOT_IGNORED_DIR_BYTES", "-3"),
    ],
)
def test_a_bad_limit_is_refused_in_words(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str
) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises(BadSetting, match=name):
        KeepIgnored.from_env()


def test_a_cache_is_never_listed_however_large(
    store: ObjectStore, root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    put(root, ".gitignore", b"node_modules/\n")
    for i in range(300):
        put(root, f"node_modules/pkg{i}/node_modules/dep/index.js", b"module.exports = 1\n")
    put(root, "app.js", b"require('pkg1')\n")
    listed: list[str] = []
    real = os.scandir

    def recording(path: str) -> object:
        listed.append(os.fsdecode(path))
        return real(path)

    monkeypatch.setattr(os, "scandir", recording)
    entries, report = scan(store, root, KeepIgnored())
    assert existence(entries["node_modules"]) is Unrecorded.CACHE
    assert not any("node_modules" in p for p in listed)
    assert (report.files, report.existence_only) == (2, 1)


def test_a_directorys_identity_holds_its_mtime(store: ObjectStore, root: Path) -> None:
    # A new directory given a freed inode has a new mtime: not the old one moved.
    put(root, ".gitignore", b"node_modules/\n")
    put(root, "node_modules/a/index.js", b"x")
    entries, _ = scan(store, root)
    st = (root / "node_modules").stat()
    assert entries["node_modules"].ident == Ident(st.st_ino, st.st_mtime_ns, True)


def test_a_destructive_commands_targets_are_read_within_the_budget_and_no_further(
    root: Path, earshot_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("earshot.cas.scan.MAX_LISTED", 4)  # out/ is one entry
    monkeypatch.setenv("EARSHOT_TARGET_BUDGET", "2500")
    put(root, ".gitignore", b"out/\n")
    for i in range(6):
        put(root, f"out/{i}", b"k" * 1000)  # each small enough to keep, were it kept
    options = ScanOptions(racy_margin_ns=0, keep=KeepIgnored(dir_files=3))
    with Project(root, options=options) as project:
        first = project.snapshot()
        lifted = project.record(["out"], base=first.snapshot.tree, lifted=["out"])
        with project.store.reader() as reader:
            out = {
                e.name: e
                for e in reader.read_tree(
                    next(
                        e for e in reader.read_tree(lifted.snapshot.tree) if e.name == b"out"
                    ).digest  # type: ignore[arg-type]
                )
            }
    held = [name for name, e in out.items() if e.kind is Kind.FILE]
    assert len(held) == 2 and len(out) == 6  # 2,500 bytes hold two files of 1,000
