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
from earshot.agent.hooks import quick
from earshot.agent.hooks.answer import Answer
from earshot.agent.hooks.commands import prompt_command
from earshot.agent.hooks.events import (
    EventKind,
    HookEvent,
    content_digest,
    content_key,
    session_field,
    text_field,
)

AGENT = "gemini"
READ_ONLY = quick.READ_ONLY[AGENT]
SHELLS = frozenset({"run_shell_command"})
#: Tools that write only the file their input names.
WRITES = frozenset({"write_file", "replace", "edit", "smart_edit"})
#: Runs a subagent to its end inside the call: its calls come between the two events.
DISPATCHES = frozenset({"invoke_agent"})

_EVENTS = {
    "SessionStart": EventKind.SESSION_START,
    "BeforeAgent": EventKind.PROMPT,
    "BeforeTool": EventKind.PRE_TOOL,
    "AfterTool": EventKind.POST_TOOL,
    "BeforeModel": EventKind.RESPONSE_END,
    "AfterAgent": EventKind.TURN_END,
    "SessionEnd": EventKind.SESSION_END,
}


def tool_kind(name: str) -> ToolKind:
    if name in READ_ONLY:
        return ToolKind.READ
    if name in WRITES:
        return ToolKind.WRITE
    if name in SHELLS:
        return ToolKind.SHELL
    if name in DISPATCHES:
        return ToolKind.DISPATCH
    return ToolKind.UNKNOWN


def _call(payload: dict[str, Any], cwd: str | None) -> ExternalCall:
    name = text_field(payload, "tool_name", required=True)
    assert name is not None
    raw = payload.get("tool_input")
    tool_input = raw if isinstance(raw, dict) else {}
    kind = tool_kind(name)
    key = content_key(name, tool_input)
    if kind is ToolKind.WRITE:
        path = tool_input.get("file_path")
        paths: tuple[str, ...] = ()
        if isinstance(path, str) and path:
            paths = (path if os.path.isabs(path) or cwd is None else os.path.join(cwd, path),)
        text = tool_input.get("content")
        whole = name == "write_file" and bool(paths) and isinstance(text, str)
        content = (paths[0], content_digest(str(text))) if whole else None
        return ExternalCall(name, kind, key, paths=paths, content=content)
    command = tool_input.get("command")
    shell = kind is ToolKind.SHELL and isinstance(command, str)
    return ExternalCall(name, kind, key, command=command if shell else None)


def parse(payload: dict[str, Any]) -> HookEvent:
    """The event a Gemini CLI hook payload stands for."""
    name = text_field(payload, "hook_event_name", required=True)
    assert name is not None
    kind = _EVENTS.get(name, EventKind.OTHER)
    command: tuple[str, ...] = ()
    if kind is EventKind.PROMPT:
        command = prompt_command(str(payload.get("prompt", ""))) or ()
        kind = EventKind.COMMAND if command else kind
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


def render(event: HookEvent, answer: Answer) -> dict[str, Any] | None:
    """What Gemini CLI reads on the hook's stdout; None: print nothing."""
    out: dict[str, Any] = {}
    if answer.block is not None:
        # Under -p Gemini prints the systemMessage of a blocked prompt, not its reason.
        return {"decision": "deny", "reason": answer.block, "systemMessage": answer.block}
    if answer.deny is not None and event.kind is EventKind.PRE_TOOL:
        out |= quick.refusal(AGENT, event.name, answer.deny)
    if answer.message is not None:
        out["systemMessage"] = answer.message
    return out or None
