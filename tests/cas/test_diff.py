"""diff_trees: what changed between two trees, without descending into equal subtrees."""

from __future__ import annotations

from collections import Counter

import pytest
from trees import build_tree

from earshot.cas.backend import MemoryBackend
from earshot.cas.diff import Change, ChangeKind, diff_trees
from earshot.cas.digest import Digest
from earshot.cas.objects import ObjectReader, ObjectStore
from earshot.cas.tree import TreeEntry


@pytest.fixture
def store() -> ObjectStore:
    return ObjectStore(MemoryBackend())


def diff(store: ObjectStore, old: dict | None, new: dict | None) -> list[tuple[str, ChangeKind]]:
    with store.writer() as writer:
        a = build_tree(writer, old) if old is not None else None
        b = build_tree(writer, new) if new is not None else None
    with store.reader() as reader:
        return [(c.path, c.kind) for c in diff_trees(reader, a, b)]


BASE = {
    "a.txt": b"a",
    "run": ("x", b"#!"),
    "ln": ("link", b"a.txt"),
    "src": {"m.py": b"m", "sub": {"deep": b"d"}},
}

CASES = {
    "added-file": ({"a": b"1"}, {"a": b"1", "b": b"2"}, [("b", ChangeKind.ADDED)]),
    "deleted-file": ({"a": b"1", "b": b"2"}, {"a": b"1"}, [("b", ChangeKind.DELETED)]),
    "modified-file": ({"a": b"1"}, {"a": b"2"}, [("a", ChangeKind.MODIFIED)]),
    "modified-link-target": (
        {"l": ("link", b"x")},
        {"l": ("link", b"y")},
        [("l", ChangeKind.MODIFIED)],
    ),
    "file-mode": ({"a": b"1"}, {"a": ("x", b"1")}, [("a", ChangeKind.MODE)]),
    "file-to-link": ({"a": b"x"}, {"a": ("link", b"x")}, [("a", ChangeKind.TYPE)]),
    "file-to-unrecorded": ({"a": b"x"}, {"a": ("big", 10)}, [("a", ChangeKind.TYPE)]),
    "unrecorded-size": ({"a": ("big", 10)}, {"a": ("big", 11)}, [("a", ChangeKind.MODIFIED)]),
    "file-to-empty-dir": ({"a": b"x"}, {"a": {}}, [("a", ChangeKind.TYPE)]),
    "file-to-dir": (
        {"a": b"x"},
        {"a": {"f": b"1"}},
        [("a", ChangeKind.TYPE), ("a/f", ChangeKind.ADDED)],
    ),
    "dir-to-file": (
        {"a": {"f": b"1"}},
        {"a": b"x"},
        [("a", ChangeKind.TYPE), ("a/f", ChangeKind.DELETED)],
    ),
    "empty-dir-added": ({}, {"e": {}}, [("e", ChangeKind.ADDED)]),
    "empty-dir-deleted": ({"e": {}}, {}, [("e", ChangeKind.DELETED)]),
    "dir-added-through-its-files": (
        {},
        {"d": {"x": b"1", "sub": {"y": b"2"}}},
        [("d/sub/y", ChangeKind.ADDED), ("d/x", ChangeKind.ADDED)],
    ),
    "dir-deleted-through-its-files": ({"d": {"x": b"1"}}, {}, [("d/x", ChangeKind.DELETED)]),
    "dir-mode-only": (
        {"d": {"x": b"1"}},
        {"d": ("dir", 0o700, {"x": b"1"})},
        [("d", ChangeKind.MODE)],
    ),
    "deep-change-has-full-path": (
        BASE,
        {**BASE, "src": {"m.py": b"m", "sub": {"deep": b"D"}}},
        [("src/sub/deep", ChangeKind.MODIFIED)],
    ),
    "undecodable-name": ({}, {b"bad\xff": b"1"}, [("bad\udcff", ChangeKind.ADDED)]),
    "everything-from-nothing": (
        None,
        {"a": b"1", "d": {"b": b"2"}},
        [("a", ChangeKind.ADDED), ("d/b", ChangeKind.ADDED)],
    ),
    "everything-to-nothing": ({"a": b"1"}, None, [("a", ChangeKind.DELETED)]),
    "identical": (BASE, dict(BASE), []),
}


@pytest.mark.parametrize(("old", "new", "expected"), list(CASES.values()), ids=list(CASES))
def test_diff_reports_each_kind_of_change(
    store: ObjectStore, old: dict | None, new: dict | None, expected: list[tuple[str, ChangeKind]]
) -> None:
    assert diff(store, old, new) == expected


def test_diff_changes_carry_the_old_and_new_entries(store: ObjectStore) -> None:
    with store.writer() as writer:
        a = build_tree(writer, {"f": b"one", "gone": b"g"})
        b = build_tree(writer, {"f": b"two", "new": b"n"})
    with store.reader() as reader:
        changes = {c.path: c for c in diff_trees(reader, a, b)}
    f = changes["f"]
    assert isinstance(f, Change)
    assert f.old is not None and f.new is not None
    assert (f.old.digest, f.new.digest) == (writer.put_blob(b"one"), writer.put_blob(b"two"))
    assert changes["gone"].new is None and changes["gone"].old is not None
    assert changes["new"].old is None and changes["new"].new is not None


def test_diff_lists_changes_in_tree_order(store: ObjectStore) -> None:
    old = {"b": b"1", "a": {"z": b"1", "y": b"1"}, "c": b"1"}
    new = {"b": b"2", "a": {"z": b"2", "y": b"2"}, "c": b"2"}
    assert [p for p, _ in diff(store, old, new)] == ["a/y", "a/z", "b", "c"]


class CountingReader:
    """An ObjectReader that counts which trees are read."""

    def __init__(self, reader: ObjectReader) -> None:
        self._reader = reader
        self.reads: Counter[Digest] = Counter()

    def read_tree(self, digest: Digest) -> list[TreeEntry]:
        self.reads[digest] += 1
        return self._reader.read_tree(digest)


def test_diff_does_not_descend_into_equal_subtrees(store: ObjectStore) -> None:
    unchanged = {f"f{i}": str(i).encode() for i in range(20)}
    old_spec = {
        "same": {"deep": dict(unchanged), "also": dict(unchanged)},
        "changed": {"x": b"1", "y": {"z": b"1"}},
    }
    new_spec = {
        "same": {"deep": dict(unchanged), "also": dict(unchanged)},
        "changed": {"x": b"2", "y": {"z": b"1"}},
    }
    with store.writer() as writer:
        old, new = build_tree(writer, old_spec), build_tree(writer, new_spec)
        same = build_tree(writer, old_spec["same"])
        same_y = build_tree(writer, {"z": b"1"})
    with store.reader() as reader:
        counting = CountingReader(reader)
        changes = list(diff_trees(counting, old, new))  # type: ignore[arg-type]
    assert [(c.path, c.kind) for c in changes] == [("changed/x", ChangeKind.MODIFIED)]
    assert counting.reads[same] == 0
    assert counting.reads[same_y] == 0
    assert sum(counting.reads.values()) == 4  # both roots, both "changed" dirs


def test_diff_of_a_tree_with_itself_reads_nothing(store: ObjectStore) -> None:
    with store.writer() as writer:
        root = build_tree(writer, BASE)
    with store.reader() as reader:
        counting = CountingReader(reader)
        assert list(diff_trees(counting, root, root)) == []  # type: ignore[arg-type]
    assert not counting.reads


def test_diff_reports_a_directory_mode_change_even_when_its_content_changed(
    store: ObjectStore,
) -> None:
    changes = diff(store, {"d": {"x": b"1"}}, {"d": ("dir", 0o700, {"x": b"2"})})
    assert ("d", ChangeKind.MODE) in changes
