"""``earshot session new`` (``earshot sessions`` is in ``cmd_conversation``)."""

from __future__ import annotations

import click

from earshot.agent.core.conversation import new_session
from earshot.cas.project import Project

from . import render
from .common import project_command


@click.group()
def session() -> None:
    """Manage sessions (one agent conversation and its checkpoint history)."""


@session.command(name="new")
@project_command
def session_new(project: Project, as_json: bool) -> None:
    """Start a new session and print its id (export it as EARSHOT_SESSION).

    Creates both halves under one id: the conversation log and the
    checkpoint history.
    """
    record = new_session(project)
    render.emit({"id": record.id}, record.id, as_json)
