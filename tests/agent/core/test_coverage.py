"""Which of a batch's changes undo cannot take back, from its ledger alone."""

from __future__ import annotations

from earshot.agent.core.batch import Change, State
from earshot.agent.core.coverage import Uncovered, lines, uncovered
from earshot.cas.digest import blob_digest
from earshot.cas.tree import Ident, Kind

FILE = State(Kind.FILE, 0o644, blob_digest(b"x"))


def unrecorded(reason: str, ino: int, mtime: int = 7, size: int = 9, is_dir: bool = False) -> State:
    return State(
        Kind.UNRECORDED, 0o644, None, reason, size, Ident(ino, 0 if is_dir else mtime, is_dir)
    )


def test_a_deleted_or_changed_path_whose_content_was_not_held_is_not_covered() -> None:
    ledger = [
        Change(".env", unrecorded("ignored", 1), None, 0),
        Change("data", unrecorded("ignored", 2, is_dir=True), None, 0),
        Change("big.bin", unrecorded("too_large", 3), unrecorded("too_large", 3, mtime=8), 0),
        Change("log.txt", FILE, unrecorded("too_large", 4), 0),
        Change("kept.txt", FILE, None, 0),  # held: undo brings it back
        Change("new.bin", None, unrecorded("ignored", 5), 0),  # undo keeps it: nothing lost
    ]
    assert uncovered(ledger) == [
        Uncovered(".env", "ignored", "deleted"),
        Uncovered("data", "ignored", "deleted", is_dir=True),
        Uncovered("big.bin", "over the size limit", "changed"),
        Uncovered("log.txt", "over the size limit", "written"),
    ]


def test_a_path_moved_to_a_new_name_with_its_identity_is_covered() -> None:
    ledger = [
        Change("data/cache", unrecorded("cache", 9, is_dir=True), None, 0),
        Change("data2/cache", None, unrecorded("cache", 9, is_dir=True), 0),
    ]
    assert uncovered(ledger) == []


def test_a_path_the_commit_found_moved_to_a_recorded_name_is_covered() -> None:
    ledger = [
        Change(".env", unrecorded("ignored", 9), None, 0, moved="env.txt"),
        Change("env.txt", None, FILE, 0),  # recorded now: no identity to pair with
        Change("gone.env", unrecorded("ignored", 10), None, 0),
    ]
    assert uncovered(ledger) == [Uncovered("gone.env", "ignored", "deleted")]


def test_the_lines_name_each_path_and_count_the_rest() -> None:
    items = [Uncovered(f"f{i}", "ignored", "deleted") for i in range(12)]
    shown = lines(items, shown=2)
    assert shown == [
        "not covered by undo: f0 (ignored, deleted)",
        "not covered by undo: f1 (ignored, deleted)",
        "not covered by undo: 10 more paths ('earshot log --json' lists them)",
    ]
    assert lines([Uncovered("d\nx", "a regenerable cache", "deleted", True)]) == [
        'not covered by undo: "d\\x0ax/" (a regenerable cache, deleted)'
    ]
