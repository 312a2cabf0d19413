"""All output: each result as a JSON-ready dict and as text for people.

With ``--json`` stdout carries exactly one JSON document; everything else
(progress, logs, notices) goes to stderr. Paths are relative to the root,
undecodable bytes kept as surrogate escapes. In text, a path holding a
control character, a backslash or a double quote is quoted as git quotes it
(``quote_path``), so no name can pass for several lines of output; JSON
keeps the real name.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

import click

from earshot.cas.diff import Change
from earshot.cas.digest import Digest, short, to_hex
from earshot.cas.fsck import FsckReport
from earshot.cas.gc import GcReport
from earshot.cas.project import Recorded, Restored
from earshot.cas.snapshot import Snapshot
from earshot.cas.stats import StoreStats
from earshot.cas.tree import TreeEntry

from .quoting import one_line as one_line  # the renderers take them from here
from .quoting import quote_path as quote_path
from .summary import Group, summed_up

#: Whether this process printed its JSON document: an error after it adds none.
EMITTED = {"json": False}


def emit(doc: dict[str, Any], text: str, as_json: bool) -> None:
    """Print the result: the JSON document or the text."""
    if as_json:
        EMITTED["json"] = True
        # ASCII escapes keep undecodable file names (surrogates) valid JSON
        # under any locale.
        sys.stdout.write(json.dumps(doc, indent=2, ensure_ascii=True, default=str) + "\n")
    elif text:
        click.echo(text)


def when(time_ns: int) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(time_ns / 1e9))


def human_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"


def snapshot_doc(digest: Digest, snap: Snapshot) -> dict[str, Any]:
    return {
        "id": to_hex(digest),
        "time": when(snap.time_ns),
        "time_ns": snap.time_ns,
        "note": snap.note,
        "session": snap.session,
        "tree": to_hex(snap.tree),
        "files": snap.files,
        "content_bytes": snap.content_bytes,
        "unrecorded": snap.unrecorded,
    }


def recorded(rec: Recorded, seconds: float, every: bool = False) -> tuple[dict[str, Any], str]:
    """A snapshot taken; past 50 paths not recorded or skipped, summed up unless ``every``."""
    doc = snapshot_doc(rec.digest, rec.snapshot)
    doc.update(
        reused=rec.reused,
        files_read=rec.report.files_read,
        bytes_read=rec.report.bytes_read,
        unrecorded_paths=[{"path": p, "reason": r.name.lower()} for p, r in rec.report.unrecorded],
        skipped=[{"path": p, "reason": r} for p, r in rec.report.skipped],
        warnings=rec.report.warnings,
        seconds=round(seconds, 4),
    )
    lines = []
    if rec.reused:
        lines.append(f"no change since snapshot {short(rec.digest)}; reusing it")
    else:
        lines.append(
            f"snapshot {to_hex(rec.digest)}\n"
            f"  {rec.snapshot.files:,} files, {human_bytes(rec.snapshot.content_bytes)}; "
            f"read {rec.report.files_read:,} ({human_bytes(rec.report.bytes_read)}) "
            f"in {seconds:.2f} s"
        )
    why: dict[str, list[str]] = {}
    for path, reason in rec.report.unrecorded:
        why.setdefault(reason.name.lower().replace("_", " "), []).append(path)
    unlisted = [
        f"  not recorded ({reason.name.lower().replace('_', ' ')}): {quote_path(path)}"
        for path, reason in rec.report.unrecorded
    ]
    groups = [Group(f"not recorded ({w})", paths, []) for w, paths in why.items()]
    if groups:  # listed, in their own order
        groups[0] = Group(groups[0].label, groups[0].paths, unlisted)
    groups += reasoned("skipped", rec.report.skipped)
    lines += summed_up(groups, every)
    for warning in rec.report.warnings:
        lines.append(f"  warning: {one_line(warning)}")
    return doc, "\n".join(lines)


def snapshot_list(items: list[tuple[Digest, Snapshot]]) -> tuple[dict[str, Any], str]:
    doc = {"snapshots": [snapshot_doc(d, s) for d, s in items]}
    lines = [
        f"{short(d)}  {when(s.time_ns)}  {s.files:>7,} files  {s.note}".rstrip() for d, s in items
    ]
    return doc, "\n".join(lines) if lines else "no snapshots yet (run 'earshot snapshot')"


def entry_doc(entry: TreeEntry | None) -> dict[str, Any] | None:
    if entry is None:
        return None
    return {
        "kind": entry.kind.name.lower(),
        "mode": f"{entry.mode:o}",
        "size": entry.size,
        "digest": to_hex(entry.digest) if entry.digest else None,
    }


_MARK = {"added": "+", "deleted": "-", "modified": "~", "mode": "m", "type": "t"}


def changes(
    items: list[Change], stat_only: bool, patches: dict[str, str]
) -> tuple[dict[str, Any], str]:
    counts = {k: 0 for k in _MARK}
    for change in items:
        counts[change.kind.value] += 1
    doc = {
        "changes": [
            {
                "path": c.path,
                "change": c.kind.value,
                "old": entry_doc(c.old),
                "new": entry_doc(c.new),
            }
            for c in items
        ],
        "summary": counts,
    }
    lines = []
    for change in items:
        lines.append(f"{_MARK[change.kind.value]} {quote_path(change.path)}")
        if not stat_only and change.path in patches:
            lines.append(patches[change.path].rstrip("\n"))
    summary = ", ".join(f"{n} {k}" for k, n in counts.items() if n) or "no changes"
    lines.append(summary)
    return doc, "\n".join(lines)


def restored(
    res: Restored, target: Digest, dry_run: bool, every: bool = False
) -> tuple[dict[str, Any], str]:
    """A restore or its dry run; past 50 paths the text sums them up unless ``every``."""
    plan, result = res.plan, res.result
    skipped = list(plan.skipped) + (list(result.skipped) if result else [])
    if dry_run or result is None:
        written = [p for p, _ in plan.writes]
        deleted = [p for p, _ in plan.deletes]
        made = [p for p, _ in plan.mkdirs]
        removed = list(plan.rmdirs)
        modes = [p for p, _ in plan.chmods]
    else:
        written, deleted = result.written, result.deleted
        made, removed, modes = result.created_dirs, result.removed_dirs, result.modes
    doc = {
        "id": to_hex(target),
        "dry_run": dry_run,
        "before": to_hex(res.before.digest) if res.before else None,
        "written": written,
        "deleted": deleted,
        "created_dirs": made,
        "removed_dirs": removed,
        "modes": modes,
        "skipped": [{"path": p, "reason": r} for p, r in skipped],
    }
    verb = "would " if dry_run else ""
    groups = [
        Group(f"{verb}{what}", paths, [f"  {verb}{what:<7} {quote_path(p + end)}" for p in paths])
        for what, paths, end in (
            ("write", written, ""),
            ("delete", deleted, ""),
            ("mkdir", made, "/"),
            ("rmdir", removed, "/"),
            ("chmod", modes, ""),
        )
    ]
    groups += reasoned("skipped", skipped)
    lines = [f"{'dry run: ' if dry_run else ''}restore to {short(target)}"]
    lines += summed_up(groups, every)
    if not (written or deleted or made or removed or modes or skipped):
        lines.append("  nothing to do: the root already matches")
    elif res.before is not None:
        before = short(res.before.digest)
        lines.append(f"the state before is snapshot {before} (restore it to go back)")
    return doc, "\n".join(lines)


def reasoned(what: str, items: list[tuple[str, str]]) -> list[Group]:
    """``what PATH: WHY`` lines as ``summary.Group``s, one per reason.

    Listed, the lines keep their order (all held by the first group); summed
    up, each reason has its line.
    """
    by_reason: dict[str, list[str]] = {}
    for path, why in items:
        by_reason.setdefault(one_line(why), []).append(path)
    lines = [f"  {what} {quote_path(p)}: {one_line(r)}" for p, r in items]
    groups = [Group(f"{what.strip()} ({why})", paths, []) for why, paths in by_reason.items()]
    if groups:
        groups[0] = Group(groups[0].label, groups[0].paths, lines)
    return groups


def gc_report(report: GcReport) -> tuple[dict[str, Any], str]:
    doc = {
        "live_objects": report.live_objects,
        "dead_objects": report.dead_objects,
        "dead_bytes": report.dead_bytes,
        "packs_rewritten": report.packs_rewritten,
        "packs_deleted": report.packs_deleted,
        "disk_bytes_before": report.disk_before,
        "disk_bytes_after": report.disk_after,
    }
    text = (
        f"removed {report.dead_objects:,} objects ({human_bytes(report.dead_bytes)} stored), "
        f"kept {report.live_objects:,}; rewrote {report.packs_rewritten} packs; "
        f"disk {human_bytes(report.disk_before)} -> {human_bytes(report.disk_after)}"
    )
    return doc, text


def fsck_report(report: FsckReport, records: int = 0) -> tuple[dict[str, Any], str]:
    doc = {
        "ok": report.ok,
        "objects": report.objects,
        "snapshots": report.snapshots,
        "records": records,
        "problems": report.problems,
    }
    head = (
        f"checked {report.objects:,} objects, {report.snapshots:,} snapshots and "
        f"{records:,} records: "
    )
    text = head + ("ok" if report.ok else f"{len(report.problems)} problems")
    if report.problems:
        text += "\n" + "\n".join(f"  {one_line(p)}" for p in report.problems)
    return doc, text


NO_STORE = "nothing recorded in this root yet (no store)"


def fsck_empty() -> tuple[dict[str, Any], str]:
    """fsck in a root with no store: nothing to check, and none is made."""
    doc = {"ok": True, "objects": 0, "snapshots": 0, "problems": [], "store": False}
    return doc, f"{NO_STORE}: nothing to check"


def stats_empty() -> tuple[dict[str, Any], str]:
    """stats in a root with no store (none is made)."""
    doc = {
        "snapshots": 0,
        "recorded_snapshots": 0,
        "objects": {},
        "packs": 0,
        "content_bytes": 0,
        "logical_bytes": 0,
        "stored_bytes": 0,
        "disk_bytes": 0,
        "disk_per_content_byte": 0.0,
        "compression_ratio": 0.0,
        "dedup_ratio": 0.0,
        "store": False,
    }
    return doc, NO_STORE


def stats_report(stats: StoreStats) -> tuple[dict[str, Any], str]:
    doc = {
        "snapshots": stats.snapshots,
        "recorded_snapshots": stats.recorded_snapshots,
        "objects": stats.objects,
        "packs": stats.packs,
        "content_bytes": stats.content_bytes,
        "logical_bytes": stats.logical_bytes,
        "stored_bytes": stats.stored_bytes,
        "disk_bytes": stats.disk_bytes,
        "disk_per_content_byte": round(stats.disk_per_content_byte, 4),
        "compression_ratio": round(stats.compression_ratio, 3),
        "dedup_ratio": round(stats.dedup_ratio, 3),
    }
    names = {"blob": "file contents", "chunked": "chunked large files", "tree": "folder listings"}
    objects = ", ".join(
        f"{n:,} {names[k]}" for k, n in stats.objects.items() if k in names and (n or k == "blob")
    )
    listed = "" if not stats.snapshots else f", {stats.snapshots:,} listed by 'earshot snapshots'"
    per_byte = stats.disk_per_content_byte
    text = (
        f"snapshots  {stats.recorded_snapshots:,} recorded{listed}\n"
        f"objects    {objects}, in {stats.packs:,} packs\n"
        f"content    {human_bytes(stats.content_bytes)} stored once; "
        f"{human_bytes(stats.logical_bytes)} across all snapshots"
        + (f" (dedup {stats.dedup_ratio:.1f}x)" if stats.content_bytes else "")
        + "\n"
        f"on disk    {human_bytes(stats.disk_bytes)}"
        + (
            f" ({human_bytes(stats.stored_bytes)} compressed {stats.compression_ratio:.1f}x, "
            f"{per_byte:,.1f} bytes on disk per byte of content)"
            if stats.content_bytes
            else ""
        )
    )
    return doc, text
