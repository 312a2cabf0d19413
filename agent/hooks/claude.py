"""Claude Code's hooks: its payloads as ``HookEvent``s, and the answers it reads.

Every payload has ``session_id``, ``transcript_path``, ``cwd`` and
``hook_event_name``. Tool events carry ``tool_name``, ``tool_input`` and
``tool_use_id``; PostToolUse ``tool_response``, PostToolUseFailure ``error``
and ``is_interrupt``. PostToolBatch ends a model response, Stop a turn.
A subagent's tool calls come with ``agent_id``. A hook answers with JSON on
stdout: ``systemMessage`` is shown to the person; a PreToolUse hook denies
the call with ``hookSpecificOutput.permissionDecision``, its reason shown to
the model. Plain text on stdout would be added to the model's context for
SessionStart and UserPromptSubmit, so earshot prints JSON or nothing.
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

AGENT = "claude"

#: Tools that write only the file their input names, and the field naming it.
WRITES = {
    "Write": "file_path",
    "Edit": "file_path",
    "MultiEdit": "file_path",
    "NotebookEdit": "notebook_path",
}
TOOLS = Tools(
    read=quick.READ_ONLY[AGENT],
    write=WRITES,
    shell=frozenset({"Bash"}),
    dispatch=frozenset({"Task", "Agent"}),
)

_EVENTS = {
    "SessionStart": EventKind.SESSION_START,
    "UserPromptSubmit": EventKind.PROMPT,
    "PreToolUse": EventKind.PRE_TOOL,
    "PostToolUse": EventKind.POST_TOOL,
    "PostToolUseFailure": EventKind.POST_TOOL,
    "PostToolBatch": EventKind.RESPONSE_END,
    "Stop": EventKind.TURN_END,
    "StopFailure": EventKind.TURN_END,
    "SessionEnd": EventKind.SESSION_END,
    "PreCompact": EventKind.COMPACT,
    "SubagentStart": EventKind.SUBAGENT_START,
    "SubagentStop": EventKind.SUBAGENT_STOP,
}
#: What Claude Code submits as a prompt when a background task ends: not the person's.
_NOTIFICATION = "<task-notification>"


def _call(payload: dict[str, Any], cwd: str | None) -> ExternalCall:
    name = text_field(payload, "tool_name", required=True)
    assert name is not None
    given = tool_input(payload)
    kind = TOOLS.kind(name)
    key = text_field(payload, "tool_use_id") or content_key(name, given)
    command = given.get("command") if kind is ToolKind.SHELL else None
    field = WRITES.get(name)
    paths: tuple[str, ...] = ()
    if field is not None and isinstance(given.get(field), str):
        paths = (absolute(given[field], cwd),)
    agent = text_field(payload, "agent_id")
    content = given.get("content")
    whole = name == "Write" and bool(paths) and isinstance(content, str)
    digest = content_digest(str(content)) if whole else None
    return ExternalCall(
        name,
        kind,
        key,
        command=command if isinstance(command, str) else None,
        paths=paths,
        agent=f"subagent {agent}" if agent else None,
        content=(paths[0], digest) if digest is not None else None,
        background=kind is ToolKind.SHELL and given.get("run_in_background") is True,
    )


def parse(payload: dict[str, Any]) -> HookEvent:
    """The event a Claude Code hook payload stands for."""
    name, kind, command = event_of(payload, _EVENTS)
    if kind is EventKind.PROMPT and str(payload.get("prompt", "")).startswith(_NOTIFICATION):
        kind = EventKind.OTHER
    session = session_field(payload)
    cwd = os.environ.get("CLAUDE_PROJECT_DIR") or text_field(payload, "cwd")
    call = (
        _call(payload, text_field(payload, "cwd"))
        if kind in (EventKind.PRE_TOOL, EventKind.POST_TOOL)
        else None
    )
    text = None
    if kind is EventKind.PROMPT:
        text = text_field(payload, "prompt") or ""
    elif kind is EventKind.TURN_END:
        text = text_field(payload, "last_assistant_message")
    error = text_field(payload, "error") if name == "PostToolUseFailure" else None
    detail = (
        text_field(payload, "source")
        or text_field(payload, "reason")
        or text_field(payload, "trigger")
    )
    return HookEvent(
        AGENT,
        name,
        kind,
        session,
        cwd=cwd,
        call=call,
        text=text,
        error=error or (f"{name}" if name == "PostToolUseFailure" else None),
        interrupted=bool(payload.get("is_interrupt")),
        detail=detail,
        subagent=text_field(payload, "agent_id"),
        command=command,
    )


def render(event: HookEvent, outcome: answer.Answer) -> dict[str, Any] | None:
    """What Claude Code reads on the hook's stdout; None: print nothing."""
    return answer.render(AGENT, event, outcome)
