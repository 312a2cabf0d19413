"""What a model is sent of a session: its log's context, as provider-neutral messages.

The conversation is the session's JSONL log, nothing else: each request is
built from ``Session.context()`` (the current path, the latest compaction
applied). Entries become messages: a user entry and a tool result speak for
the user, an assistant entry and a tool call for the assistant; neighbours
of one role are one message, as both wire protocols want. A compaction's
summary opens the conversation as a user message.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from earshot.agent.log.entries import (
    AssistantMessage,
    Compaction,
    Entry,
    JSONValue,
    ToolCall,
    ToolResult,
    UserMessage,
)

Role = Literal["user", "assistant"]

#: How a compaction's summary is put to the model.
SUMMARY_HEAD = "[A summary of the conversation so far, which was compacted]\n\n"


@dataclass(frozen=True, slots=True)
class Text:
    text: str


@dataclass(frozen=True, slots=True)
class Use:
    """A tool call of the model: its id, the tool, the input it gave.

    ``bad`` says why the input could not be read (not JSON); ``input`` is
    then None.
    """

    id: str
    name: str
    input: JSONValue
    bad: str | None = None


@dataclass(frozen=True, slots=True)
class Output:
    """A tool call's result, as the model is told it."""

    id: str
    text: str
    is_error: bool = False


Part = Text | Use | Output


@dataclass(frozen=True, slots=True)
class Message:
    role: Role
    parts: tuple[Part, ...]


def _as_text(value: object) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _part(entry: Entry) -> tuple[Role, Part] | None:
    body = entry.body
    if isinstance(body, UserMessage):
        return "user", Text(body.text)
    if isinstance(body, AssistantMessage):
        return "assistant", Text(body.text)
    if isinstance(body, ToolCall):
        return "assistant", Use(body.call_id, body.name, body.input)
    if isinstance(body, ToolResult):
        return "user", Output(body.call_id, _as_text(body.output), body.is_error)
    if isinstance(body, Compaction):
        return "user", Text(SUMMARY_HEAD + body.summary)
    return None


def messages_of(context: Iterable[Entry]) -> list[Message]:
    """The messages a request carries for ``context`` (a log's ``context()``)."""
    out: list[Message] = []
    for entry in context:
        found = _part(entry)
        if found is None:
            continue
        role, part = found
        if isinstance(part, Text) and not part.text:
            continue
        if out and out[-1].role == role:
            out[-1] = Message(role, (*out[-1].parts, part))
        else:
            out.append(Message(role, (part,)))
    return out
