"""Rendering of the agent layer's results: batches, logs, undo/redo impact."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from earshot.agent.core import coverage
from earshot.agent.core.batch import Batch, Change, State
from earshot.agent.core.calls import CallResult
from earshot.agent.core.outside import BY_LEFT_RUNNING
from earshot.agent.core.records import OUTSIDE
from earshot.agent.core.reversal import Impact
from earshot.cas.intents import Intent

from .render import one_line, quote_path, reasoned, when
from .summary import Group, summed_up

NO_SESSIONS = "no sessions in this root ('earshot session new' starts one)"


def _digest(state: State | None) -> str | None:
    return state.digest.hex() if state is not None and state.digest is not None else None


def change_doc(change: Change) -> dict[str, Any]:
    """One ledger line; ``*_kind`` is null when absent, else file, symlink, dir or
    unrecorded (present, its content not held: over the size limit, say)."""
    return {
        "path": change.path,
        "before": _digest(change.before),
        "after": _digest(change.after),
        "before_kind": change.before.kind.name.lower() if change.before else None,
        "after_kind": change.after.kind.name.lower() if change.after else None,
        "before_mode": f"{change.before.mode:o}" if change.before else None,
        "after_mode": f"{change.after.mode:o}" if change.after else None,
        "by": change.by,
        "ambiguous": change.ambiguous,
    }


def counts(batch: Batch) -> tuple[int, int, int]:
    added = sum(1 for c in batch.ledger if c.before is None)
    deleted = sum(1 for c in batch.ledger if c.after is None)
    return added, len(batch.ledger) - added - deleted, deleted


def batch_doc(batch: Batch) -> dict[str, Any]:
    return {
        "seq": batch.seq,
        "time": when(batch.time_ns),
        "kind": batch.kind.value,
        "calls": list(batch.calls),
        "changes": [change_doc(c) for c in batch.ledger],
        "undone": batch.undone_by is not None,
        "undone_by": batch.undone_by,
        "self_created": batch.kind.self_created,
        "targets": list(batch.targets),
        "folded": batch.folded,
        "interrupted": batch.interrupted,
        "attributed": all(isinstance(c.by, int) for c in batch.ledger) and not batch.folded,
        "before": batch.before.hex() if batch.before else None,
        "after": batch.after.hex() if batch.after else None,
        "uncovered": [u.to_json() for u in coverage.uncovered(batch.ledger)],
    }


def _call_text(call: dict[str, Any]) -> str:
    tool = str(call.get("tool", "?"))
    if tool == "bash":
        return f"bash: {one_line(str(call.get('command', '')))}"
    if tool in ("undo", "redo"):
        return str(tool) + (f" {call['count']}" if call.get("count", 1) != 1 else "")
    if tool == "outside":
        left = call.get("left_running")
        if isinstance(left, dict):
            return f"left running by batch {left.get('batch')}"
        return "changed outside any call"
    return f"{tool} {quote_path(str(call.get('path', '')))}".rstrip()


def _outside(batch: Batch) -> bool:
    """A batch of what changed outside any call (``outside``)."""
    return bool(batch.calls) and batch.calls[0].get("tool") == "outside"


def call_summary(batch: Batch) -> str:
    """A batch's calls in at most 48 characters."""
    calls = "; ".join(_call_text(c) for c in batch.calls) or "(no calls)"
    return calls if len(calls) <= 48 else calls[:45] + "..."


def batch_line(batch: Batch, undone_by_undo: dict[int, list[int]] | None = None) -> str:
    """One line of ``log``. ``undone_by_undo``: each undo batch's targets, so a
    redo is named by the batches it brings back (``redo of 2``), as ``redo`` says."""
    added, modified, deleted = counts(batch)
    calls = call_summary(batch)
    flags = []
    if batch.undone_by is not None:
        flags.append(f"undone by {batch.undone_by}")
    redone = (undone_by_undo or {}).get(batch.targets[0]) if batch.targets else None
    if batch.kind.value == "redo" and redone:
        flags.append(
            f"redo of {', '.join(map(str, redone))}, taking back undo "
            f"{', '.join(map(str, batch.targets))}"
        )
    elif batch.kind.value in ("undo", "redo", "rewind"):
        flags.append(f"{batch.kind.value} of {', '.join(map(str, batch.targets))}")
    if batch.interrupted:
        # A process killed mid-batch, or notes lost (a full disk) or damaged.
        flags.append("interrupted: recorded from the tree as found, calls named only where proven")
    if batch.folded:
        flags.append("folded: changes go to the next snapshot, not attributed")
    elif any(c.by == BY_LEFT_RUNNING for c in batch.ledger) and not _outside(batch):
        flags.append("some changes made by what a command left running")
    elif any(not isinstance(c.by, int) for c in batch.ledger) and not (
        batch.kind.self_created or _outside(batch)
    ):
        flags.append("some changes found by a restage, not attributed to a call")
    gaps = sum(1 for c in batch.calls if c.get("gap"))
    if gaps:
        flags.append(
            f"{gaps} {'call' if gaps == 1 else 'calls'} not recorded: no state before, "
            "so undo cannot take it back"
        )
    background = sum(1 for c in batch.calls if c.get("background"))
    if background:
        flags.append(
            f"{background} {'call' if background == 1 else 'calls'} ran on in the background: "
            "what it did after returning is not this batch's"
        )
    uncovered = coverage.uncovered(batch.ledger)
    if uncovered:
        flags.append(
            f"{len(uncovered)} {'path' if len(uncovered) == 1 else 'paths'} not covered by undo"
        )
    unended = sum(1 for c in batch.calls if c.get("unfinished"))
    if unended:
        flags.append(f"{unended} {'call' if unended == 1 else 'calls'} never said it ended")
    if not batch.ledger and not batch.folded and not gaps:
        flags.append("changed nothing")
    tail = f"  [{'; '.join(flags)}]" if flags else ""
    seq = f"o{batch.seq}" if batch.session == OUTSIDE else str(batch.seq)
    return f"{seq:>4}  {when(batch.time_ns)}  {calls:<48}  +{added} ~{modified} -{deleted}{tail}"


def log(
    session: str | None,
    batches: list[Batch],
    pending: Sequence[tuple[Intent, bool]] = (),
    outside: Sequence[Batch] = (),
) -> tuple[dict[str, Any], str]:
    """The session's batches, and those that ran but are not recorded yet (``pending``:
    their intents, and whether the process running them lives); ``outside``:
    the batches of what changed outside any call meanwhile, listed among them."""
    waiting = [
        {
            "seq": intent.doc.get("seq"),
            "kind": intent.kind,
            "calls": intent.doc.get("calls") or [intent.doc.get("call")],
            "started": when(intent.started_ns),
            "running": live,
        }
        for intent, live in pending
    ]
    doc = {
        "session": session,
        "batches": [batch_doc(b) for b in batches],
        "pending": waiting,
        "outside": [batch_doc(b) for b in outside],
    }
    if session is None:
        return doc, NO_SESSIONS
    # Both kinds in the order they were recorded: what changed outside any
    # call between two batches is listed between them.
    shown = sorted([*batches, *outside], key=lambda b: b.time_ns)
    undone = {b.seq: list(b.targets) for b in batches if b.kind.value in ("undo", "rewind")}
    lines = [f"session {session}"] + [batch_line(b, undone) for b in shown]
    for item in waiting:
        state = (
            "running now"
            if item["running"]
            else "interrupted, not recorded yet: the next command that changes files records it"
        )
        lines.append(f"{item['seq']!s:>4}  {item['started']}  {item['kind']}  [{state}]")
    if not batches and not waiting:
        lines.append("  no batches yet")
    if outside and session != OUTSIDE:
        lines.append(
            f"  oN: batch N of what changed outside any call; "
            f"'earshot undo --session {OUTSIDE}' takes the last back"
        )
    return doc, "\n".join(lines)


def outcome(
    session: str, batch: Batch, results: tuple[CallResult, ...], outside: Sequence[Batch] = ()
) -> dict[str, Any]:
    return {
        "session": session,
        "batch": batch.seq,
        "results": [r.to_json() for r in results],
        "changes": [change_doc(c) for c in batch.ledger],
        "folded": batch.folded,
        "uncovered": [u.to_json() for u in coverage.uncovered(batch.ledger)],
        # What changed outside any call before or between the calls: batches of their own.
        "outside": [
            {"session": b.session, "batch": b.seq, "changes": [change_doc(c) for c in b.ledger]}
            for b in outside
        ],
    }


def git_notice(paths: tuple[str, ...] | list[str], shown: int = 4) -> str:
    """What a shell command changed in a git directory, for stderr: undo cannot take it back."""
    names = ", ".join(quote_path(p) for p in paths[:shown])
    more = f" and {len(paths) - shown} more" if len(paths) > shown else ""
    return (
        f"the command changed the git repository ({names}{more}); "
        "earshot never records .git, so undo does not take this back"
    )


def impact(
    result: Impact, what: str, dry_run: bool, session: str | None = None, every: bool = False
) -> tuple[dict[str, Any], str]:
    doc = {
        "batches": result.batches,
        "count": len(result.batches),
        "restored": result.restored,
        "deleted": result.deleted,
        "conflicts": result.conflicts,
        "ambiguous": result.ambiguous,
        "kept": [{"path": p, "reason": r} for p, r in result.kept],
        "removed_dirs": result.removed_dirs,
        "moved": [{"from": a, "to": b} for a, b in result.moved],
        "dry_run": dry_run,
        "record": result.record,
    }
    return doc, "\n".join(impact_lines(result, what, dry_run, session, every))


def impact_lines(
    result: Impact, what: str, dry_run: bool, session: str | None = None, every: bool = False
) -> list[str]:
    """An undo, redo or rewind impact for people: one line per path, or past 50
    paths their totals per folder (``every``: always each path). ``session``:
    the one the commands it suggests must name (the pseudo-session ``outside``
    is never the default)."""
    where = f" --session {OUTSIDE}" if session == OUTSIDE else ""
    verb = "would " if dry_run else ""
    if len(result.batches) > 1:
        head = f"{what} of batches {', '.join(map(str, result.batches))}"
    else:
        head = f"{what} of batch {result.batches[0]}" if result.batches else f"{what}: none"
    lines = [("dry run: " if dry_run else "") + head]
    groups = [
        Group(f"{verb}{w}", paths, [f"  {verb}{w:<7} {quote_path(p + end)}" for p in paths])
        for w, paths, end in (
            ("restore", result.restored, ""),
            ("delete", result.deleted, ""),
            ("rmdir", result.removed_dirs, "/"),
        )
    ]
    moves = [f"  {verb}move    {quote_path(a)} -> {quote_path(b)}" for a, b in result.moved]
    groups.append(Group(f"{verb}move", [a for a, _ in result.moved], moves))
    shared = set(result.ambiguous)
    conflicts = [
        (
            p,
            "another session ran at the same time and may have made it; left alone "
            "(--force deletes)"
            if p in shared
            else "changed since the batch (undo never deletes that), or a parent is now a "
            "file or a link; left alone"
            if result.forced
            else "changed since the batch; left alone (--force overwrites)",
        )
        for p in result.conflicts
    ]
    groups += reasoned("conflict", conflicts)
    groups += reasoned("kept   ", [(p, r.removesuffix("; kept")) for p, r in result.kept])
    lines += summed_up(groups, every)
    if result.conflicts and what == "undo" and not dry_run and not result.forced:
        lines.append(
            f"a batch with conflicts stays to undo: 'earshot undo{where} --force' overwrites "
            f"them, 'earshot undo{where} {len(result.batches) + 1}' goes on to the batch before it"
        )
    if result.record is not None:
        back = "undo" if what == "redo" else "redo"
        lines.append(f"recorded as batch {result.record} ('earshot {back}{where}' to go back)")
    return lines
