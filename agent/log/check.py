"""Checking a session file, and repairing what can be repaired safely.

``check`` reads the whole file without stopping at the first problem.
``repair`` fixes only what it can fix without rewriting history: it truncates
a torn tail and appends "interrupted" results for unanswered tool calls,
after copying the original to ``<file>.bak-<timestamp>``. Everything else
(corrupt lines in the middle, broken references) is reported for a person.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from earshot.agent.log.entries import (
    Compaction,
    Entry,
    ToolCall,
    decode_entry,
    now_ts,
)
from earshot.agent.log.fields import EntryFormatError
from earshot.agent.log.fileio import SessionCorrupt, gc_paused, open_session_fd, pread_all
from earshot.agent.log.header import decode_header
from earshot.agent.log.ids import EntryId
from earshot.agent.log.scan import TornTail, scan
from earshot.agent.log.session import Session
from earshot.agent.log.tree import SessionTree, TreeError, context_of, open_tool_calls


@dataclass(frozen=True, slots=True)
class Problem:
    """One thing wrong with a session file; ``line`` is 1-based, None for the whole file."""

    kind: str
    line: int | None
    message: str
    repairable: bool


@dataclass(frozen=True, slots=True)
class RepairResult:
    """What ``repair`` did, and what it could not fix."""

    backup: Path | None
    truncated_bytes: int
    appended: tuple[Entry, ...]
    remaining: tuple[Problem, ...]


def _problems(data: bytes) -> tuple[list[Problem], TornTail | None]:
    result = scan(data)
    problems = [Problem("bad_line", bad.line, "not a JSON object", False) for bad in result.corrupt]
    torn = result.torn
    if torn is not None:
        problems.append(
            Problem("torn_tail", torn.line, f"{torn.size} bytes of an unfinished write", True)
        )
    records = result.records
    if records and records[0].line == 1:
        try:
            decode_header(records[0].obj)
        except EntryFormatError as err:
            problems.append(Problem("header", 1, err.reason, False))
        records = records[1:]
    else:
        problems.append(Problem("header", 1, "line 1 is not a session header", False))

    decoded: list[tuple[int, Entry]] = []
    for record in records:
        try:
            decoded.append((record.line, decode_entry(record.obj)))
        except EntryFormatError as err:
            problems.append(Problem("bad_entry", record.line, err.reason, False))

    # Reference checks on raw ids first, so each problem is named once.
    defined: dict[EntryId, int] = {}
    skip: set[int] = set()
    for line, entry in decoded:
        if entry.id in defined:
            first = defined[entry.id]
            problems.append(
                Problem("duplicate_id", line, f"id {entry.id} is already on line {first}", False)
            )
            skip.add(line)
        else:
            defined[entry.id] = line
    parent_of = {e.id: e.parent_id for line, e in decoded if line not in skip}
    for line, entry in decoded:
        parent = entry.parent_id
        if line in skip or parent is None:
            continue
        if parent not in defined:
            problems.append(Problem("missing_parent", line, f"parent {parent} is nowhere", False))
            skip.add(line)
        elif defined[parent] > line:
            problems.append(
                Problem(
                    "late_parent",
                    line,
                    f"parent {parent} comes later (line {defined[parent]})",
                    False,
                )
            )
            skip.add(line)
    problems.extend(_cycles(parent_of, defined))

    tree = SessionTree()
    # Ids whose (first) entry was left out; a duplicate leaves its first one in.
    dropped = {e.id for line, e in decoded if line in skip and defined[e.id] == line}
    for line, entry in decoded:
        if line in skip:
            continue
        if entry.parent_id in dropped or getattr(entry.body, "target", None) in dropped:
            dropped.add(entry.id)  # follows from a problem already named
            continue
        try:
            tree.add(entry)
        except TreeError as err:
            problems.append(Problem("bad_reference", line, err.reason, False))
            dropped.add(entry.id)
    for ident, entry in tree.entries.items():
        body = entry.body
        if isinstance(body, Compaction) and body.first_kept_id is not None:
            on_path = {e.id for e in tree.path(entry.parent_id)}
            if body.first_kept_id not in on_path:
                problems.append(
                    Problem(
                        "bad_compaction",
                        defined.get(ident),
                        f"first kept entry {body.first_kept_id} is not on the compaction's path",
                        False,
                    )
                )
    for call in open_tool_calls(context_of(tree.path(tree.leaf))):
        assert isinstance(call.body, ToolCall)
        problems.append(
            Problem(
                "interrupted_tool_call",
                defined.get(call.id),
                f"tool call {call.body.call_id} has no result",
                True,
            )
        )
    problems.sort(key=lambda p: (p.line if p.line is not None else 0, p.kind))
    return problems, torn


def _cycles(parent_of: dict[EntryId, EntryId | None], defined: dict[EntryId, int]) -> list[Problem]:
    done: set[EntryId] = set()
    problems: list[Problem] = []
    for start in parent_of:
        trail: list[EntryId] = []
        on_trail: set[EntryId] = set()
        ident: EntryId | None = start
        while ident is not None and ident not in done and ident in parent_of:
            if ident in on_trail:
                problems.append(
                    Problem(
                        "cycle", defined.get(ident), f"entry {ident} is its own ancestor", False
                    )
                )
                break
            trail.append(ident)
            on_trail.add(ident)
            ident = parent_of[ident]
        done.update(trail)
    return problems


def _read_locked(fd: int, lock: int) -> bytes:
    fcntl.flock(fd, lock)
    return pread_all(fd, os.fstat(fd).st_size, 0)


def check(path: Path) -> list[Problem]:
    """Every problem of the session file at ``path`` (empty: the file is sound)."""
    fd = open_session_fd(path, os.O_RDONLY)
    try:
        data = _read_locked(fd, fcntl.LOCK_SH)
    finally:
        os.close(fd)
    with gc_paused(len(data)):
        return _problems(data)[0]


def _backup_path(path: Path) -> Path:
    stamp = now_ts().replace("-", "").replace(":", "")
    candidate = path.with_name(f"{path.name}.bak-{stamp}")
    n = 1
    while candidate.exists():
        n += 1
        candidate = path.with_name(f"{path.name}.bak-{stamp}-{n}")
    return candidate


def repair(path: Path) -> RepairResult:
    """Repair ``path`` by truncating a torn tail and appending missing tool results.

    The original is copied to ``<file>.bak-<timestamp>`` first; nothing is
    copied or changed when nothing is repairable. Meant for a session no agent
    is running: a live agent's tool call in flight looks interrupted.
    """
    fd = open_session_fd(path, os.O_RDWR)
    try:
        data = _read_locked(fd, fcntl.LOCK_EX)
        with gc_paused(len(data)):
            problems, torn = _problems(data)
        if not any(p.repairable for p in problems):
            return RepairResult(None, 0, (), tuple(problems))
        backup = _backup_path(path)
        shutil.copy2(path, backup)
        truncated = 0
        if torn is not None:
            os.ftruncate(fd, torn.offset)
            os.fsync(fd)
            truncated = torn.size
    finally:
        os.close(fd)
    appended: tuple[Entry, ...] = ()
    if any(p.kind == "interrupted_tool_call" for p in problems):
        # Appending needs a loadable file; if it is not, the final check says why.
        with contextlib.suppress(SessionCorrupt):
            appended = Session.open(path).close_interrupted_tool_calls()
    return RepairResult(backup, truncated, appended, tuple(check(path)))
