"""Rendering of ``earshot watch``: start, stop and status, as JSON-ready dicts and text."""

from __future__ import annotations

import time
from typing import Any

from .render import one_line, quote_path, when


def _duration(seconds: float) -> str:
    seconds = int(seconds)
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min {seconds % 60} s"
    return f"{seconds // 3600} h {seconds % 3600 // 60} min"


def started(root: str, pid: int | None, already: bool, log: str) -> tuple[dict[str, Any], str]:
    doc = {"root": root, "running": True, "started": not already, "pid": pid, "log": log}
    if already:
        return doc, f"already watching {quote_path(root)} (pid {pid})"
    return doc, (
        f"watching {quote_path(root)} in the background (pid {pid}); "
        "'earshot watch --status' shows it, 'earshot watch --stop' stops it"
    )


def stopped(root: str, pid: int | None) -> tuple[dict[str, Any], str]:
    doc = {"root": root, "stopped": pid is not None, "pid": pid}
    if pid is None:
        return doc, f"no watch daemon for {quote_path(root)}"
    return doc, f"stopped the watch daemon of {quote_path(root)} (pid {pid})"


def _rss_mib(pid: int) -> float | None:
    """The resident memory of a process, in MiB (None: gone or unreadable)."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def listed(running: list[Any]) -> tuple[dict[str, Any], str]:
    """``watch --list``: every daemon of the data directory, one line each."""
    daemons = []
    lines = []
    for item in running:
        status = item.status or {}
        rss = _rss_mib(item.pid)
        daemons.append(
            {
                "root": item.paths.root or None,
                "pid": item.pid,
                "store": str(item.paths.store),
                "answered": item.status is not None,
                "idle_s": status.get("idle_s"),
                "hosted_calls": status.get("hosted_calls"),
                "watched_dirs": status.get("watched_dirs"),
                "rss_mib": None if rss is None else round(rss, 1),
            }
        )
        where = quote_path(item.paths.root) if item.paths.root else f"(store {item.paths.store})"
        if item.status is None:
            lines.append(f"pid {item.pid}  {where}  (not answering: starting or busy)")
            continue
        memory = f", {rss:.0f} MiB" if rss is not None else ""
        lines.append(
            f"pid {item.pid}  {where}  ({status.get('watched_dirs', 0):,} directories, "
            f"idle {_duration(status.get('idle_s', 0))}{memory})"
        )
    doc = {"daemons": daemons}
    if not lines:
        return doc, "no watch daemon is running"
    total = sum(d["rss_mib"] or 0 for d in daemons)
    lines.append(
        f"{len(lines)} daemon{'s' if len(lines) != 1 else ''}, {total:.0f} MiB; "
        "'earshot watch --stop --all' stops them"
    )
    return doc, "\n".join(lines)


def stopped_all(stopped: list[tuple[str, int | None]]) -> tuple[dict[str, Any], str]:
    """``watch --stop --all``: the daemons stopped."""
    doc = {"stopped": [{"root": root or None, "pid": pid} for root, pid in stopped]}
    if not stopped:
        return doc, "no watch daemon is running"
    lines = [
        f"stopped the watch daemon of {quote_path(root) if root else '?'} (pid {pid})"
        for root, pid in stopped
    ]
    return doc, "\n".join(lines)


def status(root: str, doc: dict[str, Any] | None) -> tuple[dict[str, Any], str]:
    """The daemon's status document (None: not running) and its text."""
    if doc is None:
        return {
            "root": root,
            "running": False,
        }, f"not watching {quote_path(root)} (start: 'earshot watch')"
    out = {"running": True, **doc}
    limit = doc.get("max_user_watches")
    up = time.time() - doc["started_ns"] / 1e9
    lines = [f"watching {quote_path(doc['root'])} (pid {doc['pid']}, up {_duration(up)})"]
    if doc.get("degraded"):
        lines.append(f"  NOT vouching for changes: {doc['degraded']}")
        lines.append("  every checkpoint falls back to a full restage")
    lines.append(
        f"  {doc['watched_dirs']:,} directories watched "
        f"({doc['watches']:,} of {limit:,} inotify watches)"
        if limit
        else f"  {doc['watched_dirs']:,} directories watched"
    )
    lines.append(
        f"  {doc['ignored_dirs_skipped']:,} ignored directories not watched; "
        f"filesystem {doc.get('filesystem') or 'unknown'}"
    )
    for rel in doc.get("unreadable_dirs", []):
        lines.append(f"  cannot watch (unreadable): {quote_path(rel)}")
    lines.append(
        f"  token {doc['epoch']}:{doc['token']}; {doc['changed_paths']:,} paths changed, "
        f"{doc['events']:,} events, {doc['overflows']} queue overflows"
    )
    settle = doc.get("settle_ms") or {}
    if settle.get("count"):
        lines.append(f"  settle: median {settle['median']} ms, p95 {settle['p95']} ms")
    gaps = doc.get("gaps") or []
    if not gaps:
        lines.append("  no gap since it started")
    for gap in gaps:
        lines.append(f"  gap at {when(gap['time_ns'])}: {one_line(gap['reason'])}")
    lines.append(
        f"  idle {_duration(doc['idle_s'])} of {_duration(doc['idle_timeout_s'])}; log {doc['log']}"
    )
    return out, "\n".join(lines)
