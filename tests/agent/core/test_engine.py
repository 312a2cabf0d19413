"""The engine in-process: call results, ledgers, batch and session records.

A real store in a tmp home and a real root; commands run in a real shell.
"""

from __future__ import annotations

from typing import Any

import pytest

from earshot.agent.core.batch import BatchKind
from earshot.agent.core.calls import Bash, EditFile, ReadFile, WriteFile
from earshot.agent.core.engine import Engine, UnknownSession
from earshot.agent.core.records import get_session
from earshot.agent.core.undo import NothingToUndo, redo, undo
from earshot.cas.digest import blob_digest

GEN = """\
open("b.txt", "w").write("generated\\n")
with open("c.txt", "a") as f:
    f.write("appended\\n")
"""


def test_an_engine_on_an_unknown_session_is_refused(lib: Any) -> None:
    with pytest.raises(UnknownSession):
        Engine(lib.project, "01nosuchsession")


def test_each_call_returns_its_own_result_and_a_failed_call_does_not_stop_the_batch(
    lib: Any,
) -> None:
    out = lib.engine().run_batch(
        [
            ReadFile("missing.txt"),
            WriteFile("../outside.txt", b"x"),
            Bash("echo out; echo err >&2; exit 4"),
            EditFile("a.txt", "nothing", "y"),
            WriteFile("a.txt", b"a\n"),
            ReadFile("a.txt"),
        ]
    )
    ok = [(r.index, r.tool, r.ok) for r in out.results]
    assert ok == [
        (0, "read_file", False),
        (1, "write_file", False),
        (2, "bash", True),
        (3, "edit", False),
        (4, "write_file", True),
        (5, "read_file", True),
    ]
    assert "outside the root" in (out.results[1].error or "")
    assert out.results[2].exit_code == 4 and out.results[2].output == "out\nerr\n"
    assert out.results[5].output == "a\n"
    assert not (lib.root.parent / "outside.txt").exists()
    assert [(c.path, c.by) for c in out.batch.ledger] == [("a.txt", 4)]


def test_output_is_not_captured_when_asked_to_pass_through(
    lib: Any, capfd: pytest.CaptureFixture[str]
) -> None:
    out = lib.engine(capture_output=False).run_batch([Bash("echo through")])
    assert out.results[0].output is None and out.results[0].exit_code == 0
    assert "through" in capfd.readouterr().out.splitlines()


def test_several_changes_to_one_path_in_a_batch_are_one_ledger_line(lib: Any) -> None:
    (lib.root / "same.txt").write_text("s\n")
    out = lib.engine().run_batch(
        [
            WriteFile("a.txt", b"one\n"),
            EditFile("a.txt", "one", "two"),
            WriteFile("same.txt", b"changed\n"),
            WriteFile("same.txt", b"s\n"),  # back to what it was: no line at all
        ]
    )
    (line,) = out.batch.ledger
    assert line.path == "a.txt" and line.before is None
    assert line.after is not None and line.after.digest == blob_digest(b"two\n")
    assert line.by == 1


def test_batch_snapshots_hold_the_tree_before_and_after(lib: Any) -> None:
    (lib.root / "old.txt").write_text("old\n")
    out = lib.engine().run_batch([WriteFile("new.txt", b"n\n"), Bash("rm old.txt")])
    assert lib.tree_files(out.batch.before) == {"old.txt"}
    assert lib.tree_files(out.batch.after) == {"new.txt"}
    assert out.batch.kind is BatchKind.CALLS and not out.batch.folded


def test_the_session_record_keeps_sequence_and_written_paths_across_processes(
    lib: Any,
) -> None:
    first = lib.engine()
    assert first.run_batch([WriteFile("a.txt", b"a\n")]).batch.seq == 1
    assert first.run_batch([Bash("true")]).batch.seq == 2
    later = lib.engine()
    out = later.run_batch([WriteFile("d/b.txt", b"b\n")])
    assert out.batch.seq == 3
    with lib.project.store.backend.read() as view:
        record = get_session(view, lib.session)
    assert record is not None
    assert record.next_seq == 4 and record.written == ("a.txt", "d/b.txt")
    assert [b.seq for b in lib.batches()] == [1, 2, 3]
    assert lib.batches()[1].ledger == ()  # changed nothing


def test_issue_scenario_with_an_engine_over_the_restage_budget_folds_the_generator_batch(
    lib: Any, file_tree: Any
) -> None:
    """No watcher, a tree too big to restage after a plain command (budget 1 ns).

    The generator's changes are folded into the next snapshot: its batch has no
    ledger, undo steps around it, and its files stay as it left them.
    """
    root = lib.root
    (root / "gen.py").write_text(GEN)
    (root / "c.txt").write_text("c\n")
    (root / "src").mkdir()
    (root / "src/main.py").write_text("main\n")
    engine = lib.engine(budget_ns=1)

    engine.run_batch([WriteFile("a.txt", b"a\n")])
    gen = engine.run_batch([Bash("python3 gen.py")])
    assert gen.batch.folded is True and gen.batch.ledger == ()
    assert (root / "b.txt").read_text() == "generated\n"
    rm = engine.run_batch([Bash("rm -rf src")])  # destructive: full restages, exact
    assert [(c.path, c.after, c.by) for c in rm.batch.ledger] == [("src/main.py", None, 0)]
    assert "b.txt" in lib.tree_files(rm.batch.before)  # folded into this snapshot
    after_all = file_tree(root)

    assert undo(engine).restored == ["src/main.py"]
    assert (root / "src/main.py").read_text() == "main\n"
    second = undo(engine)  # steps around the folded generator batch
    assert second.batches == [1] and second.deleted == ["a.txt"]
    assert file_tree(root) == {
        "gen.py": GEN.encode(),
        "b.txt": b"generated\n",
        "c.txt": b"c\nappended\n",
        "src/main.py": b"main\n",
    }
    with pytest.raises(NothingToUndo):
        undo(engine)
    redo(engine)
    redo(engine)
    assert file_tree(root) == after_all
