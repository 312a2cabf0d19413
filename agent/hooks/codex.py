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

from typing import Any

from earshot.agent.core.external_calls import ExternalCall, ToolKind
from earshot.agent.hooks import answer, quick
from earshot.agent.hooks.events import (
    EventKind,
    HookEvent,
    Tools,
    absolute,
    content_key,
    event_of,
    session_field,
    text_field,
    tool_input,
)
from earshot.agent.hooks.patch import patch_paths

AGENT = "codex"
TOOLS = Tools(
    read=quick.READ_ONLY[AGENT],
    write=frozenset({"apply_patch"}),
    shell=frozenset({"Bash", "shell", "exec_command", "local_shell", "unified_exec"}),
    #: Its multi-agent tools reach hooks with their namespace glued on.
    dispatch=frozenset({"collaborationspawn_agent", "spawn_agent"}),
)

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


def _call(payload: dict[str, Any], cwd: str | None) -> ExternalCall:
    name = text_field(payload, "tool_name", required=True)
    assert name is not None
    given = tool_input(payload)
    kind = TOOLS.kind(name)
    key = text_field(payload, "tool_use_id") or content_key(name, given)
    agent = text_field(payload, "agent_id")
    label = f"subagent {agent}" if agent else None
    text = given.get("command")
    if not isinstance(text, str):
        text = given.get("cmd") if isinstance(given.get("cmd"), str) else None
    if kind is ToolKind.WRITE:
        paths = tuple(absolute(p, cwd) for p in patch_paths(text or ""))
        return ExternalCall(name, kind, key, paths=paths, agent=label)
    command = text if kind is ToolKind.SHELL else None
    return ExternalCall(name, kind, key, command=command, agent=label)


def parse(payload: dict[str, Any]) -> HookEvent:
    """The event a Codex CLI hook payload stands for."""
    name, kind, command = event_of(payload, _EVENTS)
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


def render(event: HookEvent, outcome: answer.Answer) -> dict[str, Any] | None:
    """What Codex reads on the hook's stdout; None: print nothing."""
    return answer.render(AGENT, event, outcome)
