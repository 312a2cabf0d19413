"""Restore: the plan (what would change) and the Applier (doing it, never outside the root)."""

from __future__ import annotations

import itertools
import os
import stat
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from trees import build_tree

from earshot.cas.apply import (
    HOLE_BLOCK,
    Applier,
    RestoreResult,
    remove_temp_files,
    write_sparse,
)
from earshot.cas.backend import MemoryBackend
from earshot.cas.digest import Digest, blob_digest
from earshot.cas.objects import MissingObject, ObjectStore
from earshot.cas.recording import TEMP_PREFIX
from earshot.cas.restore import (
    RestorePlan,
    delete_everything,
    keep_everything,
    plan_restore,
)
from earshot.cas.tree import MAGIC, CorruptTree, Kind, TreeEntry
from earshot.cas.varint import encode_uvarint


@pytest.fixture
def store() -> ObjectStore:
    return ObjectStore(MemoryBackend())


def plan(
    store: ObjectStore, current: dict | None, target: dict, rule=keep_everything
) -> RestorePlan:  # type: ignore[no-untyped-def]
    with store.writer() as writer:
        cur = build_tree(writer, current) if current is not None else None
        tgt = build_tree(writer, target)
    with store.reader() as reader:
        return plan_restore(reader, cur, tgt, rule)


def paths(pairs: list) -> list[str]:  # type: ignore[type-arg]
    return [p if isinstance(p, str) else p[0] for p in pairs]


# -- planning ----------------------------------------------------------------------------


def test_plan_of_identical_trees_is_empty(store: ObjectStore) -> None:
    spec = {"a": b"1", "d": {"b": b"2"}, "l": ("link", b"a")}
    result = plan(store, spec, dict(spec), delete_everything)
    assert result.empty and result.skipped == []


def test_plan_writes_changed_and_missing_files_and_links(store: ObjectStore) -> None:
    result = plan(
        store,
        {"same": b"s", "edited": b"old", "l": ("link", b"old")},
        {"same": b"s", "edited": b"new", "l": ("link", b"new"), "missing": b"m"},
    )
    assert sorted(paths(result.writes)) == ["edited", "l", "missing"]
    assert not (result.mkdirs or result.deletes or result.rmdirs or result.chmods)


def test_plan_creates_missing_directories_and_writes_their_content(store: ObjectStore) -> None:
    result = plan(store, {}, {"d": {"sub": {"f": b"1"}, "empty": {}}})
    assert sorted(paths(result.mkdirs)) == ["d", "d/empty", "d/sub"]
    assert paths(result.writes) == ["d/sub/f"]


def test_plan_chmods_entries_whose_only_change_is_their_mode(store: ObjectStore) -> None:
    result = plan(
        store,
        {"f": b"1", "d": {"x": b"1"}},
        {"f": ("x", b"1"), "d": ("dir", 0o700, {"x": b"1"})},
    )
    assert sorted(paths(result.chmods)) == ["d", "f"]
    assert result.writes == []


def test_plan_keeps_extra_paths_by_default_and_reports_each_as_skipped(store: ObjectStore) -> None:
    result = plan(store, {"keep": b"k", "extra": b"e", "xd": {"inner": b"i"}}, {"keep": b"k"})
    assert result.deletes == [] and result.rmdirs == []
    assert sorted(paths(result.skipped)) == ["extra", "xd/inner"]
    assert result.empty


def test_plan_deletes_extra_paths_and_directories_when_the_rule_allows(store: ObjectStore) -> None:
    result = plan(
        store,
        {"keep": b"k", "extra": b"e", "xd": {"inner": b"i", "deeper": {"z": b"z"}}},
        {"keep": b"k"},
        delete_everything,
    )
    assert sorted(paths(result.deletes)) == ["extra", "xd/deeper/z", "xd/inner"]
    assert sorted(result.rmdirs) == ["xd", "xd/deeper"]
    assert result.skipped == []


def test_plan_keeps_extra_paths_the_targets_own_ignore_files_ignore_whatever_the_rule(
    store: ObjectStore,
) -> None:
    asked: list[str] = []

    def rule(path: str, entry: TreeEntry) -> bool:
        asked.append(path)
        return True

    result = plan(
        store,
        {
            ".gitignore": b"",
            "secret.env": b"s",
            "extra": b"e",
            "build": {"out.o": b"o"},
            "sub": {".gitignore": b"", "x.tmp": b"t", "keep": b"k"},
            "lib": {"vendored.c": b"v", "new.c": b"n"},
        },
        {
            ".gitignore": b"secret.env\nbuild/\nlib/\n",
            "sub": {".gitignore": b"*.tmp\n", "keep": b"k"},
            "lib": {"vendored.c": b"v"},  # tracked below an ignored directory
        },
        rule,
    )
    assert paths(result.deletes) == ["extra"]
    assert asked == ["extra"]
    kept = dict(result.skipped)
    assert set(kept) == {"secret.env", "build", "sub/x.tmp", "lib/new.c"}
    assert set(kept.values()) == {"ignored by the snapshot's rules; kept"}


def test_plan_asks_the_rule_about_each_extra_path_and_keeps_a_directory_with_kept_content(
    store: ObjectStore,
) -> None:
    asked: list[tuple[str, Kind]] = []

    def only_tmp(path: str, e: TreeEntry) -> bool:
        asked.append((path, e.kind))
        return path.endswith(".tmp")

    result = plan(store, {"a.tmp": b"1", "d": {"b.tmp": b"2", "keep": b"3"}}, {}, only_tmp)
    assert sorted(asked) == [("a.tmp", Kind.FILE), ("d/b.tmp", Kind.FILE), ("d/keep", Kind.FILE)]
    assert sorted(paths(result.deletes)) == ["a.tmp", "d/b.tmp"]
    assert result.rmdirs == []
    assert paths(result.skipped) == ["d/keep"]


@pytest.mark.parametrize("rule", [keep_everything, delete_everything], ids=["keep", "delete"])
def test_plan_never_writes_overwrites_or_deletes_unrecorded_entries(
    store: ObjectStore, rule: object
) -> None:
    result = plan(
        store,
        {
            "now-big": ("big", 5000),
            "was-big": b"small now",
            "extra-big": ("big", 9),
            "both": ("big", 1),
        },
        {
            "now-big": b"old small",
            "was-big": ("big", 7000),
            "lost-big": ("big", 1),
            "both": ("big", 2),
        },
        rule,
    )
    assert result.empty
    assert sorted(paths(result.skipped)) == ["extra-big", "lost-big", "now-big"]


@pytest.mark.parametrize("rule", [keep_everything, delete_everything], ids=["keep", "delete"])
def test_plan_replaces_a_file_or_link_in_the_way_of_a_directory(
    store: ObjectStore, rule: object
) -> None:
    result = plan(store, {"a": b"file", "b": ("link", b"x")}, {"a": {"f": b"1"}, "b": {}}, rule)
    assert sorted(paths(result.mkdirs)) == ["a", "b"]
    assert sorted(paths(result.deletes)) == ["a", "b"]
    assert paths(result.writes) == ["a/f"]


def test_plan_keeps_a_directory_in_the_way_of_a_file_unless_its_content_may_go(
    store: ObjectStore,
) -> None:
    current, target = {"a": {"inner": b"i"}}, {"a": b"file"}
    kept = plan(store, current, target)
    assert kept.writes == [] and kept.rmdirs == []
    assert ("a", "a directory with kept content is in the way") in kept.skipped
    replaced = plan(store, current, target, delete_everything)
    assert paths(replaced.deletes) == ["a/inner"]
    assert replaced.rmdirs == ["a"]
    assert paths(replaced.writes) == ["a"]


def raw_tree(*entries: tuple[bytes, Kind, Digest]) -> bytes:
    out = MAGIC
    for name, kind, digest in entries:
        out += (
            encode_uvarint(len(name))
            + name
            + bytes((kind,))
            + encode_uvarint(0o755)
            + encode_uvarint(0)
            + digest
        )
    return out


@pytest.mark.parametrize("bad_name", [b"..", b".", b"../x", b"a/b"])
def test_plan_refuses_a_target_tree_naming_a_path_outside_its_directory(
    store: ObjectStore, bad_name: bytes
) -> None:
    from earshot.cas.digest import tree_digest
    from earshot.cas.objects import ObjectType

    with store.writer() as writer:
        inner = build_tree(writer, {"x": b"evil"})
        bad = raw_tree((bad_name, Kind.DIR, inner))
        bad_digest = tree_digest(bad)
        writer._add(bad_digest, ObjectType.TREE, bad)
        root = writer.put_tree([TreeEntry(b"sub", Kind.DIR, 0o755, 0, bad_digest)])
    with store.reader() as reader, pytest.raises(CorruptTree):
        plan_restore(reader, None, root, delete_everything)


# -- applying ----------------------------------------------------------------------------


def listing(top: Path) -> dict[str, tuple]:  # type: ignore[type-arg]
    out: dict[str, tuple] = {}  # type: ignore[type-arg]
    for dirpath, dirnames, filenames in os.walk(top):
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            st = p.lstat()
            rel = str(p.relative_to(top))
            if stat.S_ISLNK(st.st_mode):
                out[rel] = ("link", os.readlink(p))
            elif stat.S_ISDIR(st.st_mode):
                out[rel] = ("dir", stat.S_IMODE(st.st_mode))
            else:
                out[rel] = ("file", stat.S_IMODE(st.st_mode), p.read_bytes(), st.st_ino)
    return out


@pytest.fixture
def root(tmp_path: Path) -> Path:
    r = tmp_path / "root"
    r.mkdir()
    return r


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    o = tmp_path / "outside"
    o.mkdir()
    (o / "keep.txt").write_bytes(b"outside content")
    (o / "sub").mkdir()
    return o


def apply(store: ObjectStore, root: Path, p: RestorePlan, tag: str = "t1") -> RestoreResult:
    with store.reader() as reader:
        return Applier(str(root), reader, tag).apply(p)


def fentry(store: ObjectStore, name: bytes, data: bytes, mode: int = 0o644) -> TreeEntry:
    with store.writer() as writer:
        return TreeEntry(name, Kind.FILE, mode, len(data), writer.put_blob(data))


def no_temp_files(top: Path) -> bool:
    return not any(TEMP_PREFIX in str(p) for p in top.rglob("*"))


def test_applier_writes_files_and_links_with_their_modes_and_leaves_no_temp_file(
    store: ObjectStore, root: Path
) -> None:
    (root / "over").write_bytes(b"old content")
    (root / "over").chmod(0o600)
    with store.writer() as writer:
        link = TreeEntry(b"l", Kind.SYMLINK, 0o777, 6, writer.put_blob(b"target"))
    p = RestorePlan(
        writes=[
            ("over", fentry(store, b"over", b"new", 0o755)),
            ("fresh", fentry(store, b"fresh", b"", 0o444)),
            ("l", link),
        ]
    )
    result = apply(store, root, p)
    assert sorted(result.written) == ["fresh", "l", "over"]
    assert (root / "over").read_bytes() == b"new"
    assert stat.S_IMODE((root / "over").stat().st_mode) == 0o755
    assert stat.S_IMODE((root / "fresh").stat().st_mode) == 0o444
    assert os.readlink(root / "l") == "target"
    assert no_temp_files(root)


def test_applier_writes_runs_of_zeros_as_holes_and_the_same_bytes(
    store: ObjectStore, root: Path
) -> None:
    # Zero runs at unaligned offsets and across chunk boundaries, data at both ends.
    data = b"x" * 5000 + bytes(3 << 20) + b"y" * 70_000 + bytes(2 << 20) + b"z"
    with store.writer() as writer:
        digest = writer.put_large(data)
    big = TreeEntry(b"big", Kind.FILE, 0o644, len(data), digest)
    zeros = TreeEntry(
        b"zeros", Kind.FILE, 0o644, 1 << 20, fentry(store, b"z", bytes(1 << 20)).digest
    )
    apply(store, root, RestorePlan(writes=[("big", big), ("zeros", zeros)]))
    assert (root / "big").read_bytes() == data
    assert (root / "zeros").read_bytes() == bytes(1 << 20)
    if hasattr(os, "SEEK_HOLE"):
        with open(root / "big", "rb") as f:
            assert os.lseek(f.fileno(), 0, os.SEEK_HOLE) < len(data)
    assert (root / "big").stat().st_blocks * 512 < 1 << 20
    assert (root / "zeros").stat().st_blocks == 0


@settings(max_examples=40)
@given(
    runs=st.lists(
        st.tuples(st.booleans(), st.integers(1, 3 * HOLE_BLOCK)), min_size=1, max_size=12
    ),
    cuts=st.lists(st.integers(0, 40_000), max_size=4),
)
@example(runs=[(True, 2 * HOLE_BLOCK)], cuts=[])
@example(runs=[(False, 10), (True, HOLE_BLOCK), (False, 1)], cuts=[HOLE_BLOCK + 10])
def test_write_sparse_writes_the_same_bytes_whatever_the_pieces(
    tmp_path_factory: pytest.TempPathFactory,
    runs: list[tuple[bool, int]],
    cuts: list[int],
) -> None:
    data = b"".join(bytes(n) if zero else b"\x01" * n for zero, n in runs)
    bounds = sorted({0, len(data), *(c for c in cuts if c < len(data))})
    path = tmp_path_factory.mktemp("sparse") / "f"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
    try:
        for lo, hi in itertools.pairwise(bounds):
            write_sparse(fd, data[lo:hi], lo)
        os.ftruncate(fd, len(data))
    finally:
        os.close(fd)
    assert path.read_bytes() == data


def test_applier_creates_a_read_only_directory_after_writing_into_it(
    store: ObjectStore, root: Path
) -> None:
    ro = TreeEntry(b"ro", Kind.DIR, 0o555, 0, Digest(b"\0" * 32))
    p = RestorePlan(mkdirs=[("ro", ro)], writes=[("ro/f", fentry(store, b"f", b"inside"))])
    result = apply(store, root, p)
    assert result.skipped == []
    assert (root / "ro" / "f").read_bytes() == b"inside"
    assert stat.S_IMODE((root / "ro").stat().st_mode) == 0o555
    (root / "ro").chmod(0o755)


SYMLINK_ACTIONS = {
    "write": lambda s: RestorePlan(writes=[("link/x", fentry(s, b"x", b"evil"))]),
    "overwrite": lambda s: RestorePlan(writes=[("link/keep.txt", fentry(s, b"keep.txt", b"evil"))]),
    "mkdir": lambda s: RestorePlan(
        mkdirs=[("link/newdir", TreeEntry(b"newdir", Kind.DIR, 0o755, 0, Digest(b"\0" * 32)))]
    ),
    "delete": lambda s: RestorePlan(
        deletes=[("link/keep.txt", fentry(s, b"keep.txt", b"outside content"))]
    ),
    "rmdir": lambda s: RestorePlan(rmdirs=["link/sub"]),
    "chmod": lambda s: RestorePlan(
        chmods=[("link/keep.txt", fentry(s, b"keep.txt", b"outside content", 0o777))]
    ),
}


@pytest.mark.parametrize("make_plan", list(SYMLINK_ACTIONS.values()), ids=list(SYMLINK_ACTIONS))
def test_applier_skips_anything_below_a_symlinked_directory_and_changes_nothing_outside(
    store: ObjectStore, root: Path, outside: Path, make_plan: object
) -> None:
    os.symlink(outside, root / "link")
    before = listing(outside)
    p = make_plan(store)  # type: ignore[operator]
    result = apply(store, root, p)
    assert listing(outside) == before
    assert result.skipped  # (a new directory's own chmod is skipped once more)
    for path, reason in result.skipped:
        assert path.startswith("link/")
        assert "symlink" in reason
    assert not (
        result.written
        or result.deleted
        or result.created_dirs
        or result.removed_dirs
        or result.modes
    )
    assert os.readlink(root / "link") == str(outside)


def test_applier_skips_a_write_below_a_path_that_is_a_file(store: ObjectStore, root: Path) -> None:
    (root / "plain").write_bytes(b"p")
    result = apply(store, root, RestorePlan(writes=[("plain/x", fentry(store, b"x", b"1"))]))
    assert paths(result.skipped) == ["plain/x"]
    assert (root / "plain").read_bytes() == b"p"


def test_applier_replaces_a_hard_linked_file_instead_of_writing_through_it(
    store: ObjectStore, root: Path, outside: Path
) -> None:
    (root / "f").write_bytes(b"shared")
    os.link(root / "f", outside / "twin")
    apply(store, root, RestorePlan(writes=[("f", fentry(store, b"f", b"restored"))]))
    assert (root / "f").read_bytes() == b"restored"
    assert (outside / "twin").read_bytes() == b"shared"
    assert (root / "f").stat().st_ino != (outside / "twin").stat().st_ino


def test_applier_keeps_a_file_that_changed_since_it_was_planned_for_deletion(
    store: ObjectStore, root: Path
) -> None:
    (root / "f").write_bytes(b"changed meanwhile")
    result = apply(store, root, RestorePlan(deletes=[("f", fentry(store, b"f", b"as planned"))]))
    assert (root / "f").read_bytes() == b"changed meanwhile"
    assert result.deleted == []
    assert paths(result.skipped) == ["f"]


def test_applier_keeps_a_file_in_the_way_of_a_new_directory_if_it_changed_since_planned(
    store: ObjectStore, root: Path
) -> None:
    (root / "a").write_bytes(b"planned")
    with store.writer() as writer:
        current = build_tree(writer, {"a": b"planned"})
        target = build_tree(writer, {"a": {"f": b"1"}})
    with store.reader() as reader:
        p = plan_restore(reader, current, target)
    assert paths(p.deletes) == ["a"] and paths(p.mkdirs) == ["a"]
    (root / "a").write_bytes(b"written after the plan")
    result = apply(store, root, p)
    assert ("a", "changed since it was planned; kept") in result.skipped
    assert (root / "a").read_bytes() == b"written after the plan"


def test_applier_keeps_a_directory_that_is_not_empty(store: ObjectStore, root: Path) -> None:
    (root / "d").mkdir()
    (root / "d" / "unknown").write_bytes(b"u")
    result = apply(store, root, RestorePlan(rmdirs=["d"]))
    assert (root / "d" / "unknown").read_bytes() == b"u"
    assert result.removed_dirs == []
    assert paths(result.skipped) == ["d"]


def test_applier_does_not_write_over_a_directory_in_the_way(store: ObjectStore, root: Path) -> None:
    (root / "d").mkdir()
    (root / "d" / "inner").write_bytes(b"i")
    result = apply(store, root, RestorePlan(writes=[("d", fentry(store, b"d", b"file"))]))
    assert (root / "d" / "inner").read_bytes() == b"i"
    assert paths(result.skipped) == ["d"]
    assert no_temp_files(root)


def test_applier_removes_and_replaces_in_dependency_order(store: ObjectStore, root: Path) -> None:
    (root / "a").mkdir()
    (root / "a" / "b").mkdir()
    (root / "a" / "b" / "f").write_bytes(b"f")
    (root / "x").write_bytes(b"file in the way")
    with store.writer() as writer:
        current = build_tree(writer, {"a": {"b": {"f": b"f"}}, "x": b"file in the way"})
        target = build_tree(writer, {"a": b"now a file", "x": {"y": {"z": b"deep"}}})
    with store.reader() as reader:
        p = plan_restore(reader, current, target, delete_everything)
    result = apply(store, root, p)
    assert result.skipped == []
    assert listing(root) == {
        "a": ("file", 0o644, b"now a file", (root / "a").stat().st_ino),
        "x": ("dir", 0o755),
        "x/y": ("dir", 0o755),
        "x/y/z": ("file", 0o644, b"deep", (root / "x" / "y" / "z").stat().st_ino),
    }


def test_applier_write_of_a_missing_blob_fails_and_leaves_the_file_and_no_temp_file(
    store: ObjectStore, root: Path
) -> None:
    (root / "f").write_bytes(b"original")
    missing = TreeEntry(b"f", Kind.FILE, 0o644, 3, blob_digest(b"not stored"))
    with pytest.raises(MissingObject):
        apply(store, root, RestorePlan(writes=[("f", missing)]))
    assert (root / "f").read_bytes() == b"original"
    assert no_temp_files(root)


def test_remove_temp_files_removes_only_the_tagged_temp_files(root: Path) -> None:
    (root / "d").mkdir()
    for where in (root, root / "d"):
        (where / f"{TEMP_PREFIX}tag1-1").write_bytes(b"x")
        (where / f"{TEMP_PREFIX}tag1-22").write_bytes(b"x")
        (where / f"{TEMP_PREFIX}other-1").write_bytes(b"x")
        (where / "normal").write_bytes(b"x")
    removed = remove_temp_files(str(root), ["", "d", "does/not/exist"], "tag1")
    assert removed == 4
    for where in (root, root / "d"):
        assert sorted(p.name for p in where.iterdir() if p.is_file()) == [
            f"{TEMP_PREFIX}other-1",
            "normal",
        ]
