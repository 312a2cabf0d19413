"""Gemini CLI's hooks: its payloads as ``HookEvent``s, and the answers it reads.

Gemini's events are its own: BeforeAgent (a prompt), BeforeModel and
AfterModel around each model call, BeforeTool and AfterTool around each
tool call, AfterAgent (the turn's end), SessionStart and SessionEnd. Every
payload has ``session_id``, ``transcript_path``, ``cwd``,
``hook_event_name`` and ``timestamp``; tool events ``tool_name`` and
``tool_input`` (AfterTool adds ``tool_response``), but no call id, so a
call's two events are matched by its tool and input. A model call begins
only once the tools of the previous response are done: BeforeModel ends
that response's batch. PreCompress fires before every model call, whether
or not the context is compacted, so it is not a compaction. ``invoke_agent``
runs a subagent within the call, whose calls (and model calls) come between
its BeforeTool and AfterTool with nothing telling them apart: one unit.
"""

from __future__ import annotations

import os
from typing import Any

from earshot.agent.core.external_calls import ExternalCall, ToolKind
from earshot.agent.hooks import answer, quick
from earshot.agent.hooks.events import (
    EventKind,
    HookEvent,
    Tools,
    absolute,
    content_digest,
    content_key,
    event_of,
    session_field,
    text_field,
    tool_input,
)

AGENT = "gemini"
TOOLS = Tools(
    read=quick.READ_ONLY[AGENT],
    write=frozenset({"write_file", "replace", "edit", "smart_edit"}),
    shell=frozenset({"run_shell_command"}),
    #: Runs a subagent to its end inside the call: its calls come between the two events.
    dispatch=frozenset({"invoke_agent"}),
)

_EVENTS = {
    "SessionStart": EventKind.SESSION_START,
    "BeforeAgent": EventKind.PROMPT,
    "BeforeTool": EventKind.PRE_TOOL,
    "AfterTool": EventKind.POST_TOOL,
    "BeforeModel": EventKind.RESPONSE_END,
    "AfterAgent": EventKind.TURN_END,
    "SessionEnd": EventKind.SESSION_END,
}


def _call(payload: dict[str, Any], cwd: str | None) -> ExternalCall:
    name = text_field(payload, "tool_name", required=True)
    assert name is not None
    given = tool_input(payload)
    kind = TOOLS.kind(name)
    key = content_key(name, given)
    if kind is ToolKind.WRITE:
        path = given.get("file_path")
        paths: tuple[str, ...] = ()
        if isinstance(path, str) and path:
            paths = (absolute(path, cwd),)
        text = given.get("content")
        whole = name == "write_file" and bool(paths) and isinstance(text, str)
        digest = content_digest(str(text)) if whole else None
        content = (paths[0], digest) if digest is not None else None
        return ExternalCall(name, kind, key, paths=paths, content=content)
    command = given.get("command")
    shell = kind is ToolKind.SHELL and isinstance(command, str)
    return ExternalCall(name, kind, key, command=command if shell else None)


def parse(payload: dict[str, Any]) -> HookEvent:
    """The event a Gemini CLI hook payload stands for."""
    name, kind, command = event_of(payload, _EVENTS)
    session = session_field(payload)
    cwd = os.environ.get("GEMINI_PROJECT_DIR") or text_field(payload, "cwd")
    call = _call(payload, cwd) if kind in (EventKind.PRE_TOOL, EventKind.POST_TOOL) else None
    text = None
    if kind is EventKind.PROMPT:
        text = text_field(payload, "prompt") or ""
    elif kind is EventKind.TURN_END:
        text = text_field(payload, "prompt_response")
    return HookEvent(
        AGENT,
        name,
        kind,
        session,
        cwd=cwd,
        call=call,
        text=text,
        detail=text_field(payload, "source") or text_field(payload, "reason"),
        command=command,
    )


def render(event: HookEvent, outcome: answer.Answer) -> dict[str, Any] | None:
    """What Gemini CLI reads on the hook's stdout; None: print nothing."""
    return answer.render(AGENT, event, outcome)
