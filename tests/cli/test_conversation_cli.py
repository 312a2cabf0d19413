"""The conversation commands end to end: prompt, say, tree, rewind, fork, sessions (check).

Every command is the real ``earshot`` script in a subprocess with its own
``EARSHOT_HOME`` (``es``, from this folder's conftest).
"""

from __future__ import annotations

import fcntl
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from earshot.agent.log.entries import AssistantMessage, UserMessage
from earshot.agent.log.session import Session

if TYPE_CHECKING:
    from conftest import Earshot


def _sessions_dir(es: Earshot) -> Path:
    dirs = [p for p in (es.home / "sessions").iterdir() if p.is_dir()]
    assert len(dirs) == 1, dirs
    return dirs[0]


def _log_path(es: Earshot, sid: str) -> Path:
    return _sessions_dir(es) / f"{sid}.jsonl"


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_bytes().splitlines()]


def _new(es: Earshot) -> str:
    sid: str = es.json("session", "new")["id"]
    return sid


def _write(es: Earshot, path: str, text: str, *extra: str) -> None:
    source = es.root.parent / "source.txt"
    source.write_text(text)
    es.run("write", path, "--from", str(source), *extra)


def _prompts(es: Earshot, *extra: str) -> list[str]:
    return [p["text"] for p in es.json("tree", *extra)["prompts"]]


def _said(path: Path) -> list[str]:
    out = []
    for entry in Session.open(path).context():
        body = entry.body
        assert isinstance(body, UserMessage | AssistantMessage), entry
        out.append(body.text)
    return out


def _files(root: Path) -> dict[str, bytes]:
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def _unique_prefix(ident: str, others: list[str]) -> str:
    for size in range(8, len(ident)):
        if not any(o.startswith(ident[:size]) for o in others if o != ident):
            return ident[:size]
    return ident


def test_session_new_makes_both_halves_under_one_id(es: Earshot) -> None:
    sid = _new(es)
    header = _lines(_log_path(es, sid))[0]
    assert (header["type"], header["id"]) == ("session", sid)
    (listed,) = es.json("sessions")["sessions"]
    assert listed["id"] == sid and listed["has_log"] and listed["has_checkpoints"]


def test_prompt_then_write_puts_the_batch_after_the_prompt(es: Earshot) -> None:
    sid = _new(es)
    doc = es.json("prompt", "make a")
    assert doc["session"] == sid
    _write(es, "a.txt", "a\n")
    es.run("say", "made a")
    es.run("undo")
    _header, prompt, link, said, undo_link = _lines(_log_path(es, sid))
    assert prompt["id"] == doc["id"] and prompt["text"] == "make a"
    assert (link["type"], link["batch"], link["parentId"]) == ("batch", 1, prompt["id"])
    assert (said["type"], said["text"], said["parentId"]) == ("assistant", "made a", link["id"])
    assert (undo_link["batch"], undo_link["parentId"]) == (2, said["id"])


def test_tree_numbers_the_prompts_and_marks_branches(es: Earshot) -> None:
    _new(es)
    es.run("prompt", "first\nwith a second line")
    es.run("say", "--role", "assistant", "reply")
    es.run("say", "--role", "user", "second")
    doc = es.json("tree")
    assert [(p["n"], p["text"], p["branches"]) for p in doc["prompts"]] == [
        (1, "first\nwith a second line", False),
        (2, "second", False),
    ]
    assert {"n", "id", "text", "time", "branches"} <= set(doc["prompts"][0])
    es.run("rewind", "2")
    es.run("prompt", "second, again")
    assert [p["branches"] for p in es.json("tree")["prompts"]] == [False, True]
    text = es.run("tree").stdout
    assert "   1  " in text and "first" in text and "with a second line" not in text
    assert "second, again  [branches]" in text


def test_rewind_add_rewind_fork_every_context_exact_and_the_file_only_grew(es: Earshot) -> None:
    sid = _new(es)
    path = _log_path(es, sid)

    def turn(n: str) -> None:
        es.run("prompt", f"p{n}")
        es.run("say", f"a{n}")

    for n in "12345":
        turn(n)
    snapshots = [path.read_bytes()]

    first = es.json("rewind", "2")
    assert (first["text"], first["prompt"]) == ("p2", 2)
    assert _prompts(es) == ["p1"]
    assert _said(path) == ["p1", "a1"]
    snapshots.append(path.read_bytes())

    turn("2b")
    turn("3b")
    assert _prompts(es) == ["p1", "p2b", "p3b"]
    es.run("rewind", "4", expect=1)  # the new path has three prompts
    turn("4b")
    turn("5b")
    snapshots.append(path.read_bytes())

    assert es.run("rewind", "4").stdout == "p4b\n"
    assert _prompts(es) == ["p1", "p2b", "p3b"]
    assert _said(path) == ["p1", "a1", "p2b", "a2b", "p3b", "a3b"]
    snapshots.append(path.read_bytes())

    fork = es.json("fork", "3")
    assert fork["from"]["session"] == sid
    assert _prompts(es, "--session", fork["id"]) == ["p1", "p2b"]
    assert _said(_log_path(es, fork["id"])) == ["p1", "a1", "p2b", "a2b"]
    assert _prompts(es, "--session", sid) == ["p1", "p2b", "p3b"]
    assert _said(path) == ["p1", "a1", "p2b", "a2b", "p3b", "a3b"]

    final = path.read_bytes()
    for older in snapshots:
        assert final.startswith(older)


def test_rewind_code_undoes_exactly_the_batches_after_the_prompt_and_redo_restores(
    es: Earshot,
) -> None:
    sid = _new(es)
    es.write("keep.txt", "mine\n")
    es.run("prompt", "p1")
    _write(es, "a.txt", "a1\n")
    after_p1 = _files(es.root)
    es.run("prompt", "p2")
    _write(es, "b.txt", "b\n")
    _write(es, "a.txt", "a2\n")
    es.run("prompt", "p3")
    es.run("bash", "mkdir d && echo c > d/c.txt")
    before = _files(es.root)
    log_before = _log_path(es, sid).read_bytes()

    dry = es.json("rewind", "2", "--code", "--dry-run")
    assert dry["dry_run"] is True and dry["navigation"] is None and dry["text"] == "p2"
    assert sorted(dry["code"]["deleted"]) == ["b.txt", "d/c.txt"]
    assert dry["code"]["restored"] == ["a.txt"]
    assert _files(es.root) == before
    assert _log_path(es, sid).read_bytes() == log_before

    done = es.json("rewind", "2", "--code")
    assert done["batches"] == [2, 3, 4] and done["text"] == "p2"
    assert done["navigation"] is not None
    assert sorted(done["code"]["deleted"]) == ["b.txt", "d/c.txt"]
    assert _files(es.root) == after_p1
    assert not (es.root / "d").exists()
    assert _prompts(es) == ["p1"]
    assert es.json("log")["batches"][-1]["kind"] == "rewind"

    es.run("redo")
    assert _files(es.root) == before


def test_rewind_code_with_nothing_to_restore_is_refused_and_appends_nothing(
    es: Earshot, check_error: Any
) -> None:
    sid = _new(es)
    es.run("prompt", "p1")
    _write(es, "a.txt", "a\n")
    es.run("prompt", "p2")
    path = _log_path(es, sid)
    data = path.read_bytes()
    line = check_error(es.run("rewind", "2", "--code", expect=1))
    assert "nothing to restore after prompt 2" in line
    assert path.read_bytes() == data
    assert _prompts(es) == ["p1", "p2"]


def test_rewind_code_conflict_is_reported_with_exit_3(es: Earshot) -> None:
    _new(es)
    es.run("prompt", "p1")
    es.run("prompt", "p2")
    _write(es, "a.txt", "agent\n")
    es.write("a.txt", "edited by hand\n")
    ran = es.run("rewind", "2", "--code", expect=3)
    assert "conflict a.txt" in ran.stdout and ran.stdout.endswith("p2\n")
    assert (es.root / "a.txt").read_text() == "edited by hand\n"
    assert _prompts(es) == ["p1"]


def test_a_second_rewind_while_one_runs_is_refused(es: Earshot, check_error: Any) -> None:
    sid = _new(es)
    es.run("prompt", "p1")
    path = _log_path(es, sid)
    data = path.read_bytes()
    fd = os.open(path.with_name(f"{sid}.rewind.lock"), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # what a running rewind holds
        line = check_error(es.run("rewind", "1", expect=1))
        assert "is being rewound elsewhere" in line
    finally:
        os.close(fd)
    assert path.read_bytes() == data
    assert es.run("rewind", "1").stdout == "p1\n"


def test_rewind_usage_errors(es: Earshot) -> None:
    _new(es)
    es.run("prompt", "p1")
    assert "--code" in es.run("rewind", "1", "--dry-run", expect=2).stderr
    es.run("rewind", "0", expect=2)
    es.run("rewind", "2", expect=1)
    es.run("tree", "--session", "x", "--continue", expect=2)


def test_sessions_newest_first_continue_and_resume(es: Earshot) -> None:
    first, second, third = _new(es), _new(es), _new(es)
    listed = es.json("sessions")["sessions"]
    assert [s["id"] for s in listed] == [third, second, first]
    assert {"id", "created", "last_activity", "batches", "first_prompt"} <= set(listed[0])

    prefix = _unique_prefix(first, [second, third])
    es.run("prompt", "--resume", prefix, "back to the first")
    _write(es, "a.txt", "a\n", "--resume", prefix)
    listed = es.json("sessions")["sessions"]
    assert [s["id"] for s in listed] == [first, third, second]
    assert (listed[0]["batches"], listed[0]["first_prompt"]) == (1, "back to the first")

    assert es.json("tree", "--continue")["session"] == first
    env = es.env(EARSHOT_SESSION=second)
    assert es.json("tree", env=env)["session"] == second
    assert es.json("tree", "--continue", env=env)["session"] == first
    assert es.json("log", "--resume", _unique_prefix(third, [first, second]))["session"] == third
    assert "1 batches" in es.run("sessions").stdout


def test_fork_json_names_its_source_and_its_tree_has_the_earlier_prompts(es: Earshot) -> None:
    sid = _new(es)
    for n in range(1, 5):
        es.run("prompt", f"p{n}")
    doc = es.json("fork", "3")
    assert doc["from"]["session"] == sid and doc["from"]["entry"]
    assert _prompts(es, "--session", doc["id"]) == ["p1", "p2"]
    header = _lines(_log_path(es, doc["id"]))[0]
    assert header["forkOf"] == {"session": sid, "entry": doc["from"]["entry"]}
    assert es.run("fork", "2").stdout.strip() in {s["id"] for s in es.json("sessions")["sessions"]}


def test_sessions_check_names_a_corrupt_middle_line(es: Earshot) -> None:
    sid = _new(es)
    for n in range(1, 4):
        es.run("prompt", f"p{n}")
    path = _log_path(es, sid)
    lines = path.read_bytes().splitlines(keepends=True)
    lines[2] = b"{not json\n"
    path.write_bytes(b"".join(lines))
    ran = es.run("sessions", "check", expect=1)
    assert f"{sid}.jsonl: line 3: bad_line" in ran.stdout
    assert len(ran.stderr.splitlines()) == 1 and ran.stderr.startswith("earshot: ")
    doc = es.json("sessions", "check", expect=1)
    (item,) = doc["sessions"]
    problems = [(p["kind"], p["line"]) for p in item["problems"]]
    assert item["ok"] is False
    assert problems == [("bad_line", 3), ("missing_parent", 4)]  # p3 hung from the lost line


def test_sessions_check_repair_truncates_a_torn_tail_and_keeps_a_backup(es: Earshot) -> None:
    sid = _new(es)
    es.run("prompt", "p1")
    path = _log_path(es, sid)
    torn = path.read_bytes() + b'{"id":"01torn","parentId":nu'
    path.write_bytes(torn)
    assert "torn_tail" in es.run("sessions", "check", expect=1).stdout

    doc = es.json("sessions", "check", "--repair")
    (item,) = doc["sessions"]
    assert item["ok"] is True and item["repair"]["truncated_bytes"] > 0
    backup = Path(item["repair"]["backup"])
    assert backup.read_bytes() == torn
    assert "1 of" not in es.run("sessions", "check").stderr
    es.run("prompt", "p2")
    assert _prompts(es) == ["p1", "p2"]
    assert all(line.startswith(b"{") for line in path.read_bytes().splitlines())
