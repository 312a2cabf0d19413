"""The checkpoint commands end to end: bash/write/edit/exec, log, undo, redo.

Each command is the real ``earshot`` script in a subprocess (``cli``, from
this folder's conftest), so every call is a new process, as an agent's are.
"""

from __future__ import annotations

import fcntl
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

# Each test runs in-process and through the watch daemon (tests/conftest.py).
pytestmark = pytest.mark.both_modes

if TYPE_CHECKING:
    from earshot_cli import Cli, Ran


def _write(cli: Cli, path: str, text: str, *extra: str, expect: int | None = 0) -> Ran:
    """``earshot write PATH --from FILE`` (FILE outside the root)."""
    source = cli.root.parent / "source.txt"
    source.write_text(text)
    return cli.run("write", path, "--from", str(source), *extra, expect=expect)


def _session_env(cli: Cli, sid: str) -> dict[str, str]:
    return cli.env(EARSHOT_SESSION=sid)


GEN = """\
open("b.txt", "w").write("generated\\n")
with open("c.txt", "a") as f:
    f.write("appended\\n")
"""


def test_issue_scenario_three_undos_then_three_redos(cli: Cli, tree: Any) -> None:
    root = cli.root
    cli.write("gen.py", GEN)
    cli.write("c.txt", "c\n")
    cli.write("src/main.py", "main\n")
    cli.write("src/pkg/mod.py", "mod\n")
    t0 = tree(root)

    _write(cli, "a.txt", "a\n")
    t1 = tree(root)
    assert set(t1) - set(t0) == {"a.txt"}
    cli.run("bash", "python3 gen.py")
    t2 = tree(root)
    assert t2["b.txt"][2] == b"generated\n"
    assert t2["c.txt"][2] == b"c\nappended\n"
    cli.run("bash", "rm -rf src")
    t3 = tree(root)
    assert not any(p.startswith("src") for p in t3)

    log = cli.json("log")["batches"]
    assert [len(b["changes"]) for b in log] == [1, 2, 2]
    assert all(c["by"] == 0 for b in log for c in b["changes"])

    first = cli.json("undo")
    assert first["restored"] == ["src/main.py", "src/pkg/mod.py"]
    assert tree(root) == t2
    second = cli.json("undo")
    assert second["restored"] == ["c.txt"] and second["deleted"] == ["b.txt"]
    assert tree(root) == t1
    third = cli.json("undo")
    assert third["deleted"] == ["a.txt"]
    assert tree(root) == t0
    assert "nothing to undo" in cli.run("undo", expect=1).stderr

    cli.run("redo")
    assert tree(root) == t1
    cli.run("redo")
    assert tree(root) == t2
    cli.run("redo")
    assert tree(root) == t3
    assert "nothing to redo" in cli.run("redo", expect=1).stderr


@pytest.mark.no_watcher
def test_issue_scenario_over_the_restage_budget_folds_the_generator_batch(
    cli: Cli, tree: Any
) -> None:
    """A tree too big to restage after a plain command (budget 0 ms), no watcher.

    The generator's batch is folded: no ledger, 'folded' in the log; undo steps
    around it and leaves its files as they are; the rest undoes and redoes.
    """
    env = cli.env(EARSHOT_RESTAGE_BUDGET_MS="0")
    root = cli.root
    cli.write("gen.py", GEN)
    cli.write("c.txt", "c\n")
    cli.write("src/main.py", "main\n")
    cli.json("session", "new", env=env)
    source = root.parent / "a-source.txt"
    source.write_text("a\n")
    cli.run("write", "a.txt", "--from", str(source), env=env)
    cli.run("bash", "python3 gen.py", env=env)
    generated = tree(root)
    cli.run("bash", "rm -rf src", env=env)
    t3 = tree(root)

    log = cli.json("log", env=env)["batches"]
    assert [(b["folded"], b["attributed"]) for b in log] == [
        (False, True),
        (True, False),
        (False, True),
    ]
    assert log[1]["changes"] == []
    assert "folded" in cli.run("log", env=env).stdout

    assert cli.json("undo", env=env)["restored"] == ["src/main.py"]
    assert tree(root) == generated
    second = cli.json("undo", env=env)
    assert second["batches"] == [1] and second["deleted"] == ["a.txt"]
    assert (root / "b.txt").read_text() == "generated\n"  # the folded batch's files stay
    assert (root / "c.txt").read_text() == "c\nappended\n"
    cli.run("undo", env=env, expect=1)
    cli.run("redo", env=env)
    cli.run("redo", env=env)
    assert tree(root) == t3


def test_log_json_shape(cli: Cli) -> None:
    _write(cli, "a.txt", "a\n")
    cli.run("bash", "rm a.txt")
    cli.run("undo")
    doc = cli.json("log")
    assert isinstance(doc["session"], str)
    batches = doc["batches"]
    assert [b["seq"] for b in batches] == [1, 2, 3]
    for batch in batches:
        assert {"seq", "calls", "changes", "undone", "self_created", "folded"} <= set(batch)
        for change in batch["changes"]:
            assert {"path", "before", "after"} <= set(change)
    assert batches[0]["calls"] == [{"tool": "write_file", "path": "a.txt", "bytes": 2}]
    assert batches[0]["changes"][0]["before"] is None
    assert len(batches[0]["changes"][0]["after"]) == 64
    assert batches[1]["calls"] == [{"tool": "bash", "command": "rm a.txt"}]
    assert batches[1]["changes"][0]["after"] is None
    assert [b["undone"] for b in batches] == [False, True, False]
    assert [b["self_created"] for b in batches] == [False, False, True]
    text = cli.run("log").stdout
    assert "undone by 3" in text and "undo of 2" in text


def test_undo_json_shape_and_dry_run_changes_nothing(cli: Cli, tree: Any) -> None:
    cli.write("keep.txt", "v0\n")
    _write(cli, "keep.txt", "v1\n")
    _write(cli, "new.txt", "n\n")
    before_tree = tree(cli.root)
    before_log = cli.json("log")
    dry = cli.json("undo", "2", "--dry-run")
    assert {"restored", "deleted", "conflicts", "batches"} <= set(dry)
    assert dry["dry_run"] is True and dry["record"] is None
    assert dry["batches"] == [2, 1]
    assert dry["restored"] == ["keep.txt"] and dry["deleted"] == ["new.txt"]
    assert dry["conflicts"] == []
    assert "would delete  new.txt" in cli.run("undo", "2", "--dry-run").stdout
    assert tree(cli.root) == before_tree
    assert cli.json("log") == before_log
    done = cli.json("undo", "2")
    assert done["dry_run"] is False and done["record"] == 3
    assert (done["restored"], done["deleted"]) == (["keep.txt"], ["new.txt"])


def test_session_new_json_prints_the_id_and_commands_use_it(cli: Cli) -> None:
    doc = cli.json("session", "new")
    assert set(doc) == {"id"} and doc["id"]
    _write(cli, "a.txt", "a\n")  # no EARSHOT_SESSION: the most recent session
    assert cli.json("log")["session"] == doc["id"]
    sessions = cli.json("sessions")["sessions"]
    assert [(s["id"], s["batches"]) for s in sessions] == [(doc["id"], 1)]


def test_bash_exits_with_the_commands_own_code_and_passes_output_through(cli: Cli) -> None:
    ran = cli.run("bash", "echo out; echo err >&2; exit 7", expect=7)
    assert ran.stdout == "out\n"
    assert "err" in ran.stderr
    ok = cli.run("bash", "printf hello")
    assert ok.stdout == "hello"
    doc = cli.json("bash", "echo captured; exit 5", expect=5)
    assert doc["results"][0]["exit_code"] == 5
    assert doc["results"][0]["output"] == "captured\n"
    assert [b["seq"] for b in cli.json("log")["batches"]] == [1, 2, 3]


def test_exec_prints_one_json_result_per_call(cli: Cli) -> None:
    batch = [
        {"tool": "write_file", "path": "a.txt", "content": "one two\n"},
        {"tool": "edit", "path": "a.txt", "old": "two", "new": "2"},
        {"tool": "read_file", "path": "a.txt"},
        {"tool": "bash", "command": "cat a.txt"},
    ]
    source = cli.root.parent / "batch.json"
    source.write_text(json.dumps(batch))
    ran = cli.run("exec", str(source))
    lines = [json.loads(line) for line in ran.stdout.splitlines()]
    assert [(r["index"], r["tool"], r["ok"]) for r in lines] == [
        (0, "write_file", True),
        (1, "edit", True),
        (2, "read_file", True),
        (3, "bash", True),
    ]
    assert lines[2]["output"] == "one 2\n"
    assert lines[3]["output"] == "one 2\n" and lines[3]["exit_code"] == 0
    (logged,) = cli.json("log")["batches"]
    assert [c["tool"] for c in logged["calls"]] == ["write_file", "edit", "read_file", "bash"]
    assert [(c["path"], c["by"]) for c in logged["changes"]] == [("a.txt", 1)]

    source.write_text(json.dumps([{"tool": "read_file", "path": "missing.txt"}]))
    failed = cli.run("exec", str(source), expect=1)
    assert json.loads(failed.stdout)["ok"] is False


def test_edit_fails_when_the_old_text_is_absent_or_ambiguous_without_all(
    cli: Cli, check_error: Any
) -> None:
    cli.write("a.txt", "x x\n")
    cli.json("session", "new")  # so no "started session" notice joins the error line
    absent = cli.run("edit", "a.txt", "--old", "zzz", "--new", "y", expect=1)
    assert "not found" in check_error(absent)
    ambiguous = cli.run("edit", "a.txt", "--old", "x", "--new", "y", expect=1)
    assert "found 2 times" in check_error(ambiguous)
    assert (cli.root / "a.txt").read_text() == "x x\n"
    cli.run("edit", "a.txt", "--old", "x", "--new", "y", "--all")
    assert (cli.root / "a.txt").read_text() == "y y\n"
    cli.run("undo")
    assert (cli.root / "a.txt").read_text() == "x x\n"


def test_a_second_undo_while_one_holds_the_lock_is_refused(
    cli: Cli, check_error: Any, tree: Any
) -> None:
    _write(cli, "a.txt", "a\n")
    before = tree(cli.root)
    fd = os.open(cli.store_dir() / "undo.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        message = check_error(cli.run("undo", expect=1))
        assert "another undo" in message
        check_error(cli.run("redo", expect=1))
        assert tree(cli.root) == before
    finally:
        os.close(fd)
    cli.run("undo")
    assert not (cli.root / "a.txt").exists()


def test_write_refuses_a_path_outside_the_root(cli: Cli, check_error: Any) -> None:
    outside = cli.root.parent / "escaped.txt"
    cli.json("session", "new")
    assert "outside the root" in check_error(_write(cli, "../escaped.txt", "x\n", expect=1))
    assert not outside.exists()
    assert not Path(cli.root, "escaped.txt").exists()


def test_undo_of_more_batches_than_there_are_is_refused_and_changes_nothing(
    cli: Cli, check_error: Any, tree: Any
) -> None:
    _write(cli, "a.txt", "a\n")
    _write(cli, "b.txt", "b\n")
    cli.run("bash", "true")  # changed nothing: not undoable
    before, log = tree(cli.root), cli.json("log")
    message = check_error(cli.run("undo", "999", expect=1))
    assert "only 2 batches are left to undo in this session, not 999" in message
    check_error(cli.run("undo", "3", "--dry-run", expect=1))
    assert tree(cli.root) == before
    assert cli.json("log") == log


def test_undo_json_counts_the_batches_undone(cli: Cli) -> None:
    _write(cli, "a.txt", "a\n")
    _write(cli, "b.txt", "b\n")
    _write(cli, "c.txt", "c\n")
    assert cli.json("undo", "2", "--dry-run")["count"] == 2
    assert cli.json("undo")["count"] == 1
    doc = cli.json("undo", "2")
    assert (doc["count"], doc["batches"]) == (2, [2, 1])
    assert cli.json("redo")["count"] == 2
