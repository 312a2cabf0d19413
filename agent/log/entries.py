"""The lines of a session file: header, entries and their JSON form.

Header (line 1)::

    {"type": "session", "version": 1, "id": <session id>, "root": <abs path>,
     "created": <ts>, "forkOf": {"session": <session id>, "entry": <entry id|null>}}

``forkOf`` appears only in forks. Every further line is an entry::

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
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeAlias

from earshot.agent.log.ids import EntryId, SessionId
from earshot.cas.errors import EarshotError

FORMAT_VERSION = 1
HEADER_TYPE = "session"

JSONValue: TypeAlias = "bool | int | float | str | list[JSONValue] | dict[str, JSONValue] | None"


class EntryFormatError(EarshotError):
    """A line that is JSON but not a well-formed header or entry."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def now_ts() -> str:
    """The current time in the file's timestamp format."""
    ns = time.time_ns()
    seconds, rest = divmod(ns, 1_000_000_000)
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds))
    return f"{stamp}.{rest // 1_000_000:03d}Z"


def _str(obj: dict[str, Any], key: str) -> str:
    value = obj.get(key)
    if type(value) is str:
        return value
    raise EntryFormatError(f"field {key!r} must be a string")


def _opt_id(obj: dict[str, Any], key: str) -> EntryId | None:
    value = obj.get(key)
    if value is None or isinstance(value, str):
        return EntryId(value) if value is not None else None
    raise EntryFormatError(f"field {key!r} must be an id or null")


def _int(obj: dict[str, Any], key: str) -> int:
    value = obj.get(key)
    if not isinstance(value, int) or isinstance(value, bool):
        raise EntryFormatError(f"field {key!r} must be an integer")
    return value


def _bool(obj: dict[str, Any], key: str) -> bool:
    value = obj.get(key, False)
    if not isinstance(value, bool):
        raise EntryFormatError(f"field {key!r} must be true or false")
    return value


@dataclass(frozen=True, slots=True)
class UserMessage:
    """A prompt the user sent."""

    text: str
    TYPE: ClassVar[str] = "user"

    def fields(self) -> dict[str, JSONValue]:
        return {"text": self.text}

    @classmethod
    def parse(cls, obj: dict[str, Any]) -> UserMessage:
        return cls(_str(obj, "text"))


@dataclass(frozen=True, slots=True)
class AssistantMessage:
    """Text the model said."""

    text: str
    TYPE: ClassVar[str] = "assistant"

    def fields(self) -> dict[str, JSONValue]:
        return {"text": self.text}

    @classmethod
    def parse(cls, obj: dict[str, Any]) -> AssistantMessage:
        return cls(_str(obj, "text"))


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
        return cls(_str(obj, "callId"), _str(obj, "name"), obj.get("input"))


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
            _str(obj, "callId"), obj.get("output"), _bool(obj, "isError"), _bool(obj, "interrupted")
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
        return cls(_str(obj, "summary"), _opt_id(obj, "firstKeptId"))


@dataclass(frozen=True, slots=True)
class Navigation:
    """The current leaf is now ``target`` (None: before the first entry)."""

    target: EntryId | None
    TYPE: ClassVar[str] = "navigation"

    def fields(self) -> dict[str, JSONValue]:
        return {"target": self.target}

    @classmethod
    def parse(cls, obj: dict[str, Any]) -> Navigation:
        return cls(_opt_id(obj, "target"))


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
        return cls(EntryId(_str(obj, "target")), _str(obj, "label"))


@dataclass(frozen=True, slots=True)
class BatchLink:
    """The checkpoint batch (by sequence number) the turn before this entry produced."""

    batch: int
    TYPE: ClassVar[str] = "batch"

    def fields(self) -> dict[str, JSONValue]:
        return {"batch": self.batch}

    @classmethod
    def parse(cls, obj: dict[str, Any]) -> BatchLink:
        return cls(_int(obj, "batch"))


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
        return cls(_str(obj, "tool"), obj.get("detail"))


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
        return cls(_int(obj, "offset"), _int(obj, "line"))


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
        return cls(_str(obj, "type"), data)


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


@dataclass(frozen=True, slots=True)
class ForkOrigin:
    """Where a fork came from: the source session and the entry it continues."""

    session: SessionId
    entry: EntryId | None


@dataclass(frozen=True, slots=True)
class Header:
    """Line 1 of a session file."""

    id: SessionId
    root: str
    created: str
    version: int = FORMAT_VERSION
    fork_of: ForkOrigin | None = None


def _dumps(obj: dict[str, Any]) -> bytes:
    # json escapes control characters inside strings, so a line never holds a
    # raw newline; non-ASCII stays readable.
    text = json.dumps(obj, ensure_ascii=False, separators=(",", ":")) + "\n"
    try:
        return text.encode()
    except UnicodeEncodeError:
        # Lone surrogates (undecodable bytes of a tool's output) are not UTF-8;
        # escaped as \udcxx they read back exactly.
        return (json.dumps(obj, separators=(",", ":")) + "\n").encode()


def encode_entry(entry: Entry) -> bytes:
    """The entry as one JSON line, newline included."""
    obj: dict[str, Any] = {
        "id": entry.id,
        "parentId": entry.parent_id,
        "type": entry.type,
        "ts": entry.ts,
    }
    obj.update(entry.body.fields())
    return _dumps(obj)


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


def encode_header(header: Header) -> bytes:
    """The header as one JSON line, newline included."""
    obj: dict[str, Any] = {
        "type": HEADER_TYPE,
        "version": header.version,
        "id": header.id,
        "root": header.root,
        "created": header.created,
    }
    if header.fork_of is not None:
        obj["forkOf"] = {"session": header.fork_of.session, "entry": header.fork_of.entry}
    return _dumps(obj)


def decode_header(obj: dict[str, Any]) -> Header:
    """The header from a parsed first line; ``EntryFormatError`` if it is not one."""
    if obj.get("type") != HEADER_TYPE:
        raise EntryFormatError("line 1 is not a session header")
    version = _int(obj, "version")
    if version > FORMAT_VERSION:
        raise EntryFormatError(
            f"format version {version} is newer than this earshot reads ({FORMAT_VERSION})"
        )
    fork_of = None
    raw = obj.get("forkOf")
    if raw is not None:
        if not isinstance(raw, dict):
            raise EntryFormatError("field 'forkOf' must be an object")
        fork_of = ForkOrigin(SessionId(_str(raw, "session")), _opt_id(raw, "entry"))
    return Header(
        SessionId(_str(obj, "id")), _str(obj, "root"), _str(obj, "created"), version, fork_of
    )
