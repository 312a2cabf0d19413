"""The entries of a session file: every line after the header, and their JSON form.

Line 1 is the header (:mod:`.header`). Every further line is an entry::

    {"id": <entry id>, "parentId": <entry id|null>, "type": <type>, "ts": <ts>, ...fields}

with the fields of its type::

    user         text                      assistant   text
    tool_call    callId, name, input       tool_result callId, output, isError?, interrupted?
    compaction   summary, firstKeptId      batch       batch (checkpoint batch number)
    permission   tool, detail              navigation  target (entry id | null)
    label        target, label             repair      offset, line (of a torn write)

``ts`` is UTC ISO 8601 with milliseconds, ``2025-01-31T12:00:00.123Z``.
Navigation, label and repair entries are not tree nodes: their ``parentId``
records the leaf when they were written. Unknown types load as
``OtherEntry`` nodes, so older readers keep working on newer files.
The field readers and the line encoder are in :mod:`.fields`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeAlias

from earshot.agent.log.fields import (
    EntryFormatError,
    dumps,
    read_bool,
    read_int,
    read_opt_id,
    read_str,
)
from earshot.agent.log.header import HEADER_TYPE
from earshot.agent.log.ids import EntryId

JSONValue: TypeAlias = "bool | int | float | str | list[JSONValue] | dict[str, JSONValue] | None"


def now_ts() -> str:
    """The current time in the file's timestamp format."""
    ns = time.time_ns()
    seconds, rest = divmod(ns, 1_000_000_000)
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds))
    return f"{stamp}.{rest // 1_000_000:03d}Z"


@dataclass(frozen=True, slots=True)
class UserMessage:
    """A prompt the user sent."""

    text: str
    TYPE: ClassVar[str] = "user"

    def fields(self) -> dict[str, JSONValue]:
        return {"text": self.text}

    @classmethod
    def parse(cls, obj: dict[str, Any]) -> UserMessage:
        return cls(read_str(obj, "text"))


@dataclass(frozen=True, slots=True)
class AssistantMessage:
    """Text the model said."""

    text: str
    TYPE: ClassVar[str] = "assistant"

    def fields(self) -> dict[str, JSONValue]:
        return {"text": self.text}

    @classmethod
    def parse(cls, obj: dict[str, Any]) -> AssistantMessage:
        return cls(read_str(obj, "text"))


@dataclass(frozen=True, slots=True)
class ToolCall:
    """The model asked to run a tool; ``call_id`` is the model's id for the call."""

    call_id: str
    name: str
    input: JSONValue = None
    TYPE: ClassVar[str] = "tool_call"

    def fields(self) -> dict[str, JSONValue]:
        return {"callId": self.call_id, "name": self.name, "input": self.input}

    @classmethod
    def parse(cls, obj: dict[str, Any]) -> ToolCall:
        return cls(read_str(obj, "callId"), read_str(obj, "name"), obj.get("input"))


@dataclass(frozen=True, slots=True)
class ToolResult:
    """What a tool returned; ``interrupted`` marks the synthetic result of a lost call."""

    call_id: str
    output: JSONValue
    is_error: bool = False
    interrupted: bool = False
    TYPE: ClassVar[str] = "tool_result"

    def fields(self) -> dict[str, JSONValue]:
        out: dict[str, JSONValue] = {"callId": self.call_id, "output": self.output}
        if self.is_error:
            out["isError"] = True
        if self.interrupted:
            out["interrupted"] = True
        return out

    @classmethod
    def parse(cls, obj: dict[str, Any]) -> ToolResult:
        return cls(
            read_str(obj, "callId"),
            obj.get("output"),
            read_bool(obj, "isError"),
            read_bool(obj, "interrupted"),
        )


@dataclass(frozen=True, slots=True)
class Compaction:
    """A summary standing for every entry on the path before ``first_kept_id``.

    ``first_kept_id`` is an ancestor of the compaction entry (the oldest entry
    the model still sees verbatim), or None when the summary stands for all of it.
    """

    summary: str
    first_kept_id: EntryId | None
    TYPE: ClassVar[str] = "compaction"

    def fields(self) -> dict[str, JSONValue]:
        return {"summary": self.summary, "firstKeptId": self.first_kept_id}

    @classmethod
    def parse(cls, obj: dict[str, Any]) -> Compaction:
        return cls(read_str(obj, "summary"), read_opt_id(obj, "firstKeptId"))


@dataclass(frozen=True, slots=True)
class Navigation:
    """The current leaf is now ``target`` (None: before the first entry)."""

    target: EntryId | None
    TYPE: ClassVar[str] = "navigation"

    def fields(self) -> dict[str, JSONValue]:
        return {"target": self.target}

    @classmethod
    def parse(cls, obj: dict[str, Any]) -> Navigation:
        return cls(read_opt_id(obj, "target"))


@dataclass(frozen=True, slots=True)
class Label:
    """A name for an entry; the latest label of an entry wins, "" removes it."""

    target: EntryId
    label: str
    TYPE: ClassVar[str] = "label"

    def fields(self) -> dict[str, JSONValue]:
        return {"target": self.target, "label": self.label}

    @classmethod
    def parse(cls, obj: dict[str, Any]) -> Label:
        return cls(EntryId(read_str(obj, "target")), read_str(obj, "label"))


@dataclass(frozen=True, slots=True)
class BatchLink:
    """The checkpoint batch (by sequence number) the turn before this entry produced."""

    batch: int
    TYPE: ClassVar[str] = "batch"

    def fields(self) -> dict[str, JSONValue]:
        return {"batch": self.batch}

    @classmethod
    def parse(cls, obj: dict[str, Any]) -> BatchLink:
        return cls(read_int(obj, "batch"))


@dataclass(frozen=True, slots=True)
class Permission:
    """A permission granted during the session: a record only, never restored."""

    tool: str
    detail: JSONValue = None
    TYPE: ClassVar[str] = "permission"

    def fields(self) -> dict[str, JSONValue]:
        return {"tool": self.tool, "detail": self.detail}

    @classmethod
    def parse(cls, obj: dict[str, Any]) -> Permission:
        return cls(read_str(obj, "tool"), obj.get("detail"))


@dataclass(frozen=True, slots=True)
class Repair:
    """The bytes from ``offset`` (line ``line``) up to this entry are a torn write to skip."""

    offset: int
    line: int
    TYPE: ClassVar[str] = "repair"

    def fields(self) -> dict[str, JSONValue]:
        return {"offset": self.offset, "line": self.line}

    @classmethod
    def parse(cls, obj: dict[str, Any]) -> Repair:
        return cls(read_int(obj, "offset"), read_int(obj, "line"))


RESERVED_FIELDS = frozenset({"id", "parentId", "type", "ts"})


@dataclass(frozen=True, slots=True)
class OtherEntry:
    """An entry of a type this version does not know; kept and written back as is."""

    type_name: str
    data: dict[str, JSONValue] = field(default_factory=dict)
    TYPE: ClassVar[str] = "other"

    def fields(self) -> dict[str, JSONValue]:
        return dict(self.data)

    @classmethod
    def parse(cls, obj: dict[str, Any]) -> OtherEntry:
        data = {k: v for k, v in obj.items() if k not in RESERVED_FIELDS}
        return cls(read_str(obj, "type"), data)


Body: TypeAlias = (
    UserMessage
    | AssistantMessage
    | ToolCall
    | ToolResult
    | Compaction
    | Navigation
    | Label
    | BatchLink
    | Permission
    | Repair
    | OtherEntry
)

# Entries that are not nodes of the conversation tree: they never become the
# leaf (a navigation moves it elsewhere) and have no children.
META_TYPES: tuple[type[Body], ...] = (Navigation, Label, Repair)
# Entries the model sees, besides compaction summaries.
MESSAGE_TYPES: tuple[type[Body], ...] = (UserMessage, AssistantMessage, ToolCall, ToolResult)

_PARSERS: dict[str, type[Body]] = {
    cls.TYPE: cls
    for cls in (
        UserMessage,
        AssistantMessage,
        ToolCall,
        ToolResult,
        Compaction,
        Navigation,
        Label,
        BatchLink,
        Permission,
        Repair,
    )
}


# Types with a class of their own; an ``OtherEntry`` may not claim one.
KNOWN_TYPES = frozenset(_PARSERS) | {HEADER_TYPE}


@dataclass(frozen=True, slots=True)
class Entry:
    """One line of the log after the header."""

    id: EntryId
    parent_id: EntryId | None
    ts: str
    body: Body

    @property
    def type(self) -> str:
        body = self.body
        return body.type_name if isinstance(body, OtherEntry) else body.TYPE

    @property
    def is_node(self) -> bool:
        return not isinstance(self.body, META_TYPES)


def encode_entry(entry: Entry) -> bytes:
    """The entry as one JSON line, newline included."""
    obj: dict[str, Any] = {
        "id": entry.id,
        "parentId": entry.parent_id,
        "type": entry.type,
        "ts": entry.ts,
    }
    obj.update(entry.body.fields())
    return dumps(obj)


def decode_entry(obj: dict[str, Any]) -> Entry:
    """An entry from a parsed line; ``EntryFormatError`` if it is not one."""
    # Plain type() tests and no NewType calls: this runs once per line on load.
    ident: EntryId = obj.get("id", "")
    if type(ident) is not str or not ident:
        raise EntryFormatError("an entry needs a string 'id'")
    type_name = obj.get("type")
    if type(type_name) is not str:
        raise EntryFormatError("an entry needs a string 'type'")
    parent: EntryId | None = obj.get("parentId")
    if parent is not None and type(parent) is not str:
        raise EntryFormatError("field 'parentId' must be an id or null")
    ts = obj.get("ts")
    if type(ts) is not str:
        raise EntryFormatError("field 'ts' must be a string")
    parser = _PARSERS.get(type_name)
    if parser is None:
        if type_name == HEADER_TYPE:
            raise EntryFormatError("a second session header")
        parser = OtherEntry
    return Entry(ident, parent, ts, parser.parse(obj))
