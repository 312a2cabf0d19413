"""Rendering of the conversation side: messages, the prompt tree, rewind, fork, sessions."""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click

from earshot.agent.core.conversation import SessionSummary, ts_ns
from earshot.agent.core.navigation import Checked, Forked, Rewound
from earshot.agent.log.check import Problem
from earshot.agent.log.entries import Entry
from earshot.agent.log.tree import Prompt

from . import render_agent
from .render import one_line, when

_SHOWN = 72  # characters of a prompt's first line in listings


def notice(text: str) -> None:
    """A line for the person on stderr (stdout stays the result)."""
    click.echo(f"earshot: {text}", err=True)


def _short(text: str | None) -> str:
    line = one_line((text or "").strip().split("\n", 1)[0])
    return line if len(line) <= _SHOWN else line[: _SHOWN - 3] + "..."


def _time(ts: str) -> str:
    return when(ts_ns(ts))


def message(entry: Entry, session: str) -> tuple[dict[str, Any], str]:
    return {"id": entry.id, "session": session, "type": entry.type}, entry.id


def prompt_doc(prompt: Prompt) -> dict[str, Any]:
    return {
        "n": prompt.n,
        "id": prompt.id,
        "text": prompt.text,
        "time": _time(prompt.ts),
        "ts": prompt.ts,
        "branches": prompt.has_branches,
    }


def tree(session: str | None, prompts: Sequence[Prompt]) -> tuple[dict[str, Any], str]:
    doc = {"session": session, "prompts": [prompt_doc(p) for p in prompts]}
    if session is None:
        return doc, render_agent.NO_SESSIONS
    if not prompts:
        return doc, f"session {session}: no prompts on the current path"
    count = f"{len(prompts)} prompt{'s' if len(prompts) > 1 else ''}"
    lines = [f"session {session}: {count} on the current path"]
    for p in prompts:
        mark = "  [branches]" if p.has_branches else ""
        lines.append(f"{p.n:>4}  {_time(p.ts)}  {_short(p.text)}{mark}")
    return doc, "\n".join(lines)


def _code_lines(result: Rewound, every: bool) -> list[str]:
    assert result.impact is not None
    return render_agent.impact_lines(result.impact, "rewind", result.dry_run, every=every)


def rewound(result: Rewound, every: bool = False) -> tuple[dict[str, Any], str]:
    """The document, and the text: the code's impact (if any), then prompt N's text
    (past 50 paths the impact sums them up, unless ``every``)."""
    plan = result.plan
    code = None
    if result.impact is not None:
        code, _ = render_agent.impact(result.impact, "rewind", result.dry_run)
    doc = {
        "session": plan.session,
        "prompt": plan.prompt.n,
        "prompts": plan.prompts,
        "id": plan.prompt.id,
        "text": plan.prompt.text,
        "target": plan.target,
        "navigation": result.navigation.id if result.navigation is not None else None,
        "batches": list(plan.batches),
        "foreign_batches": list(plan.foreign),
        "dry_run": result.dry_run,
        "code": code,
    }
    lines = _code_lines(result, every) if result.impact is not None else []
    if result.dry_run:
        lines.append(f"dry run: would rewind to before prompt {plan.prompt.n}; its text:")
    lines.append(plan.prompt.text)
    return doc, "\n".join(lines)


def rewound_notice(result: Rewound) -> str:
    plan = result.plan
    after = (
        f"; batches {', '.join(map(str, plan.batches))} came after it"
        if plan.batches and result.impact is None
        else ""
    )
    return (
        f"session {plan.session} is back before prompt {plan.prompt.n} of {plan.prompts}"
        f"{after}; its text is on stdout"
    )


def forked(result: Forked) -> tuple[dict[str, Any], str]:
    doc = {
        "id": result.record.id,
        "from": {"session": result.origin.session, "entry": result.origin.entry},
        "prompts": result.prompts,
        "path": str(result.log.path),
    }
    return doc, result.record.id


def summary_doc(item: SessionSummary) -> dict[str, Any]:
    fork = item.fork_of
    return {
        "id": item.id,
        "created": when(item.created_ns),
        "last_activity": when(item.last_activity_ns),
        "batches": item.batches,
        "prompts": item.prompts,
        "first_prompt": item.first_prompt,
        "fork_of": None if fork is None else {"session": fork.session, "entry": fork.entry},
        "has_log": item.has_log,
        "has_checkpoints": item.has_checkpoints,
        "agent": None if item.agent is None else {"name": item.agent[0], "session": item.agent[1]},
    }


def ago(ns: int, now_ns: int | None = None) -> str:
    """``just now``, ``2 min ago``, ``3 h ago``, ``5 days ago``."""
    seconds = max(0, ((now_ns or time.time_ns()) - ns) // 1_000_000_000)
    if seconds < 60:
        return "just now"
    for unit, size in (("days", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds // size} {unit} ago"
    return "just now"  # pragma: no cover - the loop always returns


def _count(n: int, noun: str) -> str:
    plural = noun + ("es" if noun.endswith("ch") else "s")
    return f"{n:,} {noun if n == 1 else plural}"


def chosen_line(s: SessionSummary) -> str:
    """The session a command took when none was named, in one line:
    ``session 01m8z2d9xf00 (claude, 3 batches, 2 min ago)``."""
    who = s.agent[0] if s.agent is not None else "earshot"
    return (
        f"session {s.id[:12]} ({who}, {_count(s.batches, 'batch')}, {ago(s.last_activity_ns)}); "
        "--session ID picks another ('earshot sessions' lists them)"
    )


def sessions(items: Sequence[SessionSummary]) -> tuple[dict[str, Any], str]:
    doc = {"sessions": [summary_doc(s) for s in items]}
    lines = []
    now = time.time_ns()
    for s in items:
        fork = f"  (fork of {s.fork_of.session[:12]})" if s.fork_of is not None else ""
        who = s.agent[0] if s.agent is not None else "earshot"
        # The agent's own id, to match `claude --resume ID` and the like.
        agent = f"  ({s.agent[0]} {one_line(s.agent[1])[:12]})" if s.agent is not None else ""
        line = (
            f"{s.id}  {who:<7}  {_count(s.prompts, 'prompt'):>11}  "
            f"{_count(s.batches, 'batch'):>11}  {ago(s.last_activity_ns, now):>12}  "
            f"{_short(s.first_prompt)}{fork}{agent}"
        )
        lines.append(line.rstrip())
    return doc, "\n".join(lines) if lines else "no sessions yet ('earshot session new')"


def _problem_doc(problem: Problem) -> dict[str, Any]:
    return {
        "kind": problem.kind,
        "line": problem.line,
        "message": problem.message,
        "repairable": problem.repairable,
    }


def _problem_line(name: str, problem: Problem) -> str:
    where = f"line {problem.line}: " if problem.line is not None else ""
    fix = " (--repair fixes this)" if problem.repairable else ""
    return f"{name}: {where}{problem.kind}: {one_line(problem.message)}{fix}"


def checked(results: Sequence[Checked], directory: Path) -> tuple[dict[str, Any], str]:
    files = []
    lines = []
    for item in results:
        name = item.path.name
        repair = item.repair
        files.append(
            {
                "id": name.removesuffix(".jsonl"),
                "path": str(item.path),
                "ok": not item.remaining,
                "problems": [_problem_doc(p) for p in item.problems],
                "repair": None
                if repair is None
                else {
                    "backup": str(repair.backup) if repair.backup is not None else None,
                    "truncated_bytes": repair.truncated_bytes,
                    "appended": [e.id for e in repair.appended],
                    "remaining": [_problem_doc(p) for p in repair.remaining],
                },
            }
        )
        if repair is not None:
            done = []
            if repair.truncated_bytes:
                done.append(f"truncated a torn write of {repair.truncated_bytes} bytes")
            if repair.appended:
                done.append(f"appended {len(repair.appended)} 'interrupted' tool results")
            backup = f"; the original is kept as {repair.backup}" if repair.backup else ""
            lines.append(f"{name}: repaired: {', '.join(done) or 'nothing'}{backup}")
        shown = item.remaining if repair is not None else item.problems
        lines += [_problem_line(name, p) for p in shown]
        if not shown:
            lines.append(f"{name}: ok")
    ok = not any(not f["ok"] for f in files)
    doc = {"directory": str(directory), "ok": ok, "sessions": files}
    if not results:
        return doc, f"no session files in {directory}"
    return doc, "\n".join(lines)
