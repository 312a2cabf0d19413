"""One hook event, whatever agent sent it: what earshot does is decided on this.

Each agent's module (``claude``, ``codex``, ``gemini``) turns the JSON its
hooks receive on stdin into a ``HookEvent``; ``handler`` maps events onto
sessions, batches and the conversation log; the agent's module turns the
outcome back into what that agent reads on the hook's stdout.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any

from earshot.agent.core.external_calls import ExternalCall, ToolKind
from earshot.agent.hooks.commands import prompt_command


class EventKind(Enum):
    """What an event means to earshot."""

    #: The agent's session started or resumed: bind it to an earshot session.
    SESSION_START = "session_start"
    #: The person sent a prompt: a prompt entry; an open batch is closed first.
    PROMPT = "prompt"
    #: A tool is about to run.
    PRE_TOOL = "pre_tool"
    #: A tool ran (or failed, or was interrupted).
    POST_TOOL = "post_tool"
    #: Every tool call of one model response has ended: the batch closes.
    RESPONSE_END = "response_end"
    #: The agent finished answering the prompt: anything open closes.
    TURN_END = "turn_end"
    #: The agent's session ended: anything open closes.
    SESSION_END = "session_end"
    #: The agent is about to compact its context: a compaction entry.
    COMPACT = "compact"
    #: A subagent began or ended: while one runs, its calls belong to the batch
    #: of the dispatch that started it (it may outlive the dispatching call).
    SUBAGENT_START = "subagent_start"
    SUBAGENT_STOP = "subagent_stop"
    #: The person typed one of earshot's commands as the prompt: it runs, and the
    #: prompt is blocked before the model sees it (``commands``).
    COMMAND = "command"
    #: Anything else: nothing to do.
    OTHER = "other"


@dataclass(frozen=True, slots=True)
class HookEvent:
    """A hook event, read from the agent's payload."""

    agent: str
    #: The event's own name, as the agent calls it (``PreToolUse``).
    name: str
    kind: EventKind
    #: The agent's session id: one earshot session per agent session.
    session: str
    #: The directory the agent works in (its project directory when it says).
    cwd: str | None = None
    #: The tool call of a PRE_TOOL or POST_TOOL event.
    call: ExternalCall | None = None
    #: The prompt's text (PROMPT), or the agent's last message (TURN_END).
    text: str | None = None
    #: What went wrong with a tool (POST_TOOL): its error.
    error: str | None = None
    #: The tool was cut off (the person pressed Esc, a timeout).
    interrupted: bool = False
    #: SessionStart's ``source``, SessionEnd's ``reason``, PreCompact's ``trigger``.
    detail: str | None = None
    #: The agent's turn, where it says (Codex's ``turn_id``).
    turn: str | None = None
    #: The subagent a SUBAGENT_START or SUBAGENT_STOP is about (its ``agent_id``).
    subagent: str | None = None
    #: The earshot command line a COMMAND prompt asks for (``("undo", "2")``).
    command: tuple[str, ...] = ()


class BadPayload(ValueError):
    """A hook payload that is not what the agent's hook reference describes."""


def text_field(payload: dict[str, Any], name: str, *, required: bool = False) -> str | None:
    """A string field of the payload; ``BadPayload`` when required and missing."""
    value = payload.get(name)
    if isinstance(value, str) and value:
        return value
    if required:
        raise BadPayload(f"the payload has no {name!r} (a non-empty string)")
    return None


def content_key(name: str, tool_input: Any) -> str:
    """A key for a call whose agent gives it no id: its tool and input.

    The hook before a call and the hook after it see the same input, so both
    find the same key; two identical calls running at once are told apart by
    the order they began in.
    """
    text = json.dumps(tool_input, sort_keys=True, separators=(",", ":"), default=str)
    return f"{name}:{hashlib.sha256(text.encode()).hexdigest()[:16]}"


def content_digest(text: str) -> str | None:
    """The digest earshot gives a file holding ``text`` (UTF-8), in hex; None when
    the text holds a lone surrogate that stands for no byte (a ``\\ud800`` escape
    in the JSON): what the agent writes for it is not known."""
    from earshot.cas.digest import blob_digest

    try:
        data = text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return None
    return blob_digest(data).hex()


#: An agent's session id is kept as part of a store key (at most 511 bytes).
MAX_SESSION_ID = 256


def session_field(payload: dict[str, Any]) -> str:
    """The payload's ``session_id``; ``BadPayload`` when missing or too long to keep."""
    session = text_field(payload, "session_id", required=True)
    assert session is not None
    try:
        size = len(session.encode())  # strict: store keys are UTF-8
    except UnicodeEncodeError:
        raise BadPayload("the session id is not UTF-8 text") from None
    if size > MAX_SESSION_ID:
        raise BadPayload(f"the session id is longer than {MAX_SESSION_ID} bytes")
    return session


@dataclass(frozen=True, slots=True)
class Tools:
    """An agent's tools by what they may do to the tree."""

    read: Collection[str]
    #: Tools that write only the files their input names.
    write: Collection[str]
    shell: Collection[str]
    #: Tools that run a subagent.
    dispatch: Collection[str]

    def kind(self, name: str) -> ToolKind:
        for names, kind in (
            (self.read, ToolKind.READ),
            (self.write, ToolKind.WRITE),
            (self.shell, ToolKind.SHELL),
            (self.dispatch, ToolKind.DISPATCH),
        ):
            if name in names:
                return kind
        return ToolKind.UNKNOWN


def event_of(
    payload: dict[str, Any], events: Mapping[str, EventKind]
) -> tuple[str, EventKind, tuple[str, ...]]:
    """The event's name, its kind, and the earshot command a prompt asks for.

    A prompt that is one of earshot's commands is a COMMAND, not a PROMPT.
    """
    if not isinstance(payload, dict):
        raise BadPayload("the payload is not a JSON object")
    name = text_field(payload, "hook_event_name", required=True)
    assert name is not None
    kind = events.get(name, EventKind.OTHER)
    command: tuple[str, ...] = ()
    if kind is EventKind.PROMPT:
        command = prompt_command(str(payload.get("prompt", ""))) or ()
        kind = EventKind.COMMAND if command else kind
    return name, kind, command


def tool_input(payload: dict[str, Any]) -> dict[str, Any]:
    """The payload's ``tool_input``; an empty one when it is not an object."""
    raw = payload.get("tool_input")
    return raw if isinstance(raw, dict) else {}


def absolute(path: str, cwd: str | None) -> str:
    """A path the agent gave, made absolute against its working directory."""
    return path if os.path.isabs(path) or cwd is None else os.path.join(cwd, path)
