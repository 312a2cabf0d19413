"""The conversation commands end to end: prompt, say, tree, rewind, fork, sessions (check).

Every command is the real ``earshot`` script in a subprocess with its own
``EARSHOT_HOME`` (``cli``, from this folder's conftest).
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
    from earshot_cli import Cli


def _sessions_dir(cli: Cli) -> Path:
    dirs = [p for p in (cli.home / "sessions").iterdir() if p.is_dir()]
    assert len(dirs) == 1, dirs
    return dirs[0]


def _log_path(cli: Cli, sid: str) -> Path:
    return _sessions_dir(cli) / f"{sid}.jsonl"


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_bytes().splitlines()]


def _new(cli: Cli) -> str:
    sid: str = cli.json("session", "new")["id"]
    return sid


def _write(cli: Cli, path: str, text: str, *extra: str) -> None:
    source = cli.root.parent / "source.txt"
    source.write_text(text)
    cli.run("write", path, "--from", str(source), *extra)


def _prompts(cli: Cli, *extra: str) -> list[str]:
    return [p["text"] for p in cli.json("tree", *extra)["prompts"]]


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


def test_session_new_makes_both_halves_under_one_id(cli: Cli) -> None:
    sid = _new(cli)
    header = _lines(_log_path(cli, sid))[0]
    assert (header["type"], header["id"]) == ("session", sid)
    (listed,) = cli.json("sessions")["sessions"]
    assert listed["id"] == sid and listed["has_log"] and listed["has_checkpoints"]


def test_prompt_then_write_puts_the_batch_after_the_prompt(cli: Cli) -> None:
    sid = _new(cli)
    doc = cli.json("prompt", "make a")
    assert doc["session"] == sid
    _write(cli, "a.txt", "a\n")
    cli.run("say", "made a")
    cli.run("undo")
    _header, prompt, link, said, undo_link = _lines(_log_path(cli, sid))
    assert prompt["id"] == doc["id"] and prompt["text"] == "make a"
    assert (link["type"], link["batch"], link["parentId"]) == ("batch", 1, prompt["id"])
    assert (said["type"], said["text"], said["parentId"]) == ("assistant", "made a", link["id"])
    assert (undo_link["batch"], undo_link["parentId"]) == (2, said["id"])


def test_tree_numbers_the_prompts_and_marks_branches(cli: Cli) -> None:
    _new(cli)
    cli.run("prompt", "first\nwith a second line")
    cli.run("say", "--role", "assistant", "reply")
    cli.run("say", "--role", "user", "second")
    doc = cli.json("tree")
    assert [(p["n"], p["text"], p["branches"]) for p in doc["prompts"]] == [
        (1, "first\nwith a second line", False),
        (2, "second", False),
    ]
    assert {"n", "id", "text", "time", "branches"} <= set(doc["prompts"][0])
    cli.run("rewind", "2")
    cli.run("prompt", "second, again")
    assert [p["branches"] for p in cli.json("tree")["prompts"]] == [False, True]
    text = cli.run("tree").stdout
    assert "   1  " in text and "first" in text and "with a second line" not in text
    assert "second, again  [branches]" in text


def test_rewind_add_rewind_fork_every_context_exact_and_the_file_only_grew(cli: Cli) -> None:
    sid = _new(cli)
    path = _log_path(cli, sid)

    def turn(n: str) -> None:
        cli.run("prompt", f"p{n}")
        cli.run("say", f"a{n}")

    for n in "12345":
        turn(n)
    snapshots = [path.read_bytes()]

    first = cli.json("rewind", "2")
    assert (first["text"], first["prompt"]) == ("p2", 2)
    assert _prompts(cli) == ["p1"]
    assert _said(path) == ["p1", "a1"]
    snapshots.append(path.read_bytes())

    turn("2b")
    turn("3b")
    assert _prompts(cli) == ["p1", "p2b", "p3b"]
    cli.run("rewind", "4", expect=1)  # the new path has three prompts
    turn("4b")
    turn("5b")
    snapshots.append(path.read_bytes())

    assert cli.run("rewind", "4").stdout == "p4b\n"
    assert _prompts(cli) == ["p1", "p2b", "p3b"]
    assert _said(path) == ["p1", "a1", "p2b", "a2b", "p3b", "a3b"]
    snapshots.append(path.read_bytes())

    fork = cli.json("fork", "3")
    assert fork["from"]["session"] == sid
    assert _prompts(cli, "--session", fork["id"]) == ["p1", "p2b"]
    assert _said(_log_path(cli, fork["id"])) == ["p1", "a1", "p2b", "a2b"]
    assert _prompts(cli, "--session", sid) == ["p1", "p2b", "p3b"]
    assert _said(path) == ["p1", "a1", "p2b", "a2b", "p3b", "a3b"]

    final = path.read_bytes()
    for older in snapshots:
        assert final.startswith(older)


def test_rewind_code_undoes_exactly_the_batches_after_the_prompt_and_redo_restores(
    cli: Cli,
) -> None:
    sid = _new(cli)
    cli.write("keep.txt", "mine\n")
    cli.run("prompt", "p1")
    _write(cli, "a.txt", "a1\n")
    after_p1 = _files(cli.root)
    cli.run("prompt", "p2")
    _write(cli, "b.txt", "b\n")
    _write(cli, "a.txt", "a2\n")
    cli.run("prompt", "p3")
    cli.run("bash", "mkdir d && echo c > d/c.txt")
    before = _files(cli.root)
    log_before = _log_path(cli, sid).read_bytes()

    dry = cli.json("rewind", "2", "--code", "--dry-run")
    assert dry["dry_run"] is True and dry["navigation"] is None and dry["text"] == "p2"
    assert sorted(dry["code"]["deleted"]) == ["b.txt", "d/c.txt"]
    assert dry["code"]["restored"] == ["a.txt"]
    assert _files(cli.root) == before
    assert _log_path(cli, sid).read_bytes() == log_before

    done = cli.json("rewind", "2", "--code")
    assert done["batches"] == [2, 3, 4] and done["text"] == "p2"
    assert done["navigation"] is not None
    assert sorted(done["code"]["deleted"]) == ["b.txt", "d/c.txt"]
    assert _files(cli.root) == after_p1
    assert not (cli.root / "d").exists()
    assert _prompts(cli) == ["p1"]
    assert cli.json("log")["batches"][-1]["kind"] == "rewind"

    cli.run("redo")
    assert _files(cli.root) == before


def test_rewind_code_with_nothing_to_restore_is_refused_and_appends_nothing(
    cli: Cli, check_error: Any
) -> None:
    sid = _new(cli)
    cli.run("prompt", "p1")
    _write(cli, "a.txt", "a\n")
    cli.run("prompt", "p2")
    path = _log_path(cli, sid)
    data = path.read_bytes()
    line = check_error(cli.run("rewind", "2", "--code", expect=1))
    assert "nothing to restore after prompt 2" in line
    assert path.read_bytes() == data
    assert _prompts(cli) == ["p1", "p2"]


def test_rewind_code_conflict_is_reported_with_exit_3(cli: Cli) -> None:
    _new(cli)
    cli.run("prompt", "p1")
    cli.run("prompt", "p2")
    _write(cli, "a.txt", "agent\n")
    cli.write("a.txt", "edited by hand\n")
    ran = cli.run("rewind", "2", "--code", expect=3)
    assert "conflict a.txt" in ran.stdout and ran.stdout.endswith("p2\n")
    assert (cli.root / "a.txt").read_text() == "edited by hand\n"
    assert _prompts(cli) == ["p1"]


def test_a_second_rewind_while_one_runs_is_refused(cli: Cli, check_error: Any) -> None:
    sid = _new(cli)
    cli.run("prompt", "p1")
    path = _log_path(cli, sid)
    data = path.read_bytes()
    fd = os.open(path.with_name(f"{sid}.rewind.lock"), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # what a running rewind holds
        line = check_error(cli.run("rewind", "1", expect=1))
        assert "is being rewound elsewhere" in line
    finally:
        os.close(fd)
    assert path.read_bytes() == data
    assert cli.run("rewind", "1").stdout == "p1\n"


def test_rewind_usage_errors(cli: Cli) -> None:
    _new(cli)
    cli.run("prompt", "p1")
    assert "--code" in cli.run("rewind", "1", "--dry-run", expect=2).stderr
    cli.run("rewind", "0", expect=2)
    cli.run("rewind", "2", expect=1)
    cli.run("tree", "--session", "x", "--continue", expect=2)


def test_sessions_newest_first_continue_and_resume(cli: Cli) -> None:
    first, second, third = _new(cli), _new(cli), _new(cli)
    listed = cli.json("sessions")["sessions"]
    assert [s["id"] for s in listed] == [third, second, first]
    assert {"id", "created", "last_activity", "batches", "first_prompt"} <= set(listed[0])

    prefix = _unique_prefix(first, [second, third])
    cli.run("prompt", "--resume", prefix, "back to the first")
    _write(cli, "a.txt", "a\n", "--resume", prefix)
    listed = cli.json("sessions")["sessions"]
    assert [s["id"] for s in listed] == [first, third, second]
    assert (listed[0]["batches"], listed[0]["first_prompt"]) == (1, "back to the first")
    assert [s["prompts"] for s in listed] == [1, 0, 0]

    assert cli.json("tree", "--continue")["session"] == first
    env = cli.env(EARSHOT_SESSION=second)
    assert cli.json("tree", env=env)["session"] == second
    assert cli.json("tree", "--continue", env=env)["session"] == first
    assert cli.json("log", "--resume", _unique_prefix(third, [first, second]))["session"] == third
    top = cli.run("sessions").stdout.splitlines()[0].split()
    assert top[:6] == [first, "earshot", "1", "prompt", "1", "batch"], top


def test_fork_json_names_its_source_and_its_tree_has_the_earlier_prompts(cli: Cli) -> None:
    sid = _new(cli)
    for n in range(1, 5):
        cli.run("prompt", f"p{n}")
    doc = cli.json("fork", "3")
    assert doc["from"]["session"] == sid and doc["from"]["entry"]
    assert _prompts(cli, "--session", doc["id"]) == ["p1", "p2"]
    header = _lines(_log_path(cli, doc["id"]))[0]
    assert header["forkOf"] == {"session": sid, "entry": doc["from"]["entry"]}
    forked = cli.run("fork", "2").stdout.strip()
    assert forked in {s["id"] for s in cli.json("sessions")["sessions"]}


def test_sessions_check_names_a_corrupt_middle_line(cli: Cli) -> None:
    sid = _new(cli)
    for n in range(1, 4):
        cli.run("prompt", f"p{n}")
    path = _log_path(cli, sid)
    lines = path.read_bytes().splitlines(keepends=True)
    lines[2] = b"{not json\n"
    path.write_bytes(b"".join(lines))
    ran = cli.run("sessions", "check", expect=1)
    assert f"{sid}.jsonl: line 3: bad_line" in ran.stdout
    assert len(ran.stderr.splitlines()) == 1 and ran.stderr.startswith("earshot: ")
    doc = cli.json("sessions", "check", expect=1)
    (item,) = doc["sessions"]
    problems = [(p["kind"], p["line"]) for p in item["problems"]]
    assert item["ok"] is False
    assert problems == [("bad_line", 3), ("missing_parent", 4)]  # p3 hung from the lost line


def test_sessions_check_repair_truncates_a_torn_tail_and_keeps_a_backup(cli: Cli) -> None:
    sid = _new(cli)
    cli.run("prompt", "p1")
    path = _log_path(cli, sid)
    torn = path.read_bytes() + b'{"id":"01torn","parentId":nu'
    path.write_bytes(torn)
    assert "torn_tail" in cli.run("sessions", "check", expect=1).stdout

    doc = cli.json("sessions", "check", "--repair")
    (item,) = doc["sessions"]
    assert item["ok"] is True and item["repair"]["truncated_bytes"] > 0
    backup = Path(item["repair"]["backup"])
    assert backup.read_bytes() == torn
    assert "1 of" not in cli.run("sessions", "check").stderr
    cli.run("prompt", "p2")
    assert _prompts(cli) == ["p1", "p2"]
    assert all(line.startswith(b"{") for line in path.read_bytes().splitlines())


def test_a_line_nested_too_deep_is_a_torn_tail_not_a_crash(cli: Cli) -> None:
    sid = _new(cli)
    cli.run("prompt", "hi", "--session", sid)
    with _log_path(cli, sid).open("ab") as log:
        log.write(b"[" * 100_000 + b"]" * 100_000 + b"\n")
    for args in (("tree",), ("prompt", "again"), ("sessions", "check")):
        ran = (
            cli.run(*args, "--session", sid, expect=None)
            if args[0] != "sessions"
            else (cli.run(*args, expect=None))
        )
        assert "Traceback" not in ran.stderr and "RecursionError" not in ran.stderr, str(ran)
    assert _prompts(cli, "--session", sid) == ["hi", "again"]


def test_a_fifo_in_place_of_a_session_file_is_refused_at_once(cli: Cli, check_error: Any) -> None:
    sid = _new(cli)
    path = _log_path(cli, sid)
    path.unlink()
    os.mkfifo(path)
    for args in (
        ("tree", "--session", sid),
        ("prompt", "x", "--session", sid),
        ("sessions", "check"),
    ):
        line = check_error(cli.run(*args, expect=1, timeout=20))
        assert "not a regular file" in line, args
