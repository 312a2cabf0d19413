"""The agents' hook payloads fed damage: each agent's ``parse`` returns an event or
raises ``BadPayload``, whatever JSON it is given; so do the prompt's command
line and a patch's paths, read from the payload's text.
"""

from __future__ import annotations

import contextlib
import json
from typing import Any

import pytest
from fuzz import examples, json_values, mutated_doc
from hypothesis import given
from hypothesis import strategies as st

from earshot.agent.hooks import claude, codex, gemini
from earshot.agent.hooks.commands import prompt_command
from earshot.agent.hooks.events import BadPayload, EventKind, HookEvent
from earshot.agent.hooks.patch import patch_paths
from earshot.agent.hooks.quick import HANDLED

AGENTS = {"claude": claude, "codex": codex, "gemini": gemini}
#: Text as JSON carries it: lone surrogates ("\ud800") included.
any_text = st.text(st.characters(codec=None, exclude_categories=()), max_size=12)
TOOLS = ["Bash", "Write", "Edit", "apply_patch", "write_file", "run_shell_command", "Task", "x"]
tool_inputs = st.fixed_dictionaries(
    {},
    optional={
        "command": any_text | st.sampled_from(["earshot undo", "*** Add File: a\n+x"]),
        "cmd": any_text,
        "file_path": any_text,
        "notebook_path": any_text,
        "content": any_text,
        "run_in_background": st.booleans(),
    },
)


@st.composite
def payloads(draw: st.DrawFn, agent: str) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "session_id": draw(any_text | st.just("a" * 300)),
        "hook_event_name": draw(st.sampled_from(sorted(HANDLED[agent])) | any_text),
        "cwd": draw(any_text | st.just("/work")),
        "transcript_path": draw(any_text),
    }
    more = {
        "tool_name": st.sampled_from(TOOLS) | any_text,
        "tool_input": tool_inputs,
        "tool_use_id": any_text,
        "tool_response": json_values,
        "prompt": any_text | st.sampled_from(["earshot undo 2", "/earshot log '", "earshot"]),
        "agent_id": any_text,
        "turn_id": any_text,
        "is_interrupt": json_values,
        "error": any_text,
        "source": any_text,
    }
    for name, values in more.items():
        if draw(st.booleans()):
            doc[name] = draw(values)
    return doc


def events(agent: str) -> st.SearchStrategy[Any]:
    return payloads(agent) | mutated_doc(payloads(agent)) | json_values


@pytest.mark.parametrize("agent", sorted(AGENTS))
def test_every_agent_reads_its_own_event(agent: str) -> None:
    # The control: a sound payload reads as the event it names.
    payload = {"session_id": "s", "hook_event_name": "SessionStart", "cwd": "/w"}
    assert AGENTS[agent].parse(payload).kind is EventKind.SESSION_START


def read(agent: str, payload: Any) -> None:
    with contextlib.suppress(BadPayload):
        event = AGENTS[agent].parse(payload)
        assert isinstance(event, HookEvent)
        # What the handler makes of the event: store keys, records in JSON.
        event.session.encode()
        json.dumps([event.text, event.cwd, event.call and event.call.paths]).encode()


TRICKY: list[Any] = [
    [],
    "x",
    {"session_id": "\ud800", "hook_event_name": "SessionStart"},
    {"session_id": "\udcff", "hook_event_name": "SessionStart"},
    {
        "session_id": "s",
        "hook_event_name": "PreToolUse",
        "tool_name": "Write",
        "tool_input": {"file_path": "/a", "content": "\ud800"},
    },
    {
        "session_id": "s",
        "hook_event_name": "BeforeTool",
        "tool_name": "write_file",
        "tool_input": {"file_path": "/a", "content": "\ud800"},
    },
    {
        "session_id": "s",
        "hook_event_name": "PreToolUse",
        "tool_name": "Bash",
        "tool_input": {"command": [[[[]]]]},
    },
]


@pytest.mark.parametrize("agent", sorted(AGENTS))
@pytest.mark.parametrize("payload", TRICKY, ids=range(len(TRICKY)))
def test_a_payload_found_bad_once_is_an_event_or_a_bad_payload(agent: str, payload: Any) -> None:
    read(agent, payload)


@pytest.mark.parametrize("agent", sorted(AGENTS))
@examples(2)
@given(data=st.data())
def test_any_payload_is_an_event_or_a_bad_payload(agent: str, data: st.DataObject) -> None:
    read(agent, data.draw(events(agent)))


@examples(4)
@given(any_text | st.sampled_from(["earshot undo 'a", "/earshot diff \\", "earshot log\n"]))
def test_a_prompt_is_a_command_line_or_none(text: str) -> None:
    words = prompt_command(text)
    assert words is None or (words and all(isinstance(w, str) for w in words))


@examples(4)
@given(st.lists(any_text | st.sampled_from(["*** Add File: ", "*** Move to: x\r"]), max_size=6))
def test_a_patch_names_its_paths_once_each(patch_lines: list[str]) -> None:
    paths = patch_paths("\n".join(patch_lines))
    assert len(set(paths)) == len(paths) and all(p == p.strip() and p for p in paths)
