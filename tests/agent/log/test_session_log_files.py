"""Damaged session files: torn tails, corrupt lines, check and repair."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest

from earshot.agent.log.check import check, repair
from earshot.agent.log.entries import (
    AssistantMessage,
    Repair,
    ToolCall,
    ToolResult,
    UserMessage,
)
from earshot.agent.log.fileio import SessionCorrupt
from earshot.agent.log.session import Session


def make(tmp_path: Path, prompts: int = 2) -> Session:
    session = Session.create(tmp_path, tmp_path)
    for n in range(1, prompts + 1):
        session.append(UserMessage(f"p{n}"))
        session.append(AssistantMessage(f"a{n}"))
    return session


def raw_line(**fields: Any) -> bytes:
    return (json.dumps(fields) + "\n").encode()


def kinds(problems: list[Any]) -> list[tuple[str, int | None]]:
    return [(p.kind, p.line) for p in problems]


# -- torn tails ---------------------------------------------------------------


def test_torn_last_line_is_ignored_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    session = make(tmp_path)
    sound = session.path.read_bytes()
    with open(session.path, "ab") as handle:
        handle.write(b'{"id":"01zz","parentId":null,"type":"user","ts":"2025-01-0')
    with caplog.at_level(logging.WARNING, logger="earshot"):
        reopened = Session.open(session.path)
    warnings = [r for r in caplog.records if r.name.startswith("earshot")]
    assert [e.id for e in reopened.entries()] == [e.id for e in session.entries()]
    torn = reopened.torn_tail
    assert torn is not None
    assert (torn.line, torn.offset, torn.terminated) == (6, len(sound), False)
    assert len(warnings) == 1 and warnings[0].levelno == logging.WARNING
    assert "event='session_torn_tail'" in warnings[0].getMessage()
    assert "line=6" in warnings[0].getMessage()


def test_next_append_after_a_torn_tail_starts_on_a_fresh_line(tmp_path: Path) -> None:
    session = make(tmp_path)
    leaf = session.leaf
    fragment = b'{"id":"01zz","parentId":null,"type":"us'
    with open(session.path, "ab") as handle:
        handle.write(fragment)
    before = session.path.read_bytes()

    entry = Session.open(session.path).append(UserMessage("after the crash"))

    after = session.path.read_bytes()
    assert after.startswith(before)  # only appended
    assert after.endswith(b"\n")
    added = after[len(before) :].split(b"\n")
    assert added[0] == b""  # the newline that ends the fragment's line
    repair_line, entry_line = json.loads(added[1]), json.loads(added[2])
    assert repair_line["type"] == "repair"
    assert repair_line["offset"] == len(before) - len(fragment)
    assert entry_line["id"] == entry.id
    assert entry.parent_id == leaf
    again = Session.open(session.path)
    assert again.torn_tail is None
    assert [e.id for e in again.context()][-1] == entry.id
    assert isinstance(again.entries()[-2].body, Repair)
    assert check(session.path) == []


def test_a_handle_that_saw_the_tear_seals_it_off_too(tmp_path: Path) -> None:
    session = make(tmp_path)
    with open(session.path, "ab") as handle:
        handle.write(b"\x00\x00\x00")
    session.refresh()
    assert session.torn_tail is not None
    entry = session.append(UserMessage("next"))
    assert Session.open(session.path).leaf == entry.id
    assert check(session.path) == []


def test_garbage_line_with_a_newline_at_the_end_is_a_torn_tail(tmp_path: Path) -> None:
    session = make(tmp_path)
    with open(session.path, "ab") as handle:
        handle.write(b"\x00\x00\x00\n")
    reopened = Session.open(session.path)
    assert reopened.torn_tail is not None and reopened.torn_tail.terminated
    reopened.append(UserMessage("next"))
    assert not session.path.read_bytes().endswith(b"\n\n")
    assert Session.open(session.path).torn_tail is None


def test_complete_json_without_its_newline_counts_as_torn(tmp_path: Path) -> None:
    session = make(tmp_path)
    leaf = session.leaf
    line = raw_line(id="01lost", parentId=leaf, type="user", ts="t", text="lost")
    with open(session.path, "ab") as handle:
        handle.write(line[:-1])
    reopened = Session.open(session.path)
    assert reopened.leaf == leaf
    assert reopened.torn_tail is not None


def test_a_torn_repair_is_itself_sealed_off_by_the_next_append(tmp_path: Path) -> None:
    session = make(tmp_path)
    sound = len(session.path.read_bytes())
    with open(session.path, "ab") as handle:
        handle.write(b'{"id":"torn-one"\n{"id":"01x","parentId":null,"type":"repair","off')
    reopened = Session.open(session.path)
    assert reopened.torn_tail is not None and reopened.torn_tail.offset == sound
    entry = reopened.append(UserMessage("next"))
    assert Session.open(session.path).leaf == entry.id


# -- corruption -----------------------------------------------------------------


def test_corrupt_middle_line_is_an_error_naming_file_and_line(tmp_path: Path) -> None:
    session = make(tmp_path)
    data = session.path.read_bytes().split(b"\n")
    data[2] = b'{"id": broken'
    session.path.write_bytes(b"\n".join(data))
    with pytest.raises(SessionCorrupt) as caught:
        Session.open(session.path)
    assert caught.value.line == 3
    assert caught.value.path == session.path
    assert f"{session.path}:3" in str(caught.value)


def test_entry_with_a_missing_field_is_an_error_naming_its_line(tmp_path: Path) -> None:
    session = make(tmp_path)
    with open(session.path, "ab") as handle:
        handle.write(raw_line(id="01a", parentId=session.leaf, type="user", ts="t"))
    with pytest.raises(SessionCorrupt, match="'text'") as caught:
        Session.open(session.path)
    assert caught.value.line == 6


def test_entry_whose_parent_is_unknown_is_an_error(tmp_path: Path) -> None:
    session = make(tmp_path)
    with open(session.path, "ab") as handle:
        handle.write(raw_line(id="01a", parentId="01nowhere", type="user", ts="t", text="x"))
    with pytest.raises(SessionCorrupt, match="01nowhere") as caught:
        Session.open(session.path)
    assert caught.value.line == 6


def test_duplicate_id_is_an_error(tmp_path: Path) -> None:
    session = make(tmp_path)
    first = session.entries()[0]
    with open(session.path, "ab") as handle:
        handle.write(raw_line(id=first.id, parentId=None, type="user", ts="t", text="x"))
    with pytest.raises(SessionCorrupt, match="twice"):
        Session.open(session.path)


def test_file_without_a_header_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(raw_line(id="01a", parentId=None, type="user", ts="t", text="x"))
    with pytest.raises(SessionCorrupt, match="header") as caught:
        Session.open(path)
    assert caught.value.line == 1
    path.write_bytes(b"")
    with pytest.raises(SessionCorrupt, match="header"):
        Session.open(path)


def test_a_file_that_shrinks_under_an_open_handle_is_an_error(tmp_path: Path) -> None:
    session = make(tmp_path)
    data = session.path.read_bytes()
    session.path.write_bytes(data[: len(data) // 2])
    with pytest.raises(SessionCorrupt, match="shrank"):
        session.append(UserMessage("x"))


# -- check --------------------------------------------------------------------------


def test_check_finds_nothing_wrong_in_a_sound_file(tmp_path: Path) -> None:
    session = make(tmp_path)
    session.rewind(2)
    session.append(UserMessage("p2b"))
    assert check(session.path) == []


def test_check_reports_a_torn_tail_as_repairable(tmp_path: Path) -> None:
    session = make(tmp_path)
    with open(session.path, "ab") as handle:
        handle.write(b'{"id":')
    [problem] = check(session.path)
    assert (problem.kind, problem.line, problem.repairable) == ("torn_tail", 6, True)


def test_check_reports_every_problem_with_its_line(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    header = raw_line(type="session", version=1, id="s", root="/", created="t")
    body = [
        raw_line(id="a", parentId=None, type="user", ts="t", text="p"),
        b"not json\n",
        raw_line(id="a", parentId=None, type="user", ts="t", text="dup"),
        raw_line(id="b", parentId="ghost", type="assistant", ts="t", text="x"),
        raw_line(id="c", parentId="d", type="assistant", ts="t", text="x"),
        raw_line(id="d", parentId="c", type="assistant", ts="t", text="x"),
        raw_line(id="e", parentId="a", type="user", ts="t"),
        raw_line(id="f", parentId="a", type="navigation", ts="t", target="ghost"),
        raw_line(id="g", parentId="a", type="compaction", ts="t", summary="s", firstKeptId="zz"),
        raw_line(id="h", parentId="g", type="tool_call", ts="t", callId="c9", name="bash"),
    ]
    path.write_bytes(header + b"".join(body))
    assert kinds(check(path)) == [
        ("bad_line", 3),
        ("duplicate_id", 4),
        ("missing_parent", 5),
        ("cycle", 6),
        ("late_parent", 6),
        ("bad_entry", 8),
        ("bad_reference", 9),
        ("bad_compaction", 10),
        ("interrupted_tool_call", 11),
    ]
    assert not any(p.repairable for p in check(path) if p.kind != "interrupted_tool_call")


def test_check_reports_a_missing_header(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(raw_line(id="a", parentId=None, type="user", ts="t", text="p"))
    assert ("header", 1) in kinds(check(path))


# -- repair -------------------------------------------------------------------------


def test_repair_truncates_a_torn_tail_and_keeps_a_backup(tmp_path: Path) -> None:
    session = make(tmp_path)
    sound = session.path.read_bytes()
    with open(session.path, "ab") as handle:
        handle.write(b'{"id":"01zz","par')
    damaged = session.path.read_bytes()

    result = repair(session.path)

    assert result.backup is not None
    assert result.backup.name.startswith(f"{session.path.name}.bak-")
    assert result.backup.read_bytes() == damaged
    assert session.path.read_bytes() == sound
    assert result.truncated_bytes == len(damaged) - len(sound)
    assert result.remaining == ()
    assert check(session.path) == []


def test_repair_answers_interrupted_tool_calls_by_appending(tmp_path: Path) -> None:
    session = make(tmp_path)
    session.append(ToolCall("c1", "bash"))
    before = session.path.read_bytes()
    result = repair(session.path)
    assert session.path.read_bytes().startswith(before)
    assert [type(e.body) for e in result.appended] == [ToolResult]
    assert result.backup is not None and result.backup.read_bytes() == before
    assert result.remaining == ()


def test_repair_of_a_sound_file_changes_nothing_and_makes_no_backup(tmp_path: Path) -> None:
    session = make(tmp_path)
    before = session.path.read_bytes()
    result = repair(session.path)
    assert result.backup is None
    assert result.appended == () and result.truncated_bytes == 0
    assert session.path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir() if ".bak-" in p.name] == []


def test_repair_leaves_what_needs_a_person_and_says_so(tmp_path: Path) -> None:
    session = make(tmp_path)
    session.append(ToolCall("c1", "bash"))
    data = session.path.read_bytes().split(b"\n")
    data[2] = b"garbage"
    session.path.write_bytes(b"\n".join(data) + b'{"torn')
    result = repair(session.path)
    assert result.backup is not None
    assert not session.path.read_bytes().endswith(b'{"torn')  # the torn tail went
    assert result.appended == ()  # the file does not load, so nothing is appended
    assert (result.remaining[0].kind, result.remaining[0].line) == ("bad_line", 3)
    assert ("missing_parent", 4) in kinds(list(result.remaining))  # p2 answered the lost a1


def test_a_bad_line_before_an_acknowledged_torn_write_is_still_reported(tmp_path: Path) -> None:
    session = make(tmp_path)
    with open(session.path, "ab") as handle:
        handle.write(b"garbage\n")
    size = session.path.stat().st_size
    with open(session.path, "ab") as handle:
        handle.write(b'{"torn\n')
        handle.write(
            raw_line(id="01r", parentId=session.leaf, type="repair", ts="t", offset=size, line=7)
        )
    with pytest.raises(SessionCorrupt) as caught:
        Session.open(session.path)
    assert caught.value.line == 6
    assert kinds(check(session.path)) == [("bad_line", 6)]
