"""Splitting session file bytes into records, finding torn writes.

A line counts only once its newline is on disk: every line is written with
one ``os.write`` of the whole line, so a crash leaves at worst a fragment with
no newline at the end of the file. Such a tail (and any invalid lines right
before end of file) is *torn*: ignored, and acknowledged by the next append,
which starts on a fresh line and writes a ``repair`` entry naming the torn
bytes' offset. An invalid line anywhere else, not acknowledged that way, is
corruption.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Record:
    """A line that parsed as a JSON object."""

    line: int
    offset: int
    end: int
    obj: dict[str, Any]


@dataclass(frozen=True, slots=True)
class BadLine:
    """A line that is not a JSON object."""

    line: int
    offset: int
    end: int


@dataclass(frozen=True, slots=True)
class TornTail:
    """Garbage at the end of the file, from ``offset`` (line ``line``) to end of file."""

    line: int
    offset: int
    size: int
    lines: int
    terminated: bool


@dataclass(frozen=True, slots=True)
class Scan:
    """The outcome of scanning bytes that start at a line boundary."""

    records: list[Record]
    corrupt: list[BadLine]
    torn: TornTail | None
    # Where the next scan resumes: the start of the torn tail, else end of data.
    next_offset: int
    next_line: int


# The decoder's C scanner, called directly: json.loads adds Python-level
# work per call (encoding detection, whitespace matching) that doubled the
# load time of a long session.
_scan_once: Callable[[str, int], tuple[Any, int]] = json.JSONDecoder().scan_once  # type: ignore[attr-defined]


def _parse_line(raw: bytes) -> dict[str, Any] | None:
    """The JSON object on one line, or None if the line is not one."""
    try:
        text = raw.decode()
        obj, stop = _scan_once(text, 0)
    except (ValueError, StopIteration, RecursionError):
        # UnicodeDecodeError is a ValueError; RecursionError: a line nested
        # too deep to be an entry (100,000 brackets) is not one.
        return None
    if stop != len(text) and text[stop:].strip():
        return None
    return obj if type(obj) is dict else None


def _acked_from(obj: dict[str, Any], pending: list[BadLine]) -> int:
    """How many of ``pending`` come before the bad lines ``obj`` acknowledges (all: none)."""
    if obj.get("type") == "repair":
        offset = obj.get("offset")
        for index, bad in enumerate(pending):
            if bad.offset == offset:
                return index
    return len(pending)


def scan(data: bytes, offset: int = 0, line: int = 1) -> Scan:
    """Records, corrupt lines and the torn tail of ``data`` read at ``offset``."""
    records: list[Record] = []
    corrupt: list[BadLine] = []
    pending: list[BadLine] = []  # a run of bad lines, waiting for an acknowledgement
    parts = data.split(b"\n")
    tail = parts.pop()  # b"" when data ends with a newline
    pos = offset
    lineno = line
    for part in parts:
        end = pos + len(part) + 1
        obj = _parse_line(part)
        if obj is not None:
            if pending:
                # A repair entry acknowledges the run of bad lines from its offset on.
                acked = _acked_from(obj, pending)
                corrupt.extend(pending[:acked])
                pending = []
            records.append(Record(lineno, pos, end, obj))
        else:
            pending.append(BadLine(lineno, pos, end))
        pos = end
        lineno += 1
    torn = None
    if pending or tail:
        start = pending[0] if pending else None
        torn_offset = start.offset if start else pos
        torn_line = start.line if start else lineno
        torn = TornTail(
            line=torn_line,
            offset=torn_offset,
            size=offset + len(data) - torn_offset,
            lines=len(pending) + (1 if tail else 0),
            terminated=not tail,
        )
        return Scan(records, corrupt, torn, torn_offset, torn_line)
    return Scan(records, corrupt, None, pos, lineno)
