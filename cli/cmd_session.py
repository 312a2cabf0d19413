"""``earshot session new`` and ``earshot sessions``."""

from __future__ import annotations

import click
from earshot.agent.records import session_batches
from earshot.agent.sessions import create_session, list_sessions, start_session_upkeep
from earshot.cas.project import Project

from . import render, render_agent
from .common import project_command


@click.group()
def session() -> None:
    """Manage sessions (one agent conversation and its checkpoint history)."""


@session.command(name="new")
@project_command
def session_new(project: Project, as_json: bool) -> None:
    """Start a new session and print its id (export it as EARSHOT_SESSION)."""
    record = create_session(project)
    start_session_upkeep(project)
    render.emit({"id": record.id}, record.id, as_json)


@click.command()
@project_command
def sessions(project: Project, as_json: bool) -> None:
    """List the root's sessions, most recently active first."""
    records = list_sessions(project)
    with project.store.backend.read() as view:
        counts = {r.id: len(session_batches(view, r.id)) for r in records}
    doc, text = render_agent.sessions(records, counts, {})
    render.emit(doc, text, as_json)
