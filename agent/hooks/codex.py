"""Codex CLI's hooks: its payloads as ``HookEvent``s, and the answers it reads.

Codex sends the event names Claude Code does (SessionStart,
UserPromptSubmit, PreToolUse, PostToolUse, Stop, SessionEnd), each payload
with ``session_id``, ``turn_id``, ``transcript_path``, ``cwd`` and
``hook_event_name``. Its shell tool reaches hooks as ``Bash`` with
``tool_input.command``; ``apply_patch`` carries the patch text in
``tool_input.command``. It has no event for the end of a model response, so
a Codex batch is a turn: every call from a prompt to ``Stop``. It runs the
shell calls of one response at once (their PreToolUse hooks in any order),
and a patch that fails fires no PostToolUse. With its multi-agent tools,
``collaborationspawn_agent`` starts a subagent that SubagentStart and
SubagentStop bracket, its calls carrying ``agent_id``.
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
    content_key,
    session_field,
    text_field,
)
from earshot.agent.hooks.patch import patch_paths

AGENT = "codex"
READ_ONLY = quick.READ_ONLY[AGENT]
SHELLS = frozenset({"Bash", "shell", "exec_command", "local_shell", "unified_exec"})
PATCHES = frozenset({"apply_patch"})
#: Its multi-agent tools reach hooks with their namespace glued on.
DISPATCHES = frozenset({"collaborationspawn_agent", "spawn_agent"})

_EVENTS = {
    "SessionStart": EventKind.SESSION_START,
    "UserPromptSubmit": EventKind.PROMPT,
    "PreToolUse": EventKind.PRE_TOOL,
    "PostToolUse": EventKind.POST_TOOL,
    "Stop": EventKind.TURN_END,
    "SessionEnd": EventKind.SESSION_END,
    "PreCompact": EventKind.COMPACT,
    "SubagentStart": EventKind.SUBAGENT_START,
    "SubagentStop": EventKind.SUBAGENT_STOP,
}


def tool_kind(name: str) -> ToolKind:
    if name in READ_ONLY:
        return ToolKind.READ
    if name in PATCHES:
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
    key = text_field(payload, "tool_use_id") or content_key(name, tool_input)
    agent = text_field(payload, "agent_id")
    label = f"subagent {agent}" if agent else None
    text = tool_input.get("command")
    if not isinstance(text, str):
        text = tool_input.get("cmd") if isinstance(tool_input.get("cmd"), str) else None
    if kind is ToolKind.WRITE:
        paths = tuple(
            p if os.path.isabs(p) or cwd is None else os.path.join(cwd, p)
            for p in patch_paths(text or "")
        )
        return ExternalCall(name, kind, key, paths=paths, agent=label)
    command = text if kind is ToolKind.SHELL else None
    return ExternalCall(name, kind, key, command=command, agent=label)


def parse(payload: dict[str, Any]) -> HookEvent:
    """The event a Codex CLI hook payload stands for."""
    name = text_field(payload, "hook_event_name", required=True)
    assert name is not None
    kind = _EVENTS.get(name, EventKind.OTHER)
    command: tuple[str, ...] = ()
    if kind is EventKind.PROMPT:
        command = prompt_command(str(payload.get("prompt", ""))) or ()
        kind = EventKind.COMMAND if command else kind
    session = session_field(payload)
    cwd = text_field(payload, "cwd")
    call = _call(payload, cwd) if kind in (EventKind.PRE_TOOL, EventKind.POST_TOOL) else None
    text = None
    if kind is EventKind.PROMPT:
        text = text_field(payload, "prompt") or ""
    elif kind is EventKind.TURN_END:
        text = text_field(payload, "last_assistant_message")
    return HookEvent(
        AGENT,
        name,
        kind,
        session,
        cwd=cwd,
        call=call,
        text=text,
        detail=(
            text_field(payload, "source")
            or text_field(payload, "reason")
            or text_field(payload, "trigger")
        ),
        turn=text_field(payload, "turn_id"),
        subagent=text_field(payload, "agent_id"),
        command=command,
    )


def render(event: HookEvent, answer: Answer) -> dict[str, Any] | None:
    """What Codex reads on the hook's stdout; None: print nothing."""
    out: dict[str, Any] = {}
    if answer.block is not None:
        return {"decision": "block", "reason": answer.block}
    if answer.deny is not None and event.kind is EventKind.PRE_TOOL:
        out |= quick.refusal(AGENT, event.name, answer.deny)
    if answer.message is not None:
        out["systemMessage"] = answer.message
    return out or None
