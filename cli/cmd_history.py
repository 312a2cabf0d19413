"""``earshot log``, ``undo`` and ``redo``: a session's batches, and going back."""

from __future__ import annotations

import sys

import click

from earshot.agent.core.batch import Batch
from earshot.agent.core.conversation import BATCHES
from earshot.agent.core.engine import Engine
from earshot.agent.core.records import OUTSIDE, get_session, session_batches
from earshot.agent.core.undo import redo as redo_batches
from earshot.agent.core.undo import undo as undo_batches
from earshot.cas.intents import Intent
from earshot.cas.project import Project

from . import colour, render, render_agent
from .common import EXIT_SKIPPED, acts_on, list_option, session_command, session_lookup
from .progress import progress_for
from .readonly import is_dry_run, no_sessions, unless_recorded


def _no_log(as_json: bool, **options: object) -> None:
    render.emit(*render_agent.log(None, []), as_json)


def _was_finished(engine: Engine, kind: str, as_json: bool) -> bool:
    """An interrupted undo (redo) of this session was just finished: this one is it."""
    intent = engine.finished_interrupted(kind)
    if intent is None:
        return False
    seq = intent.doc.get("seq")
    doc = {"finished_interrupted": True, "record": seq, "batches": intent.doc.get("targets", [])}
    text = f"the interrupted {kind} is finished (batch {seq}); nothing more was done"
    render.emit(doc, text, as_json)
    return True


@click.command()
@unless_recorded(_no_log)
@session_lookup
@acts_on(BATCHES)
def log(project: Project, as_json: bool, session: str | None) -> None:
    """List the session's batches: seq, time, calls, files changed (+ ~ -).

    Between them, as oN, what changed outside any call meanwhile (the person,
    another tool, a process left running): batch N of the session 'outside',
    which 'earshot undo --session outside' takes back.

    Says which were undone, which earshot made itself (undo/redo), and which
    had their changes folded into the next snapshot (too large a tree to
    restage after a command, and no watcher). Creates nothing: in a root with
    no session it says so.
    """
    doc, text = render_agent.log(session, *history(project, session))
    colour.emit(doc, text, as_json, colour.numbered_line)


def history(
    project: Project, session: str | None
) -> tuple[list[Batch], list[tuple[Intent, bool]], list[Batch]]:
    """What ``log`` lists of ``session``: its batches, the batches it runs that are not
    recorded yet (their intents, and whether their process lives), and what changed
    outside any call since it began."""
    batches = []
    pending = []
    outside: list[Batch] = []
    if session is not None:
        with project.store.backend.read() as view:
            batches = session_batches(view, session)
            record = get_session(view, session)
            if session != OUTSIDE and record is not None:
                # What changed outside any call since the session began.
                since = record.created_ns
                outside = [b for b in session_batches(view, OUTSIDE) if b.time_ns >= since]
        intents = project.intents
        pending = [
            (i, intents.is_live(i)) for i in intents.pending() if i.doc.get("session") == session
        ]
    return batches, pending, outside


@click.command()
@click.argument("count", type=click.IntRange(min=1), default=1, metavar="[N]")
@click.option("--dry-run", is_flag=True, help="Show what would be restored, deleted, in conflict.")
@click.option("--force", is_flag=True, help="Overwrite conflicting files (never deletes them).")
@list_option
@unless_recorded(no_sessions, when=is_dry_run)
@session_command
@acts_on(BATCHES)
def undo(
    engine: Engine, as_json: bool, count: int, dry_run: bool, force: bool, every: bool
) -> None:
    """Undo the session's last N batches (default 1).

    Steps over batches that changed nothing and over undo/redo batches, so
    'undo 2' goes two real steps back. A file changed since the batch is a
    conflict: left alone and reported (exit 3) unless --force. Only files a
    call of this session created are deleted, and only if unchanged since.
    'earshot redo' brings everything back.
    """
    if not dry_run and _was_finished(engine, "undo", as_json):
        return
    with progress_for(as_json) as progress:
        impact = undo_batches(engine, count, force=force, dry_run=dry_run, progress=progress)
    doc, text = render_agent.impact(impact, "undo", dry_run, engine.session.id, every)
    render.emit(doc, text, as_json)
    if impact.conflicts or impact.kept:
        sys.exit(EXIT_SKIPPED)


@click.command()
@click.option("--dry-run", is_flag=True, help="Show what would be restored, deleted, in conflict.")
@click.option("--force", is_flag=True, help="Overwrite conflicting files (never deletes them).")
@list_option
@unless_recorded(no_sessions, when=is_dry_run)
@session_command
@acts_on(BATCHES)
def redo(engine: Engine, as_json: bool, dry_run: bool, force: bool, every: bool) -> None:
    """Redo the most recent undo: bring back exactly what it reverted."""
    if not dry_run and _was_finished(engine, "redo", as_json):
        return
    with progress_for(as_json) as progress:
        impact = redo_batches(engine, force=force, dry_run=dry_run, progress=progress)
    doc, text = render_agent.impact(impact, "redo", dry_run, engine.session.id, every)
    render.emit(doc, text, as_json)
    if impact.conflicts or impact.kept:
        sys.exit(EXIT_SKIPPED)
