"""The sessions of a root: listing them and finding one by id prefix.

Listing reads only what it shows: the header, lines up to the first prompt,
and the end of the file for the last activity, so it stays fast for long
sessions.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from earshot.agent.log.fields import EntryFormatError
from earshot.agent.log.fileio import open_session_fd
from earshot.agent.log.header import ForkOrigin, decode_header
from earshot.agent.log.ids import SessionId, is_id, resolve_prefix
from earshot.cas.errors import EarshotError
from earshot.cas.logs import get_logger

log = get_logger("earshot.agent.session")

SUFFIX = ".jsonl"
_TAIL_BLOCK = 64 * 1024


@dataclass(frozen=True, slots=True)
class SessionInfo:
    """One line of a session listing."""

    id: SessionId
    path: Path
    root: str
    created: str
    last_activity: str
    first_prompt: str | None
    fork_of: ForkOrigin | None
    #: User prompts in the file, on every branch.
    prompts: int = 0


def session_files(directory: Path) -> list[Path]:
    """The session files in ``directory`` (none if it does not exist)."""
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return []
    return [
        directory / name
        for name in names
        if name.endswith(SUFFIX) and is_id(name.removesuffix(SUFFIX))
    ]


def find_session(directory: Path, prefix: str) -> Path:
    """The session file whose id ``prefix`` starts (``NoMatchingId``/``AmbiguousId``)."""
    ids = [SessionId(p.name.removesuffix(SUFFIX)) for p in session_files(directory)]
    return directory / f"{resolve_prefix(ids, prefix, 'session')}{SUFFIX}"


def _json_object(raw: bytes) -> dict[str, Any] | None:
    try:
        obj = json.loads(raw)
    except (ValueError, RecursionError):  # RecursionError: nested too deep to be an entry
        return None
    return obj if isinstance(obj, dict) else None


def _prompts(lines: IO[bytes], count_all: bool) -> tuple[str | None, int]:
    """The first user prompt's text, and how many there are (with ``count_all``;
    else 0 or 1: the rest of a long log is not read)."""
    first: str | None = None
    count = 0
    for raw in lines:
        if b'"user"' not in raw:  # cheap filter before parsing
            continue
        obj = _json_object(raw)
        if obj is not None and obj.get("type") == "user" and isinstance(obj.get("text"), str):
            count += 1
            if first is None:
                first = obj["text"]
            if not count_all:
                break
    return first, count


def _last_ts(handle: IO[bytes], size: int) -> str | None:
    block = _TAIL_BLOCK
    while True:
        start = max(0, size - block)
        handle.seek(start)
        lines = handle.read(size - start).split(b"\n")
        lines.pop()  # unterminated (torn) or empty after the final newline
        if start > 0 and lines:
            lines.pop(0)  # may be cut (a block inside one torn line holds no whole line)
        for raw in reversed(lines):
            obj = _json_object(raw)
            if obj is not None and obj.get("type") != "session" and isinstance(obj.get("ts"), str):
                ts: str = obj["ts"]
                return ts
        if start == 0:
            return None
        block *= 4


def session_info(path: Path, count_prompts: bool = False) -> SessionInfo:
    """The listing facts of one session file (``EntryFormatError`` if it has no header).

    ``count_prompts``: read it whole to count its prompts (``earshot sessions``).
    """
    with os.fdopen(open_session_fd(path, os.O_RDONLY), "rb") as handle:
        obj = _json_object(handle.readline())
        if obj is None:
            raise EntryFormatError("line 1 is not a session header")
        header = decode_header(obj)
        first, prompts = _prompts(handle, count_prompts)
        size = os.fstat(handle.fileno()).st_size
        # A fork's copied entries are older than the fork itself.
        last = max(_last_ts(handle, size) or "", header.created)
    return SessionInfo(
        header.id, path, header.root, header.created, last, first, header.fork_of, prompts
    )


def list_sessions(directory: Path, count_prompts: bool = False) -> list[SessionInfo]:
    """The sessions in ``directory``, most recently active first.

    Files without a readable header are left out, with a warning in the log.
    """
    out: list[SessionInfo] = []
    for path in session_files(directory):
        try:
            out.append(session_info(path, count_prompts))
        except (OSError, EarshotError) as err:
            log.warning("session_unlisted", path=str(path), error=str(err))
    out.sort(key=lambda info: (info.last_activity, info.id), reverse=True)
    return out
