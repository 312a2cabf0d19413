"""The loop's pure parts: the log's context as messages, each provider's wire
format, the tools' input and output, errors and options in one line."""

from __future__ import annotations

import json
from typing import Any

import pytest

from earshot.agent.core.calls import Bash, CallResult, EditFile, WriteFile
from earshot.agent.log.entries import (
    AssistantMessage,
    Body,
    Compaction,
    Entry,
    Permission,
    ToolCall,
    ToolResult,
    UserMessage,
)
from earshot.agent.log.ids import EntryId
from earshot.agent.loop import anthropic_api, openai_api
from earshot.agent.loop.errors import one_line_error
from earshot.agent.loop.history import SUMMARY_HEAD, Message, Output, Text, Use, messages_of
from earshot.agent.loop.permissions import UnknownTool, parse_allow
from earshot.agent.loop.provider import DEFAULT_MODEL, BadModel, parse_model
from earshot.agent.loop.tools import capped, result_text, to_call


def entries(*bodies: Body) -> list[Entry]:
    return [
        Entry(EntryId(f"e{i}"), None, "2026-01-01T00:00:00.000Z", body)
        for i, body in enumerate(bodies)
    ]


def conversation() -> list[Message]:
    return messages_of(
        entries(
            UserMessage("fix it"),
            AssistantMessage("Looking."),
            ToolCall("c1", "bash", {"command": "make"}),
            ToolCall("c2", "read_file", {"path": "a"}),
            Permission("bash", {"scope": "once"}),
            ToolResult("c1", "ok", False),
            ToolResult("c2", "no such file", True),
            UserMessage("and the docs"),
            AssistantMessage("Done."),
        )
    )


def test_neighbours_of_one_role_are_one_message_and_records_are_left_out() -> None:
    got = conversation()
    assert [m.role for m in got] == ["user", "assistant", "user", "assistant"]
    assert got[1].parts == (
        Text("Looking."),
        Use("c1", "bash", {"command": "make"}),
        Use("c2", "read_file", {"path": "a"}),
    )
    assert got[2].parts == (
        Output("c1", "ok"),
        Output("c2", "no such file", True),
        Text("and the docs"),
    )


def test_a_compaction_opens_the_conversation_as_its_summary() -> None:
    got = messages_of(entries(Compaction("we fixed make", None), UserMessage("next")))
    assert got == [Message("user", (Text(SUMMARY_HEAD + "we fixed make"), Text("next")))]


def test_a_tool_result_that_is_not_text_is_sent_as_json() -> None:
    (message,) = messages_of(entries(ToolResult("c", {"k": [1]})))
    assert message.parts == (Output("c", '{"k": [1]}'),)


def test_the_anthropic_wire_format() -> None:
    wire = anthropic_api.wire_messages(conversation())
    assert wire[1]["content"][1] == {
        "type": "tool_use",
        "id": "c1",
        "name": "bash",
        "input": {"command": "make"},
    }
    assert wire[2]["content"][:2] == [
        {"type": "tool_result", "tool_use_id": "c1", "content": "ok"},
        {"type": "tool_result", "tool_use_id": "c2", "content": "no such file", "is_error": True},
    ]
    assert wire[2]["content"][2] == {"type": "text", "text": "and the docs"}


def test_the_openai_wire_format_gives_each_result_a_message() -> None:
    wire = openai_api.wire_messages("be brief", conversation())
    assert [m["role"] for m in wire] == [
        "system",
        "user",
        "assistant",
        "tool",
        "tool",
        "user",
        "assistant",
    ]
    calls = wire[2]["tool_calls"]
    assert [c["id"] for c in calls] == ["c1", "c2"]
    assert json.loads(calls[0]["function"]["arguments"]) == {"command": "make"}
    assert wire[4] == {"role": "tool", "tool_call_id": "c2", "content": "[error] no such file"}


def test_a_tool_input_that_did_not_parse_is_sent_back_as_an_empty_object() -> None:
    broken = [Message("assistant", (Use("c", "bash", None, "not JSON"),))]
    assert anthropic_api.wire_messages(broken)[0]["content"][0]["input"] == {}
    assert openai_api.wire_messages("", broken)[0]["tool_calls"][0]["function"]["arguments"] == "{}"


# -- the tools ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "given", "expected"),
    [
        ("bash", {"command": "ls"}, Bash("ls")),
        ("write_file", {"path": "a", "content": "é"}, WriteFile("a", "é".encode())),
        ("edit", {"path": "a", "old": "x", "new": "y", "all": True}, EditFile("a", "x", "y", True)),
        ("rm", {}, "unknown tool 'rm': the tools are read_file, write_file, edit, bash"),
        ("bash", ["ls"], "bash: the input must be a JSON object"),
        ("bash", {"cmd": "ls"}, "bash needs a string 'command'"),
        (
            "write_file",
            {"path": "a", "content": "\udcff"},
            "write_file content is not text (a lone surrogate at 0)",
        ),
    ],
)
def test_a_tool_call_is_parsed_as_exec_parses_it(name: str, given: Any, expected: object) -> None:
    assert to_call(name, given) == expected


def test_long_output_keeps_its_head_and_tail_and_says_the_cut() -> None:
    text = "".join(f"{i}\n" for i in range(10_000))
    out = capped(text, 600)
    assert out.startswith("0\n1\n") and out.endswith("9998\n9999\n")
    assert f"the output was {len(text):,} characters, capped at 600" in out
    assert capped("short", 600) == "short"


@pytest.mark.parametrize(
    ("result", "expected"),
    [
        (CallResult(0, "bash", True, output="hi\n", exit_code=0), ("hi\n\n[exit code 0]", False)),
        (CallResult(0, "bash", True, output="", exit_code=2), ("[exit code 2]", True)),
        (CallResult(0, "write_file", True), ("done", False)),
        (
            CallResult(0, "edit", False, error="the text to replace was not found"),
            ("the text to replace was not found", True),
        ),
        (
            CallResult(0, "bash", True, output="", exit_code=0, git=(".git/HEAD",)),
            (
                "[exit code 0]\n[changed in the git repository, not covered by undo: .git/HEAD]",
                False,
            ),
        ),
    ],
)
def test_what_the_model_is_told_of_a_result(result: CallResult, expected: tuple[str, bool]) -> None:
    assert result_text(result, 1000) == expected


# -- errors and options ---------------------------------------------------------------


class APIStatusError(Exception):
    def __init__(self, status: int, body: object) -> None:
        super().__init__("Error code: ...")
        self.status_code = status
        self.body = body
        self.message = "Error code: ..."


class APIConnectionError(Exception):
    pass


def test_sdk_errors_are_one_line_that_says_what_to_do() -> None:
    refused = APIStatusError(
        429, {"type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}}
    )
    assert one_line_error("anthropic:m", refused) == (
        "anthropic:m: rate limited: wait and send again (HTTP 429: slow down)"
    )
    midway = APIStatusError(200, {"type": "overloaded_error", "message": "busy"})
    assert one_line_error("anthropic:m", midway) == "anthropic:m: the reply broke off: busy"
    try:
        raise APIConnectionError("Connection error.") from OSError("Connection refused")
    except APIConnectionError as exc:
        said = one_line_error("openai:m", exc)
    assert (
        said
        == "openai:m: cannot reach the server: Connection refused (check the base URL variable)"
    )
    assert "\n" not in one_line_error("m", APIStatusError(500, "a\nmultiline\nbody"))


def test_the_model_option(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("EARSHOT_MODEL", raising=False)
    assert parse_model(None) == tuple(DEFAULT_MODEL.split(":", 1))
    monkeypatch.setenv("EARSHOT_MODEL", "openai:llama3.1:8b")
    assert parse_model(None) == ("openai", "llama3.1:8b")  # a local model's name keeps its colon
    assert parse_model("anthropic:claude-x") == ("anthropic", "claude-x")
    for bad in ("claude", "gemini:x", "openai:", "openai: "):
        with pytest.raises(BadModel):
            parse_model(bad)


def test_allow_names_the_mutating_tools_only() -> None:
    assert parse_allow("bash, edit") == {"bash", "edit"}
    assert parse_allow(None) == frozenset()
    with pytest.raises(UnknownTool, match="not read_file"):
        parse_allow("bash,read_file")
