"""Project over real directories and a real LMDB store: snapshot, restore, resolve."""

from __future__ import annotations

import builtins
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from earshot.cas import schema
from earshot.cas.diff import diff_trees
from earshot.cas.digest import BadDigest, Digest, to_hex, tree_digest
from earshot.cas.objects import ObjectType
from earshot.cas.project import AmbiguousId, NoSuchSnapshot, NotADirectory, Project
from earshot.cas.recording import TEMP_PREFIX, ScanOptions
from earshot.cas.restore import delete_everything, keep_everything
from earshot.cas.snapshot import Snapshot
from earshot.cas.tree import MAGIC, CorruptTree, Kind, TreeEntry, Unrecorded
from earshot.cas.varint import encode_uvarint

OpenProject = Callable[..., Project]
Listing = dict[bytes, tuple]  # type: ignore[type-arg]


@pytest.fixture
def root(tmp_path: Path) -> Path:
    r = tmp_path / "root"
    r.mkdir()
    return r.resolve()


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    o = tmp_path / "outside"
    o.mkdir()
    (o / "keep.txt").write_bytes(b"outside, never touched")
    return o.resolve()


@pytest.fixture
def open_project(earshot_home: Path) -> Iterator[OpenProject]:
    opened: list[Project] = []

    def _open(root: Path, **kwargs: object) -> Project:
        project = Project(root, **kwargs)  # type: ignore[arg-type]
        opened.append(project)
        return project

    yield _open
    for project in opened:
        project.close()


def listing(top: Path, exclude: tuple[bytes, ...] = (), times: bool = False) -> Listing:
    """path bytes -> (kind, mode bits, content or link target), for a whole tree."""
    out: Listing = {}

    def walk(directory: bytes, rel: bytes) -> None:
        for name in sorted(os.listdir(directory)):
            path = os.path.join(directory, name)
            r = rel + name
            if r in exclude:
                continue
            st = os.lstat(path)
            extra = (st.st_ino, st.st_mtime_ns) if times else ()
            if stat.S_ISLNK(st.st_mode):
                out[r] = ("link", os.readlink(path), *extra)
            elif stat.S_ISDIR(st.st_mode):
                out[r] = ("dir", stat.S_IMODE(st.st_mode), *extra)
                walk(path, r + b"/")
            elif stat.S_ISREG(st.st_mode):
                with open(path, "rb") as handle:
                    out[r] = ("file", stat.S_IMODE(st.st_mode), handle.read(), *extra)
            else:
                out[r] = ("other", stat.S_IFMT(st.st_mode), stat.S_IMODE(st.st_mode), *extra)

    walk(os.fsencode(top), b"")
    return out


def recorded_paths(project: Project, tree: Digest) -> set[str]:
    with project.store.reader() as reader:
        return {c.path for c in diff_trees(reader, None, tree)}


def write(path: Path | bytes, data: bytes, mode: int | None = None) -> None:
    with open(path, "wb") as handle:
        handle.write(data)
    if mode is not None:
        os.chmod(path, mode)


def remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink()


# -- the full round trip -----------------------------------------------------------------


def build_rich_tree(root: Path, outside: Path) -> None:
    write(root / "text.txt", b"hello\nworld\n")
    write(root / "binary.bin", bytes(range(256)) * 8)
    write(root / "empty", b"")
    write(root / "large.dat", os.urandom(1_500_000))  # over the chunking threshold
    write(root / "run.sh", b"#!/bin/sh\necho hi\n", 0o755)
    write(root / "readonly.txt", b"do not edit", 0o444)
    write(root / "private", b"secret", 0o600)
    (root / "src" / "pkg" / "deep").mkdir(parents=True)
    write(root / "src" / "main.py", b"print('main')\n")
    write(root / "src" / "pkg" / "mod.py", b"x = 1\n")
    write(root / "src" / "pkg" / "deep" / "leaf", b"leaf")
    (root / "locked").mkdir()
    write(root / "locked" / "inner", b"inner")
    (root / "locked").chmod(0o750)
    (root / "empty_dir").mkdir()
    (root / "to_file").mkdir()
    write(root / "to_file" / "child", b"child")
    os.symlink("text.txt", root / "link_to_file")
    os.symlink("src/pkg", root / "link_to_dir")
    os.symlink("nowhere/missing", root / "dangling")
    os.symlink(outside / "abs-target", root / "absolute")
    write(root / "ünïcödé 名前.txt", "unicode ✓".encode())
    write(os.path.join(os.fsencode(root), b"bad\xff"), b"undecodable name")


def mutate_everything(root: Path) -> None:
    write(root / "text.txt", b"edited\n")  # edit
    large = bytearray((root / "large.dat").read_bytes())
    large[700_000:700_010] = b"0123456789"
    write(root / "large.dat", bytes(large))  # edit inside a chunked file
    write(root / "new.txt", b"created")  # create
    (root / "newdir" / "nested").mkdir(parents=True)
    write(root / "newdir" / "nested" / "f", b"created deep")
    (root / "binary.bin").unlink()  # delete
    (root / "empty_dir").rmdir()
    os.unlink(os.path.join(os.fsencode(root), b"bad\xff"))
    os.rename(root / "src" / "pkg" / "mod.py", root / "src" / "pkg" / "renamed.py")  # rename
    os.rename(root / "ünïcödé 名前.txt", root / "plain.txt")
    (root / "run.sh").chmod(0o644)  # chmod
    (root / "readonly.txt").chmod(0o666)
    (root / "locked").chmod(0o700)
    (root / "empty").unlink()  # file -> dir
    (root / "empty").mkdir()
    write(root / "empty" / "inside", b"now a dir")
    shutil.rmtree(root / "src" / "pkg" / "deep")  # dir -> symlink
    os.symlink("../..", root / "src" / "pkg" / "deep")
    shutil.rmtree(root / "to_file")  # dir -> file
    write(root / "to_file", b"now a file")
    (root / "link_to_file").unlink()  # symlink -> file
    write(root / "link_to_file", b"now a regular file")
    (root / "dangling").unlink()  # symlink retargeted
    os.symlink("text.txt", root / "dangling")
    (root / "link_to_dir").unlink()  # symlink -> dir
    (root / "link_to_dir").mkdir()


def test_restore_brings_back_every_kind_of_entry_after_every_kind_of_change(
    root: Path, outside: Path, open_project: OpenProject
) -> None:
    build_rich_tree(root, outside)
    original = listing(root)
    project = open_project(root)
    recorded = project.snapshot("original")
    assert recorded.report.unrecorded == []
    mutate_everything(root)
    mutated = listing(root)
    assert mutated != original
    restored = project.restore(recorded.digest, may_delete=delete_everything)
    assert restored.result is not None
    assert restored.result.skipped == []
    assert restored.plan.skipped == []
    assert listing(root) == original
    assert project.snapshot().snapshot.tree == recorded.snapshot.tree
    assert listing(outside) == {b"keep.txt": ("file", 0o644, b"outside, never touched")}


def test_restore_can_itself_be_undone_from_its_before_snapshot(
    root: Path, outside: Path, open_project: OpenProject
) -> None:
    build_rich_tree(root, outside)
    project = open_project(root)
    recorded = project.snapshot("original")
    mutate_everything(root)
    mutated = listing(root)
    restored = project.restore(recorded.digest, may_delete=delete_everything)
    assert restored.before.snapshot.tree != recorded.snapshot.tree
    project.restore(restored.before.digest, may_delete=delete_everything)
    assert listing(root) == mutated


# -- the same, with random small trees and random changes ---------------------------------

NAMES = ["a", "b", "c", "é", "d.txt"]
file_nodes = st.tuples(
    st.just("file"), st.binary(max_size=24), st.sampled_from([0o644, 0o755, 0o600, 0o444])
)
link_nodes = st.tuples(
    st.just("link"), st.sampled_from([b"a", b"../b", b"/abs/target", b"c/a", b"missing"])
)
dir_modes = st.sampled_from([0o755, 0o700, 0o750])
nodes = st.recursive(
    file_nodes | link_nodes,
    lambda children: st.tuples(
        st.just("dir"), st.dictionaries(st.sampled_from(NAMES), children, max_size=4), dir_modes
    ),
    max_leaves=10,
)
trees = st.dictionaries(st.sampled_from(NAMES), nodes, max_size=5)


def materialize(path: Path, node: tuple) -> None:  # type: ignore[type-arg]
    if node[0] == "file":
        write(path, node[1], node[2])
    elif node[0] == "link":
        os.symlink(node[1], path)
    else:
        path.mkdir()
        for name, child in node[1].items():
            materialize(path / name, child)
        path.chmod(node[2])


def random_mutation(data: st.DataObject, root: Path) -> None:
    existing = sorted(os.fsdecode(p) for p in listing(root))
    op = data.draw(
        st.sampled_from(
            ["create", "edit", "delete", "chmod", "to_file", "to_dir", "to_link"]
            if existing
            else ["create"]
        )
    )
    if op == "create":
        parents = [""] + [
            p for p in existing if (root / p).is_dir() and not (root / p).is_symlink()
        ]
        parent = root / data.draw(st.sampled_from(parents))
        name = data.draw(st.sampled_from([*NAMES, "new"]))
        if not os.path.lexists(parent / name):
            write(parent / name, data.draw(st.binary(max_size=10)))
        return
    path = root / data.draw(st.sampled_from(existing))
    is_dir = path.is_dir() and not path.is_symlink()
    if op == "chmod" and not path.is_symlink():
        path.chmod(data.draw(dir_modes) if is_dir else data.draw(file_nodes)[2])
        return
    if op == "edit" and not is_dir and not path.is_symlink():
        path.unlink()
        write(path, data.draw(st.binary(max_size=24)))
        return
    remove(path)
    if op == "to_file":
        write(path, data.draw(st.binary(max_size=8)))
    elif op == "to_dir":
        path.mkdir()
        if data.draw(st.booleans()):
            write(path / "child", b"child")
    elif op == "to_link":
        os.symlink(data.draw(link_nodes)[1], path)


@settings(max_examples=25, suppress_health_check=[HealthCheck.too_slow])
@given(trees, st.data())
def test_restore_undoes_random_changes_to_random_trees(tree: dict, data: st.DataObject) -> None:  # type: ignore[type-arg]
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp, "root")
        root.mkdir()
        for name, node in tree.items():
            materialize(root / name, node)
        root = root.resolve()
        before = listing(root)
        with Project(root, home=Path(tmp, "home")) as project:
            recorded = project.snapshot()
            for _ in range(data.draw(st.integers(1, 4))):
                random_mutation(data, root)
            restored = project.restore(recorded.digest, may_delete=delete_everything)
            assert restored.plan.skipped == []
            assert restored.result is None or restored.result.skipped == []
            assert listing(root) == before


# -- the stat cache: an unchanged tree is not read again ---------------------------------


@pytest.fixture
def fast_tmp(tmp_path: Path) -> Iterator[Path]:
    """A directory on tmpfs when there is one: creating 10,000 files on disk is slow here."""
    shm = Path("/dev/shm")
    if shm.is_dir() and os.access(shm, os.W_OK):
        path = Path(tempfile.mkdtemp(dir=shm, prefix="earshot-test-"))
        yield path
        shutil.rmtree(path, ignore_errors=True)
    else:
        yield tmp_path


def test_second_snapshot_of_an_unchanged_10000_file_tree_opens_no_file(
    fast_tmp: Path, open_project: OpenProject
) -> None:
    root = (fast_tmp / "many").resolve()
    root.mkdir()
    for d in range(100):
        sub = root / f"dir{d:03d}"
        sub.mkdir()
        for f in range(100):
            write(sub / f"file{f:03d}.txt", f"{d}/{f}\n".encode())
    margin = 50_000_000
    time.sleep(0.1)  # every file is now older than the racy margin
    project = open_project(root, options=ScanOptions(racy_margin_ns=margin))

    opened: list[str] = []
    real_os_open, real_open = os.open, builtins.open

    def under_root(path: object) -> bool:
        return isinstance(path, (str, bytes, os.PathLike)) and os.fsdecode(path).startswith(
            str(root)
        )

    def counting_os_open(path, flags, mode=0o777, *, dir_fd=None):  # type: ignore[no-untyped-def]
        if under_root(path):
            opened.append(os.fsdecode(path))
        return real_os_open(path, flags, mode, dir_fd=dir_fd)

    def counting_open(file, *args, **kwargs):  # type: ignore[no-untyped-def]
        if under_root(file):
            opened.append(os.fsdecode(file))
        return real_open(file, *args, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(os, "open", counting_os_open)
        patch.setattr(builtins, "open", counting_open)
        first = project.snapshot()
        assert first.report.files == first.report.files_read == 10_000
        assert len(opened) == 10_000  # the control: the counter sees the scanner's reads
        opened.clear()
        second = project.snapshot()
    assert second.report.files_read == 0
    assert second.report.files == 10_000
    assert opened == []
    assert second.reused
    assert second.digest == first.digest


def test_second_snapshot_of_an_unchanged_tree_is_the_same_snapshot(
    root: Path, open_project: OpenProject
) -> None:
    write(root / "f", b"f")
    project = open_project(root)
    first = project.snapshot("one")
    second = project.snapshot("two")
    assert second.reused and second.digest == first.digest
    assert second.snapshot.note == "one"
    assert [d for d, _ in project.snapshots()] == [first.digest]


def test_same_size_edit_right_after_a_snapshot_with_mtime_put_back_is_seen(
    root: Path, open_project: OpenProject
) -> None:
    path = root / "f"
    write(path, b"version-1")
    project = open_project(root)
    first = project.snapshot()
    st_before = path.stat()
    write(path, b"version-2")
    os.utime(path, ns=(st_before.st_atime_ns, st_before.st_mtime_ns))
    assert (path.stat().st_size, path.stat().st_mtime_ns) == (
        st_before.st_size,
        st_before.st_mtime_ns,
    )
    second = project.snapshot()
    assert not second.reused
    assert second.digest != first.digest
    project.restore(first.digest)
    assert path.read_bytes() == b"version-1"


# -- what is never recorded, and never touched ----------------------------------------------


def make_git_dirs(root: Path) -> None:
    (root / ".git" / "objects" / "ab").mkdir(parents=True)
    write(root / ".git" / "HEAD", b"ref: refs/heads/main\n")
    write(root / ".git" / "objects" / "ab" / "cdef", b"\x78\x9c object")
    (root / "vendor" / "lib" / ".git").mkdir(parents=True)
    write(root / "vendor" / "lib" / ".git" / "config", b"[core]\n")
    (root / "worktree").mkdir(exist_ok=True)
    write(root / "worktree" / ".git", b"gitdir: ../.git/worktrees/wt\n")


def git_state(root: Path) -> dict[str, Listing]:
    return {
        ".git": listing(root / ".git", times=True),
        "vendor/lib/.git": listing(root / "vendor" / "lib" / ".git", times=True),
        "worktree/.git": {
            b"": (
                "file",
                (root / "worktree" / ".git").read_bytes(),
                (root / "worktree" / ".git").stat().st_ino,
            )
        },
    }


def test_git_directories_and_files_are_never_recorded_nor_touched_by_restore(
    root: Path, open_project: OpenProject
) -> None:
    write(root / "code.py", b"v1")
    (root / "worktree").mkdir()
    write(root / "worktree" / "w.txt", b"w")
    project = open_project(root)
    before_git = project.snapshot()  # a snapshot from before the repositories existed
    make_git_dirs(root)
    state = git_state(root)
    recorded = project.snapshot()
    paths = recorded_paths(project, recorded.snapshot.tree)
    assert not any(".git" in p.split("/") for p in paths)
    assert paths == {
        "code.py",
        "worktree/w.txt",
        "vendor/lib",
    }  # vendor/lib holds nothing else: empty dir
    write(root / "code.py", b"v2")
    project.restore(before_git.digest, may_delete=delete_everything)
    assert (root / "code.py").read_bytes() == b"v1"
    assert git_state(root) == state
    project.restore(recorded.digest, may_delete=delete_everything)
    assert git_state(root) == state


def test_small_ignored_files_are_kept_and_never_deleted_by_a_forced_restore(
    root: Path, open_project: OpenProject
) -> None:
    write(root / ".gitignore", b"*.log\nout/\n")
    write(root / "code.py", b"v1")
    project = open_project(root)
    clean = project.snapshot()
    write(root / "debug.log", b"log")
    (root / "out").mkdir()
    write(root / "out" / "out.o", b"obj")
    (root / "src").mkdir()
    write(root / "src" / "x.log", b"nested log")
    recorded = project.snapshot()
    assert recorded_paths(project, recorded.snapshot.tree) == {
        ".gitignore",
        "code.py",
        "debug.log",
        "out/out.o",
        "src/x.log",
    }
    write(root / "code.py", b"v2")
    project.restore(clean.digest, may_delete=delete_everything)
    assert (root / "code.py").read_bytes() == b"v1"
    assert (root / "debug.log").read_bytes() == b"log"
    assert (root / "out" / "out.o").read_bytes() == b"obj"
    assert (root / "src" / "x.log").read_bytes() == b"nested log"


def test_file_over_the_size_limit_is_unrecorded_and_never_overwritten_or_deleted(
    root: Path, open_project: OpenProject
) -> None:
    write(root / "big.bin", b"a" * 5000)
    write(root / "grows", b"small")
    project = open_project(root, options=ScanOptions(max_file_size=1000))
    first = project.snapshot()
    assert first.report.unrecorded == [("big.bin", Unrecorded.TOO_LARGE)]
    assert first.snapshot.unrecorded == 1
    write(root / "big.bin", b"b" * 6000)  # changed, still too large
    write(root / "grows", b"g" * 2000)  # now too large
    write(root / "new-big", b"n" * 3000)  # too large, not in the snapshot
    restored = project.restore(first.digest, may_delete=delete_everything)
    assert (root / "big.bin").read_bytes() == b"b" * 6000
    assert (root / "grows").read_bytes() == b"g" * 2000
    assert (root / "new-big").read_bytes() == b"n" * 3000
    assert {p for p, _ in restored.plan.skipped} == {"grows", "new-big"}


@pytest.mark.without_dac_override
def test_unreadable_file_is_unrecorded_and_left_alone_by_restore(
    root: Path, open_project: OpenProject
) -> None:
    write(root / "secret", b"s", 0)
    write(root / "f", b"1")
    project = open_project(root)
    try:
        recorded = project.snapshot()
        assert recorded.report.unrecorded == [("secret", Unrecorded.UNREADABLE)]
        write(root / "f", b"2")
        project.restore(recorded.digest, may_delete=delete_everything)
        assert (root / "f").read_bytes() == b"1"
        assert stat.S_IMODE((root / "secret").stat().st_mode) == 0
    finally:
        (root / "secret").chmod(0o600)
    assert (root / "secret").read_bytes() == b"s"


def test_fifo_is_unrecorded_the_scan_does_not_hang_and_restore_keeps_it(
    root: Path, open_project: OpenProject
) -> None:
    write(root / "f", b"1")
    os.mkfifo(root / "pipe")
    project = open_project(root)
    results: list[object] = []
    worker = threading.Thread(target=lambda: results.append(project.snapshot()), daemon=True)
    worker.start()
    worker.join(timeout=20)
    assert not worker.is_alive(), "snapshot blocked on a fifo"
    recorded = results[0]
    assert recorded.report.unrecorded == [("pipe", Unrecorded.SPECIAL)]  # type: ignore[attr-defined]
    write(root / "f", b"2")
    project.restore(recorded.digest, may_delete=delete_everything)  # type: ignore[attr-defined]
    assert stat.S_ISFIFO(os.lstat(root / "pipe").st_mode)
    assert (root / "f").read_bytes() == b"1"


def test_data_directory_inside_the_root_is_not_recorded(
    root: Path, open_project: OpenProject
) -> None:
    write(root / "f", b"1")
    home = root / "var" / "earshot"
    project = open_project(root, home=home)
    recorded = project.snapshot()
    assert recorded_paths(project, recorded.snapshot.tree) == {"f", "var"}
    assert project.store_dir.is_relative_to(home)
    write(root / "f", b"2")
    project.restore(recorded.digest, may_delete=delete_everything)
    assert (project.store_dir / "data.mdb").exists()
    assert project.snapshot().snapshot.tree == recorded.snapshot.tree


def test_data_home_equal_to_the_root_is_not_recorded(root: Path, open_project: OpenProject) -> None:
    write(root / "f", b"1")
    project = open_project(root, home=root)
    recorded = project.snapshot()
    assert recorded_paths(project, recorded.snapshot.tree) == {"f"}


def test_project_keeps_its_store_under_earshot_home(
    root: Path, earshot_home: Path, open_project: OpenProject
) -> None:
    project = open_project(root)
    assert project.store_dir.is_relative_to(earshot_home / "checkpoints")
    assert (project.store_dir / "data.mdb").exists()


def test_project_of_a_path_that_is_not_a_directory_raises(
    tmp_path: Path, earshot_home: Path
) -> None:
    write(tmp_path / "file", b"")
    with pytest.raises(NotADirectory):
        Project(tmp_path / "file")
    assert not (earshot_home / "checkpoints").exists()


# -- restore's guarantees --------------------------------------------------------------------


def test_restore_by_default_deletes_nothing_extra_and_reports_it_skipped(
    root: Path, open_project: OpenProject
) -> None:
    write(root / "f", b"1")
    project = open_project(root)
    recorded = project.snapshot()
    write(root / "f", b"2")
    write(root / "extra.txt", b"new work")
    (root / "extra_dir").mkdir()
    write(root / "extra_dir" / "more", b"more work")
    restored = project.restore(recorded.digest)
    assert (root / "f").read_bytes() == b"1"
    assert (root / "extra.txt").read_bytes() == b"new work"
    assert (root / "extra_dir" / "more").read_bytes() == b"more work"
    assert {p for p, _ in restored.plan.skipped} == {"extra.txt", "extra_dir/more"}
    assert restored.plan.deletes == [] and restored.plan.rmdirs == []


def test_restore_dry_run_changes_nothing_on_disk(root: Path, open_project: OpenProject) -> None:
    write(root / "f", b"1")
    (root / "d").mkdir()
    project = open_project(root)
    recorded = project.snapshot()
    write(root / "f", b"2")
    write(root / "new", b"n")
    (root / "d").rmdir()
    (root / "f").chmod(0o600)
    on_disk = listing(root, times=True)
    restored = project.restore(recorded.digest, may_delete=delete_everything, dry_run=True)
    assert restored.result is None
    assert not restored.plan.empty
    assert listing(root, times=True) == on_disk
    assert project.intents.pending() == []


def craft_tree(writer, *entries: tuple[bytes, Kind, Digest]) -> Digest:  # type: ignore[no-untyped-def]
    """A tree object written raw, bypassing encode_tree's name checks."""
    data = MAGIC
    for name, kind, digest in entries:
        data += (
            encode_uvarint(len(name))
            + name
            + bytes((kind,))
            + encode_uvarint(0o755 if kind is Kind.DIR else 0o644)
        )
        data += encode_uvarint(0 if kind is Kind.DIR else 4) + digest
    digest = tree_digest(data)
    writer._add(digest, ObjectType.TREE, data)
    return digest


@pytest.mark.parametrize("shape", ["dotdot-dir", "slash-name", "nested-dotdot"])
def test_restore_refuses_a_tree_naming_dotdot_and_writes_nothing(
    root: Path, tmp_path: Path, earshot_home: Path, open_project: OpenProject, shape: str
) -> None:
    write(root / "f", b"1")
    project = open_project(root)
    with project.store.writer() as writer:
        evil = writer.put_blob(b"evil")
        inner = writer.put_tree([TreeEntry(b"x", Kind.FILE, 0o644, 4, evil)])
        first = (b"!first", Kind.FILE, evil)  # sorts before "..": would be written first
        if shape == "dotdot-dir":
            tree = craft_tree(writer, first, (b"..", Kind.DIR, inner))
        elif shape == "slash-name":
            tree = craft_tree(writer, first, (b"../x", Kind.FILE, evil))
        else:
            tree = craft_tree(
                writer, first, (b"sub", Kind.DIR, craft_tree(writer, (b"..", Kind.DIR, inner)))
            )
        target = writer.put_snapshot(Snapshot(tree=tree, time_ns=1, root=str(project.root)))
    outside_before = listing(tmp_path, exclude=(os.fsencode(earshot_home.name),))
    with pytest.raises(CorruptTree):
        project.restore(target, may_delete=delete_everything)
    assert listing(tmp_path, exclude=(os.fsencode(earshot_home.name),)) == outside_before
    assert not (tmp_path / "x").exists() and not (root / "!first").exists()
    assert project.intents.pending() == []


@pytest.mark.parametrize("rule", [keep_everything, delete_everything], ids=["keep", "delete"])
def test_restore_over_a_symlink_to_an_outside_directory_writes_nothing_outside(
    root: Path, outside: Path, open_project: OpenProject, rule: object
) -> None:
    (root / "inner").mkdir()
    write(root / "inner" / "f", b"inside the root")
    project = open_project(root)
    recorded = project.snapshot()
    shutil.rmtree(root / "inner")
    os.symlink(outside, root / "inner")
    outside_before = listing(outside, times=True)
    restored = project.restore(recorded.digest, may_delete=rule)  # type: ignore[arg-type]
    assert listing(outside, times=True) == outside_before
    # The link is replaced because the plan says so: the target has a directory there.
    assert ("inner", Kind.SYMLINK) in [(p, e.kind) for p, e in restored.plan.deletes]
    assert "inner" in [p for p, _ in restored.plan.mkdirs]
    assert not (root / "inner").is_symlink()
    assert (root / "inner" / "f").read_bytes() == b"inside the root"


def test_restore_replaces_a_hard_linked_file_instead_of_writing_through_it(
    root: Path, outside: Path, open_project: OpenProject
) -> None:
    write(root / "f", b"version-1")
    os.link(root / "f", root / "g")
    project = open_project(root)
    recorded = project.snapshot()
    os.link(root / "f", outside / "twin")
    with open(root / "f", "r+b") as handle:  # edited in place: all three names see it
        handle.write(b"VERSION-2")
    project.restore(recorded.digest)
    assert (root / "f").read_bytes() == (root / "g").read_bytes() == b"version-1"
    assert (outside / "twin").read_bytes() == b"VERSION-2"


_KILLED_MID_WRITE = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from earshot.cas.digest import from_hex
    from earshot.cas.project import Project

    Project(sys.argv[1], home=Path(sys.argv[2])).restore(from_hex(sys.argv[3]))
    """
)


def test_restore_killed_mid_write_leaves_an_intent_that_finish_restore_completes(
    root: Path, earshot_home: Path
) -> None:
    write(root / "f", b"version-1")
    (root / "sub").mkdir()
    write(root / "sub" / "g", b"g-1")
    with Project(root) as project:
        recorded = project.snapshot()
    write(root / "f", b"version-2")
    write(root / "sub" / "g", b"g-2")
    child = subprocess.run(
        [
            sys.executable,
            "-c",
            _KILLED_MID_WRITE,
            str(root),
            str(earshot_home),
            to_hex(recorded.digest),
        ],
        check=False,
        capture_output=True,
        env={**os.environ, "EARSHOT_FAULTS": "restore-rename@2"},
    )
    # Killed where the fault point says: the second file written, not renamed.
    assert child.returncode == -signal.SIGKILL, child.stderr
    assert b"earshot-fault: restore-rename" in child.stderr
    temps = [p for p in root.rglob(f"{TEMP_PREFIX}*")]
    assert len(temps) == 1
    with Project(root) as project:
        (pending,) = project.intents.pending()
        assert pending.kind == "restore" and pending.doc["target"] == to_hex(recorded.digest)
        held = project.intents.claim(pending)
        assert held is not None
        project.finish_restore(held)
        assert project.intents.pending() == []
    assert not list(root.rglob(f"{TEMP_PREFIX}*"))
    assert (root / "f").read_bytes() == b"version-1"
    assert (root / "sub" / "g").read_bytes() == b"g-1"


def test_an_intent_whose_owner_lives_is_not_claimed(root: Path, open_project: OpenProject) -> None:
    project = open_project(root)
    held = project.intents.begin("restore", {"target": "00"})
    (pending,) = project.intents.pending()
    assert project.intents.is_live(pending)
    assert project.intents.claim(pending) is None
    held.close()  # the owner gives up (dies): now anyone may finish it
    assert not project.intents.is_live(pending)
    claimed = project.intents.claim(pending)
    assert claimed is not None
    project.intents.drop(claimed)
    assert project.intents.pending() == []


# -- naming snapshots -------------------------------------------------------------------------


def test_resolve_finds_a_snapshot_by_full_id_or_unique_prefix(
    root: Path, open_project: OpenProject
) -> None:
    write(root / "f", b"1")
    project = open_project(root)
    first = project.snapshot().digest
    write(root / "f", b"2")
    second = project.snapshot().digest
    assert project.resolve(to_hex(first)) == first
    assert project.resolve(to_hex(second)[:8]) == second
    assert project.resolve(" " + to_hex(second)[:12].upper() + "\n") == second
    assert [d for d, _ in project.snapshots()] == [second, first]  # newest first


@pytest.mark.parametrize("text", ["abc", "not-hex!", "0" * 65])
def test_resolve_refuses_text_that_is_not_a_usable_id(
    root: Path, open_project: OpenProject, text: str
) -> None:
    project = open_project(root)
    with pytest.raises(BadDigest):
        project.resolve(text)


def test_resolve_of_an_unknown_id_raises_no_such_snapshot(
    root: Path, open_project: OpenProject
) -> None:
    project = open_project(root)
    recorded = project.snapshot().digest
    unknown = "0" * 64 if recorded.hex()[0] != "0" else "f" * 64
    with pytest.raises(NoSuchSnapshot):
        project.resolve(unknown)
    with pytest.raises(NoSuchSnapshot):
        project.resolve(unknown[:8])


def test_resolve_of_a_prefix_shared_by_two_snapshots_raises_ambiguous_id(
    root: Path, open_project: OpenProject
) -> None:
    project = open_project(root)
    a = Digest(bytes.fromhex("deadbeef") + b"\x01" * 28)
    b = Digest(bytes.fromhex("deadbeef") + b"\x02" * 28)
    with project.store.backend.write() as batch:
        schema.list_snapshot(batch, a, 1)
        schema.list_snapshot(batch, b, 2)
    with pytest.raises(AmbiguousId):
        project.resolve("deadbeef")
    assert project.resolve("deadbeef" + "01" * 4) == a


def test_scoped_restage_on_an_older_recorded_tree_keeps_exact_counts_without_walking(
    root: Path, open_project: OpenProject, monkeypatch: pytest.MonkeyPatch
) -> None:
    from earshot.cas.objects import ObjectReader

    for d in range(40):
        (root / f"d{d}").mkdir()
        (root / f"d{d}" / "f.txt").write_text(f"{d}\n")
    project = open_project(root)
    older = project.snapshot("older")
    (root / "d1" / "f.txt").write_text("changed, so the head moves on\n")
    project.snapshot("head")
    (root / "d2" / "f.txt").write_text("named below\n")
    read: list[Digest] = []
    real_read_tree = ObjectReader.read_tree

    def counting(self: ObjectReader, digest: Digest) -> list[TreeEntry]:
        read.append(digest)
        return real_read_tree(self, digest)

    monkeypatch.setattr(ObjectReader, "read_tree", counting)
    rec = project.record(["d2/f.txt"], base=older.snapshot.tree, listed=False)
    assert len(set(read)) <= 3  # the root and d2, not the 40 directories
    content = sum(len(f"{d}\n") for d in range(40)) - len("2\n") + len("named below\n")
    assert (rec.snapshot.files, rec.snapshot.content_bytes) == (40, content)


def test_gc_drops_the_counts_of_trees_no_snapshot_keeps(
    root: Path, open_project: OpenProject
) -> None:
    (root / "a").write_text("a\n")
    project = open_project(root)
    first = project.snapshot("first")
    (root / "a").write_text("b\n")
    project.snapshot("second")
    project.forget([first.digest])
    project.gc()
    with project.store.backend.read() as view:
        trees = {k for k, _ in view.items("counts")}
    assert first.snapshot.tree not in trees and len(trees) == 1
