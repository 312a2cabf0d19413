"""``earshot transcript``: a session's conversation along a path, end to end.

Logs are made through the CLI (``session new``, ``prompt``, ``say``,
``bash``, ``rewind``); tool calls, which only ``earshot chat`` writes, are
appended with the log library as the chat appends them.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import pexpect
from earshot_cli import EARSHOT

from earshot.agent.log.entries import ToolCall, ToolResult
from earshot.agent.log.session import Session

if TYPE_CHECKING:
    from earshot_cli import Cli


def _log_path(cli: Cli, sid: str) -> Path:
    (path,) = (cli.home / "sessions").glob(f"*/{sid}.jsonl")
    return path


def _shown(doc: dict[str, Any]) -> list[tuple[str, str | int | None]]:
    """Each item as (type, its text, or batch number, or tool name, or where)."""
    out: list[tuple[str, str | int | None]] = []
    for item in doc["items"]:
        kind = item["type"]
        value = {
            "user": "text",
            "assistant": "text",
            "batch": "batch",
            "tool_call": "name",
            "navigation": "where",
        }.get(kind)
        out.append((kind, item[value] if value else None))
    return out


def test_items_follow_the_path_in_order_with_prompts_numbered(cli: Cli) -> None:
    sid = cli.new_session()
    cli.run("prompt", "make a\nwith care")
    cli.run("bash", "echo a > a.txt")
    cli.run("say", "made a")
    cli.run("say", "--role", "user", "now b")
    cli.run("say", "made b\nand checked it")
    doc = cli.json("transcript")
    assert (doc["session"], doc["current"], doc["agent"]) == (sid, True, None)
    assert doc["at"] == doc["leaf"] == doc["items"][-1]["id"]
    assert _shown(doc) == [
        ("user", "make a\nwith care"),
        ("batch", 1),
        ("assistant", "made a"),
        ("user", "now b"),
        ("assistant", "made b\nand checked it"),
    ]
    assert [i.get("n") for i in doc["items"]] == [1, None, None, 2, None]
    first = doc["items"][0]
    assert first["parent"] is None and first["alternatives"] == []
    assert {"id", "ts", "time"} <= set(first) and first["time"].count(":") == 2
    assert [i["parent"] for i in doc["items"][1:]] == [i["id"] for i in doc["items"][:-1]]
    text = cli.run("transcript").stdout
    lines = text.splitlines()
    assert lines[0] == f"session {sid}: the current path, 2 prompts"
    assert lines[1].startswith("   1  ") and lines[1].endswith("  you: make a")
    assert lines[2].strip() == "with care"  # a prompt is shown whole
    assert "   2  " in text and "you: now b" in text
    assert "      batch 1" in lines and "        and checked it" in lines


def test_a_tool_result_is_folded_into_its_call_and_an_unmatched_one_stays(cli: Cli) -> None:
    sid = cli.new_session()
    cli.run("prompt", "list the files")
    log = Session.open(_log_path(cli, sid))
    log.append(ToolCall("c1", "bash", {"command": "ls"}))
    log.append(ToolCall("c2", "bash", {"command": "false"}))
    log.append(ToolResult("c1", "a.txt\nb.txt\nc.txt"))
    log.append(ToolResult("c2", "exit 1", is_error=True))
    stray = log.append(ToolResult("c9", "from nowhere"))
    cli.run("say", "three files")
    doc = cli.json("transcript")
    assert _shown(doc) == [
        ("user", "list the files"),
        ("tool_call", "bash"),
        ("tool_call", "bash"),
        ("tool_result", None),
        ("assistant", "three files"),
    ]
    call = doc["items"][1]
    assert (call["call_id"], call["input"]) == ("c1", {"command": "ls"})
    assert call["result"] == {
        "id": call["result"]["id"],
        "output": "a.txt\nb.txt\nc.txt",
        "is_error": False,
        "interrupted": False,
    }
    assert doc["items"][2]["result"]["is_error"] is True
    unmatched = doc["items"][3]
    assert (unmatched["id"], unmatched["call_id"], unmatched["output"]) == (
        stray.id,
        "c9",
        "from nowhere",
    )
    text = cli.run("transcript").stdout
    assert "      bash: ls -> a.txt (+2 lines)" in text.splitlines()
    assert "      bash: false -> error: exit 1" in text.splitlines()


def test_after_a_rewind_the_old_branch_is_an_alternative_and_at_shows_it(cli: Cli) -> None:
    cli.new_session()
    cli.run("prompt", "first try")
    cli.run("say", "answer one")
    cli.run("say", "--role", "user", "and more")
    old = cli.json("transcript")
    cli.run("rewind", "1")
    cli.run("prompt", "second try")
    now = cli.json("transcript")
    assert now["current"] is True
    assert _shown(now) == [("navigation", "to"), ("user", "second try")]
    rewind = now["items"][0]
    assert (rewind["target"], rewind["from"], rewind["prompt"]) == (None, old["leaf"], 1)
    (alternative,) = now["items"][1]["alternatives"]
    assert alternative == {
        "id": old["items"][0]["id"],
        "type": "user",
        "first_line": "first try",
        "leaf": old["leaf"],
    }

    branch = cli.json("transcript", "--at", alternative["leaf"])
    assert (branch["current"], branch["at"], branch["leaf"]) == (False, old["leaf"], now["leaf"])
    assert _shown(branch) == [
        ("user", "first try"),
        ("assistant", "answer one"),
        ("user", "and more"),
        ("navigation", "from"),
    ]
    assert branch["items"][-1]["id"] == rewind["id"]
    (back,) = branch["items"][0]["alternatives"]
    assert back["leaf"] == now["leaf"]
    # Any entry of the branch shows the same branch, down to its most recent end.
    assert cli.json("transcript", "--at", old["items"][0]["id"][:20])["at"] == old["leaf"]

    text = cli.run("transcript").stdout
    assert f"[2 branches: earshot transcript --at {old['leaf']}]" in text
    assert "<- rewound to before prompt 1 (" in text
    text = cli.run("transcript", "--at", old["leaf"]).stdout
    assert "(not the current path)" in text.splitlines()[0]
    assert "<- rewound from here to before prompt 1 (" in text


def test_a_session_with_no_log_has_no_items_and_none_is_made(cli: Cli) -> None:
    sid = cli.new_session()
    path = _log_path(cli, sid)
    path.unlink()
    doc = cli.json("transcript", "--session", sid)
    assert (doc["session"], doc["items"], doc["leaf"], doc["current"]) == (sid, [], None, True)
    assert not path.exists()
    assert cli.run("transcript", "--session", sid).stdout.startswith(f"session {sid}: nothing")


def test_a_bad_at_fails_with_one_line(cli: Cli) -> None:
    cli.new_session()
    cli.run("prompt", "hello")
    ran = cli.run("transcript", "--at", "zzzz", expect=1)
    assert ran.stdout == ""
    assert ran.stderr.splitlines() == ["earshot: no entry starts with 'zzzz'"]
    error = cli.json("transcript", "--at", "zzzz", expect=1)["error"]
    assert (error["code"], error["exit"]) == ("no_matching_id", 1)


def test_a_root_with_no_store_has_no_session_to_show(cli: Cli) -> None:
    doc = cli.json("transcript")
    assert (doc["session"], doc["items"]) == (None, [])
    assert "no sessions" in cli.run("transcript").stdout
    assert not (cli.home / "sessions").exists()


def test_on_a_terminal_it_goes_through_the_pager_in_colour(cli: Cli, tmp_path: Path) -> None:
    sid = cli.new_session()
    cli.run("prompt", "hello there")
    mark = tmp_path / "paged.txt"
    pager = tmp_path / "pager.sh"
    pager.write_text(f"#!/bin/sh\ncat > {mark}\n")
    pager.chmod(0o755)
    child = pexpect.spawn(
        str(EARSHOT),
        ["transcript"],
        cwd=str(cli.root),
        env=cli.env(sid, EARSHOT_PAGER=str(pager)),
        encoding="utf-8",
        timeout=60,
    )
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0
    paged = mark.read_text()
    assert "\x1b[33m   1" in paged and "you: hello there" in paged, paged
