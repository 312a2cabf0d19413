"""The checkpoint commands end to end: bash/write/edit/exec, log, undo, redo.

Each command is the real ``earshot`` script in a subprocess (``es``, from
this folder's conftest), so every call is a new process, as an agent's are.
"""

from __future__ import annotations

import fcntl
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from conftest import Earshot, Result


def _write(es: Earshot, path: str, text: str, *extra: str, expect: int | None = 0) -> Result:
    """``earshot write PATH --from FILE`` (FILE outside the root)."""
    source = es.root.parent / "source.txt"
    source.write_text(text)
    return es.run("write", path, "--from", str(source), *extra, expect=expect)


def _session_env(es: Earshot, sid: str) -> dict[str, str]:
    return es.env(EARSHOT_SESSION=sid)


GEN = """\
open("b.txt", "w").write("generated\\n")
with open("c.txt", "a") as f:
    f.write("appended\\n")
"""


def test_issue_scenario_three_undos_then_three_redos(es: Earshot, list_tree: Any) -> None:
    root = es.root
    es.write("gen.py", GEN)
    es.write("c.txt", "c\n")
    es.write("src/main.py", "main\n")
    es.write("src/pkg/mod.py", "mod\n")
    t0 = list_tree(root)

    _write(es, "a.txt", "a\n")
    t1 = list_tree(root)
    assert set(t1) - set(t0) == {"a.txt"}
    es.run("bash", "python3 gen.py")
    t2 = list_tree(root)
    assert t2["b.txt"][2] == b"generated\n"
    assert t2["c.txt"][2] == b"c\nappended\n"
    es.run("bash", "rm -rf src")
    t3 = list_tree(root)
    assert not any(p.startswith("src") for p in t3)

    log = es.json("log")["batches"]
    assert [len(b["changes"]) for b in log] == [1, 2, 2]
    assert all(c["by"] == 0 for b in log for c in b["changes"])

    first = es.json("undo")
    assert first["restored"] == ["src/main.py", "src/pkg/mod.py"]
    assert list_tree(root) == t2
    second = es.json("undo")
    assert second["restored"] == ["c.txt"] and second["deleted"] == ["b.txt"]
    assert list_tree(root) == t1
    third = es.json("undo")
    assert third["deleted"] == ["a.txt"]
    assert list_tree(root) == t0
    assert "nothing to undo" in es.run("undo", expect=1).stderr

    es.run("redo")
    assert list_tree(root) == t1
    es.run("redo")
    assert list_tree(root) == t2
    es.run("redo")
    assert list_tree(root) == t3
    assert "nothing to redo" in es.run("redo", expect=1).stderr


def test_issue_scenario_over_the_restage_budget_folds_the_generator_batch(
    es: Earshot, list_tree: Any
) -> None:
    """A tree too big to restage after a plain command (budget 0 ms), no watcher.

    The generator's batch is folded: no ledger, 'folded' in the log; undo steps
    around it and leaves its files as they are; the rest undoes and redoes.
    """
    env = es.env(EARSHOT_RESTAGE_BUDGET_MS="0")
    root = es.root
    es.write("gen.py", GEN)
    es.write("c.txt", "c\n")
    es.write("src/main.py", "main\n")
    es.json("session", "new", env=env)
    source = root.parent / "a-source.txt"
    source.write_text("a\n")
    es.run("write", "a.txt", "--from", str(source), env=env)
    es.run("bash", "python3 gen.py", env=env)
    generated = list_tree(root)
    es.run("bash", "rm -rf src", env=env)
    t3 = list_tree(root)

    log = es.json("log", env=env)["batches"]
    assert [(b["folded"], b["attributed"]) for b in log] == [
        (False, True),
        (True, False),
        (False, True),
    ]
    assert log[1]["changes"] == []
    assert "folded" in es.run("log", env=env).stdout

    assert es.json("undo", env=env)["restored"] == ["src/main.py"]
    assert list_tree(root) == generated
    second = es.json("undo", env=env)
    assert second["batches"] == [1] and second["deleted"] == ["a.txt"]
    assert (root / "b.txt").read_text() == "generated\n"  # the folded batch's files stay
    assert (root / "c.txt").read_text() == "c\nappended\n"
    es.run("undo", env=env, expect=1)
    es.run("redo", env=env)
    es.run("redo", env=env)
    assert list_tree(root) == t3


def test_log_json_shape(es: Earshot) -> None:
    _write(es, "a.txt", "a\n")
    es.run("bash", "rm a.txt")
    es.run("undo")
    doc = es.json("log")
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
    text = es.run("log").stdout
    assert "undone by 3" in text and "undo of 2" in text


def test_undo_json_shape_and_dry_run_changes_nothing(es: Earshot, list_tree: Any) -> None:
    es.write("keep.txt", "v0\n")
    _write(es, "keep.txt", "v1\n")
    _write(es, "new.txt", "n\n")
    before_tree = list_tree(es.root)
    before_log = es.json("log")
    dry = es.json("undo", "2", "--dry-run")
    assert {"restored", "deleted", "conflicts", "batches"} <= set(dry)
    assert dry["dry_run"] is True and dry["record"] is None
    assert dry["batches"] == [2, 1]
    assert dry["restored"] == ["keep.txt"] and dry["deleted"] == ["new.txt"]
    assert dry["conflicts"] == []
    assert "would delete  new.txt" in es.run("undo", "2", "--dry-run").stdout
    assert list_tree(es.root) == before_tree
    assert es.json("log") == before_log
    done = es.json("undo", "2")
    assert done["dry_run"] is False and done["record"] == 3
    assert (done["restored"], done["deleted"]) == (["keep.txt"], ["new.txt"])


def test_session_new_json_prints_the_id_and_commands_use_it(es: Earshot) -> None:
    doc = es.json("session", "new")
    assert set(doc) == {"id"} and doc["id"]
    _write(es, "a.txt", "a\n")  # no EARSHOT_SESSION: the most recent session
    assert es.json("log")["session"] == doc["id"]
    sessions = es.json("sessions")["sessions"]
    assert [(s["id"], s["batches"]) for s in sessions] == [(doc["id"], 1)]


def test_bash_exits_with_the_commands_own_code_and_passes_output_through(es: Earshot) -> None:
    ran = es.run("bash", "echo out; echo err >&2; exit 7", expect=7)
    assert ran.stdout == "out\n"
    assert "err" in ran.stderr
    ok = es.run("bash", "printf hello")
    assert ok.stdout == "hello"
    doc = es.json("bash", "echo captured; exit 5", expect=5)
    assert doc["results"][0]["exit_code"] == 5
    assert doc["results"][0]["output"] == "captured\n"
    assert [b["seq"] for b in es.json("log")["batches"]] == [1, 2, 3]


def test_exec_prints_one_json_result_per_call(es: Earshot) -> None:
    batch = [
        {"tool": "write_file", "path": "a.txt", "content": "one two\n"},
        {"tool": "edit", "path": "a.txt", "old": "two", "new": "2"},
        {"tool": "read_file", "path": "a.txt"},
        {"tool": "bash", "command": "cat a.txt"},
    ]
    source = es.root.parent / "batch.json"
    source.write_text(json.dumps(batch))
    ran = es.run("exec", str(source))
    lines = [json.loads(line) for line in ran.stdout.splitlines()]
    assert [(r["index"], r["tool"], r["ok"]) for r in lines] == [
        (0, "write_file", True),
        (1, "edit", True),
        (2, "read_file", True),
        (3, "bash", True),
    ]
    assert lines[2]["output"] == "one 2\n"
    assert lines[3]["output"] == "one 2\n" and lines[3]["exit_code"] == 0
    (logged,) = es.json("log")["batches"]
    assert [c["tool"] for c in logged["calls"]] == ["write_file", "edit", "read_file", "bash"]
    assert [(c["path"], c["by"]) for c in logged["changes"]] == [("a.txt", 1)]

    source.write_text(json.dumps([{"tool": "read_file", "path": "missing.txt"}]))
    failed = es.run("exec", str(source), expect=1)
    assert json.loads(failed.stdout)["ok"] is False


def test_edit_fails_when_the_old_text_is_absent_or_ambiguous_without_all(
    es: Earshot, check_error: Any
) -> None:
    es.write("a.txt", "x x\n")
    es.json("session", "new")  # so no "started session" notice joins the error line
    absent = es.run("edit", "a.txt", "--old", "zzz", "--new", "y", expect=1)
    assert "not found" in check_error(absent)
    ambiguous = es.run("edit", "a.txt", "--old", "x", "--new", "y", expect=1)
    assert "found 2 times" in check_error(ambiguous)
    assert (es.root / "a.txt").read_text() == "x x\n"
    es.run("edit", "a.txt", "--old", "x", "--new", "y", "--all")
    assert (es.root / "a.txt").read_text() == "y y\n"
    es.run("undo")
    assert (es.root / "a.txt").read_text() == "x x\n"


def test_a_second_undo_while_one_holds_the_lock_is_refused(
    es: Earshot, check_error: Any, list_tree: Any
) -> None:
    _write(es, "a.txt", "a\n")
    before = list_tree(es.root)
    fd = os.open(es.store_dir() / "undo.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        message = check_error(es.run("undo", expect=1))
        assert "another undo" in message
        check_error(es.run("redo", expect=1))
        assert list_tree(es.root) == before
    finally:
        os.close(fd)
    es.run("undo")
    assert not (es.root / "a.txt").exists()


def test_write_refuses_a_path_outside_the_root(es: Earshot, check_error: Any) -> None:
    outside = es.root.parent / "escaped.txt"
    es.json("session", "new")
    assert "outside the root" in check_error(_write(es, "../escaped.txt", "x\n", expect=1))
    assert not outside.exists()
    assert not Path(es.root, "escaped.txt").exists()


def test_undo_of_more_batches_than_there_are_is_refused_and_changes_nothing(
    es: Earshot, check_error: Any, list_tree: Any
) -> None:
    _write(es, "a.txt", "a\n")
    _write(es, "b.txt", "b\n")
    es.run("bash", "true")  # changed nothing: not undoable
    before, log = list_tree(es.root), es.json("log")
    message = check_error(es.run("undo", "999", expect=1))
    assert "only 2 batches are left to undo in this session, not 999" in message
    check_error(es.run("undo", "3", "--dry-run", expect=1))
    assert list_tree(es.root) == before
    assert es.json("log") == log


def test_undo_json_counts_the_batches_undone(es: Earshot) -> None:
    _write(es, "a.txt", "a\n")
    _write(es, "b.txt", "b\n")
    _write(es, "c.txt", "c\n")
    assert es.json("undo", "2", "--dry-run")["count"] == 2
    assert es.json("undo")["count"] == 1
    doc = es.json("undo", "2")
    assert (doc["count"], doc["batches"]) == (2, [2, 1])
    assert es.json("redo")["count"] == 2
