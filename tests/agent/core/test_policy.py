"""The snapshot policy (agent/core/policy.py), one rule per test.

Each test wraps ``Project.record`` with a spy that notes which restage ran
("full", or ("scoped", paths)) and with which note, so the row's "before" and
"after" columns are observed directly, in a real store on a real tree.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from earshot.agent.core.batch import BatchKind
from earshot.agent.core.calls import Bash, EditFile, EditMismatch, ReadFile, WriteFile, edit
from earshot.agent.core.undo import NothingToUndo, undo
from earshot.cas.digest import blob_digest

BIG_BUDGET = 10**12  # a "cheap" tree whatever the machine


def _snapshot_tree_files(lib: Any, digest: Any) -> set[str]:
    files: set[str] = lib.tree_files(digest)
    return files


class WalkingTracker:
    """A gap-free change tracker: compares the tree now with the tree at the token.

    It implements ``ChangeTracker`` exactly, as a perfect watcher would;
    ``gap`` makes it answer "don't know" (overflow, restart).
    """

    def __init__(self, root: Path) -> None:
        self.root = root
        self.gap = False

    def _picture(self) -> dict[str, bytes]:
        out: dict[str, bytes] = {}
        for dirpath, _, names in os.walk(self.root):
            for name in names:
                path = Path(dirpath) / name
                out[path.relative_to(self.root).as_posix()] = path.read_bytes()
        return out

    def token(self) -> object:
        return self._picture()

    def changed_since(self, token: object) -> set[str] | None:
        if self.gap or not isinstance(token, dict):
            return None
        now = self._picture()
        return {p for p in token.keys() | now.keys() if token.get(p) != now.get(p)}

    def advance(self, token: object) -> tuple[set[str] | None, object]:
        now = self._picture()
        if self.gap or not isinstance(token, dict):
            return None, now
        return {p for p in token.keys() | now.keys() if token.get(p) != now.get(p)}, now


# -- read_file and edit -------------------------------------------------------


def test_read_file_takes_no_snapshot(lib: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    (lib.root / "a.txt").write_text("hello\n")
    engine = lib.engine()
    spy = lib.spy(monkeypatch)
    out = engine.run_batch([ReadFile("a.txt")])
    assert spy.calls == []
    assert lib.project.head_snapshot() is None
    assert out.results[0].ok and out.results[0].output == "hello\n"
    assert out.batch.ledger == () and out.batch.before is None and out.batch.after is None


def test_pure_edit_is_a_string_transform_that_takes_no_snapshot(
    lib: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    (lib.root / "a.txt").write_text("one two two\n")
    spy = lib.spy(monkeypatch)
    assert edit("one two", "one", "1") == "1 two"
    assert edit("two two", "two", "2", replace_all=True) == "2 2"
    with pytest.raises(EditMismatch):
        edit("two two", "two", "2")  # ambiguous without all
    with pytest.raises(EditMismatch):
        edit("abc", "zzz", "y")  # absent
    assert spy.calls == []
    assert lib.project.head_snapshot() is None
    assert (lib.root / "a.txt").read_text() == "one two two\n"


# -- write_file ---------------------------------------------------------------


def test_first_mutating_call_of_a_process_is_a_full_restage_then_writes_are_scoped(
    lib: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    (lib.root / "old.txt").write_text("old\n")
    spy = lib.spy(monkeypatch)
    engine = lib.engine()
    engine.run_batch([WriteFile("a.txt", b"a\n")])
    assert spy.calls[0] == ("full", "before the first call of a process")
    assert spy.kinds()[1:] == [("scoped", ("a.txt",))]
    spy.clear()
    engine.run_batch([WriteFile("b.txt", b"b\n")])
    # Before: the paths this session has written plus the target; after: the target.
    assert spy.kinds() == [("scoped", ("a.txt", "b.txt")), ("scoped", ("b.txt",))]
    assert "full" not in spy.kinds()


def test_a_new_process_restages_fully_first_then_scopes_to_every_path_the_session_wrote(
    lib: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    lib.engine().run_batch([WriteFile("a.txt", b"a\n")])
    spy = lib.spy(monkeypatch)
    later = lib.engine()  # a later process: the session record says what it wrote
    later.run_batch([WriteFile("b.txt", b"b\n")])
    assert spy.kinds()[0] == "full"
    spy.clear()
    later.run_batch([WriteFile("c/d.txt", b"d\n")])
    assert spy.kinds() == [("scoped", ("a.txt", "b.txt", "c/d.txt")), ("scoped", ("c/d.txt",))]


def test_write_file_ledgers_the_target_by_call_index(lib: Any) -> None:
    (lib.root / "keep.txt").write_text("v0\n")
    engine = lib.engine()
    out = engine.run_batch(
        [ReadFile("keep.txt"), WriteFile("keep.txt", b"v1\n"), WriteFile("new.txt", b"n\n")]
    )
    by_path = {c.path: c for c in out.batch.ledger}
    assert set(by_path) == {"keep.txt", "new.txt"}
    assert by_path["keep.txt"].by == 1 and by_path["new.txt"].by == 2
    assert by_path["keep.txt"].before is not None
    assert by_path["keep.txt"].before.digest == blob_digest(b"v0\n")
    assert by_path["keep.txt"].after is not None
    assert by_path["keep.txt"].after.digest == blob_digest(b"v1\n")
    assert by_path["new.txt"].before is None


def test_write_file_before_state_is_exact_even_after_a_hand_edit_between_batches(
    lib: Any,
) -> None:
    engine = lib.engine()
    engine.run_batch([WriteFile("a.txt", b"agent\n")])
    (lib.root / "a.txt").write_text("hand\n")  # the user, between batches
    out = engine.run_batch([WriteFile("a.txt", b"agent again\n")])
    (line,) = out.batch.ledger
    assert line.before is not None and line.before.digest == blob_digest(b"hand\n")
    undo(engine)
    assert (lib.root / "a.txt").read_text() == "hand\n"


# -- bash -----------------------------------------------------------------------


def test_destructive_bash_is_a_full_restage_before_and_after_attributed_to_the_call(
    lib: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    (lib.root / "a").write_text("a\n")
    (lib.root / "b").write_text("b\n")
    engine = lib.engine()
    engine.run_batch([WriteFile("w.txt", b"w\n")])
    spy = lib.spy(monkeypatch)
    out = engine.run_batch([ReadFile("b"), Bash("rm a")])
    assert spy.calls == [("full", "before a destructive command"), ("full", "after bash")]
    assert [(c.path, c.after, c.by) for c in out.batch.ledger] == [("a", None, 1)]
    assert not (lib.root / "a").exists()


def test_non_destructive_bash_on_a_cheap_tree_is_a_full_restage_after_only(
    lib: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = lib.engine(budget_ns=BIG_BUDGET)
    engine.run_batch([WriteFile("w.txt", b"w\n")])
    spy = lib.spy(monkeypatch)
    out = engine.run_batch([Bash("mkdir -p d && touch d/n.txt"), Bash("touch d/m.txt")])
    # The first command of a later batch re-reads the tree (the person may
    # have changed it since the last turn); within the batch, nothing before.
    assert spy.calls == [
        ("full", "a new batch, no watcher"),
        ("full", "after bash"),
        ("full", "after bash"),
    ]
    assert [(c.path, c.before, c.by) for c in out.batch.ledger] == [
        ("d/n.txt", None, 0),
        ("d/m.txt", None, 1),
    ]
    assert out.batch.folded is False


def test_first_call_of_a_process_being_bash_gets_the_full_restage_before_it(
    lib: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    spy = lib.spy(monkeypatch)
    out = lib.engine(budget_ns=BIG_BUDGET).run_batch([Bash("touch n.txt")])
    assert spy.calls == [("full", "before the first call of a process"), ("full", "after bash")]
    assert [(c.path, c.by) for c in out.batch.ledger] == [("n.txt", 0)]


def test_non_destructive_bash_over_budget_is_folded_into_the_next_snapshot(
    lib: Any, monkeypatch: pytest.MonkeyPatch, cli: Any
) -> None:
    engine = lib.engine(budget_ns=0)
    first = engine.run_batch([WriteFile("a.txt", b"a\n")])
    spy = lib.spy(monkeypatch)
    folded = engine.run_batch([Bash("touch f.txt")])
    assert spy.calls == []  # nothing before (no watcher), nothing after (over budget)
    assert folded.batch.folded is True
    assert folded.batch.ledger == ()
    assert "f.txt" not in _snapshot_tree_files(lib, folded.batch.after)
    # The next full snapshot has it, and no ledger claims it.
    nxt = engine.run_batch([Bash("rm -f absent.txt")])
    assert spy.kinds() == ["full", "full"]
    assert "f.txt" in _snapshot_tree_files(lib, nxt.batch.before)
    assert nxt.batch.ledger == ()

    doc = cli.json("log", session=lib.session)
    by_seq = {b["seq"]: b for b in doc["batches"]}
    assert by_seq[folded.batch.seq]["folded"] is True
    assert by_seq[folded.batch.seq]["attributed"] is False
    assert by_seq[first.batch.seq]["folded"] is False
    assert by_seq[first.batch.seq]["attributed"] is True
    assert "folded" in cli.run("log", session=lib.session).stdout

    # undo steps around the folded batch: it reverts the batch before it.
    impact = undo(engine)
    assert impact.batches == [first.batch.seq]
    assert impact.deleted == ["a.txt"]
    assert (lib.root / "f.txt").exists()
    with pytest.raises(NothingToUndo):
        undo(engine)
    assert (lib.root / "f.txt").exists()


def test_a_folded_change_is_absorbed_by_the_next_full_restage_and_never_undone(
    lib: Any,
) -> None:
    engine = lib.engine(budget_ns=0)
    engine.run_batch([WriteFile("a.txt", b"a\n")])
    engine.run_batch([Bash("touch f.txt")])  # folded: the tree is no longer exact
    engine.policy.budget_ns = BIG_BUDGET
    out = engine.run_batch([Bash("touch g.txt")])
    # The next batch starts from a full restage: f.txt lands in its before-state,
    # unattributed; only what the call made is in its ledger.
    assert {(c.path, c.by) for c in out.batch.ledger} == {("g.txt", 0)}
    impact = undo(engine)
    assert impact.deleted == ["g.txt"]
    assert (lib.root / "f.txt").exists() and not (lib.root / "g.txt").exists()
    assert undo(engine).deleted == ["a.txt"]  # steps around the folded batch
    assert (lib.root / "f.txt").exists()


def test_without_a_cheap_restage_a_later_batch_stops_vouching_and_keeps_what_it_finds(
    lib: Any,
) -> None:
    engine = lib.engine(budget_ns=0)
    engine.run_batch([WriteFile("a.txt", b"a\n")])
    (lib.root / "user.txt").write_text("made by the person between turns\n")
    out = engine.run_batch([Bash("rm a.txt")])  # destructive: full restage before and after
    assert {(c.path, c.by) for c in out.batch.ledger} == {("a.txt", 0)}
    folded = engine.run_batch([Bash("touch h.txt")])
    assert folded.batch.folded is True and not engine.policy.belief.exact
    assert (lib.root / "user.txt").exists()


# -- a change tracker (watcher) ------------------------------------------------


def test_a_healthy_tracker_turns_bash_restages_into_scoped_ones_after_the_first_call(
    lib: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    tracker = WalkingTracker(lib.root)
    engine = lib.engine(tracker=tracker, budget_ns=BIG_BUDGET)
    spy = lib.spy(monkeypatch)
    engine.run_batch([Bash("touch a.txt")])
    # What the code does: the first call of a process is a full restage even when
    # the tracker vouches (it cannot have watched since the previous process).
    assert spy.calls[0] == ("full", "before the first call of a process")
    spy.clear()
    (lib.root / "user.txt").write_text("mine\n")  # seen by the tracker
    out = engine.run_batch([Bash("touch b.txt")])
    assert spy.calls == [
        (("scoped", ("user.txt",)), "before bash (watcher)"),
        (("scoped", ("b.txt",)), "after bash (watcher)"),
    ]
    assert [(c.path, c.by) for c in out.batch.ledger] == [("b.txt", 0)]
    impact = undo(engine)
    assert impact.deleted == ["b.txt"]
    assert (lib.root / "user.txt").read_text() == "mine\n"


def test_a_destructive_bash_with_a_gap_free_tracker_costs_scoped_restages_only(
    lib: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    (lib.root / "a").write_text("a\n")
    tracker = WalkingTracker(lib.root)
    engine = lib.engine(tracker=tracker)
    engine.run_batch([WriteFile("w.txt", b"w\n")])
    (lib.root / "user.txt").write_text("the person, between turns\n")
    spy = lib.spy(monkeypatch)
    out = engine.run_batch([Bash("rm a")])
    # Restaging what the watcher saw records what a full restage would: the
    # person's file is in the store before the command runs, at the cost of it.
    assert spy.calls == [
        (("scoped", ("user.txt",)), "before bash (watcher)"),
        (("scoped", ("a",)), "after bash (watcher)"),
    ]
    assert [(c.path, c.after, c.by) for c in out.batch.ledger] == [("a", None, 0)]


def test_a_destructive_bash_after_a_tracker_gap_is_a_full_restage_first(
    lib: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    (lib.root / "a").write_text("a\n")
    tracker = WalkingTracker(lib.root)
    engine = lib.engine(tracker=tracker)
    engine.run_batch([WriteFile("w.txt", b"w\n")])
    tracker.gap = True
    spy = lib.spy(monkeypatch)
    engine.run_batch([Bash("rm a")])
    assert spy.kinds()[0] == "full"


def test_after_a_tracker_gap_the_next_snapshot_is_a_full_restage(
    lib: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    tracker = WalkingTracker(lib.root)
    engine = lib.engine(tracker=tracker)
    engine.run_batch([WriteFile("a.txt", b"a\n")])
    tracker.gap = True  # overflow: the tracker no longer knows what changed
    spy = lib.spy(monkeypatch)
    engine.run_batch([WriteFile("b.txt", b"b\n")])
    assert spy.kinds()[0] == "full"


# -- subagent dispatch ------------------------------------------------------------


def test_subagent_dispatch_is_one_full_snapshot_one_batch_ledgered_per_call_one_undo(
    lib: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    (lib.root / "shared.txt").write_text("v0\n")
    engine = lib.engine()
    engine.run_batch([WriteFile("before.txt", b"x\n")])
    spy = lib.spy(monkeypatch)
    out = engine.run_dispatch(
        [
            [WriteFile("one/a.txt", b"a\n"), EditFile("shared.txt", "v0", "v1")],
            [WriteFile("two/b.txt", b"b\n")],
        ]
    )
    assert spy.calls[0] == ("full", "before a subagent dispatch")
    assert "full" not in spy.kinds()[1:]
    batch = out.batch
    assert batch.kind is BatchKind.CALLS
    assert [c["agent"] for c in batch.calls] == ["subagent 1", "subagent 1", "subagent 2"]
    assert {(c.path, c.by) for c in batch.ledger} == {
        ("one/a.txt", 0),
        ("shared.txt", 1),
        ("two/b.txt", 2),
    }
    assert [b.seq for b in lib.batches()] == [1, batch.seq]
    impact = undo(engine)
    assert impact.batches == [batch.seq]
    assert not (lib.root / "one").exists() and not (lib.root / "two").exists()
    assert (lib.root / "shared.txt").read_text() == "v0\n"
    assert (lib.root / "before.txt").exists()
