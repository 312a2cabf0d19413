"""Line 1 of a session file: the header, and its JSON form.

::

    {"type": "session", "version": 1, "id": <session id>, "root": <abs path>,
     "created": <ts>, "forkOf": {"session": <session id>, "entry": <entry id|null>}}

``forkOf`` appears only in forks; ``ts`` is the timestamp format of
:mod:`.entries`, which holds every further line.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from earshot.agent.log.fields import EntryFormatError, dumps, read_int, read_opt_id, read_str
from earshot.agent.log.ids import EntryId, SessionId

FORMAT_VERSION = 1
HEADER_TYPE = "session"


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
    return dumps(obj)


def decode_header(obj: dict[str, Any]) -> Header:
    """The header from a parsed first line; ``EntryFormatError`` if it is not one."""
    if obj.get("type") != HEADER_TYPE:
        raise EntryFormatError("line 1 is not a session header")
    version = read_int(obj, "version")
    if version > FORMAT_VERSION:
        raise EntryFormatError(
            f"format version {version} is newer than this earshot reads ({FORMAT_VERSION})"
        )
    fork_of = None
    raw = obj.get("forkOf")
    if raw is not None:
        if not isinstance(raw, dict):
            raise EntryFormatError("field 'forkOf' must be an object")
        fork_of = ForkOrigin(SessionId(read_str(raw, "session")), read_opt_id(raw, "entry"))
    return Header(
        SessionId(read_str(obj, "id")),
        read_str(obj, "root"),
        read_str(obj, "created"),
        version,
        fork_of,
    )
