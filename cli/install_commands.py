"""The agents' ``/earshot`` custom command: a file earshot writes beside the hooks.

Claude Code and Gemini CLI read custom commands from files; ``/earshot ARGS``
expands to the prompt ``earshot ARGS``, which earshot's prompt hook runs.
A file of the person's by that name, or a link, is never written over.
"""

from __future__ import annotations

import os
from pathlib import Path

import click

from earshot.agent.hooks.settings import command_file

from .install_notes import note_made_dirs, remove_made_dirs
from .settings_io import leads_out


def command_spec(agent: str, user: bool, root: str) -> tuple[Path, str] | None:
    """The agent's ``/earshot`` command file and its text; None where the agent
    has none, or where a linked directory would take it out of the project."""
    spec = command_file(
        agent, "user" if user else "project", os.path.realpath(root), os.path.expanduser("~")
    )
    if spec is None:
        return None
    path = Path(spec[0])
    if not user and (out := leads_out(path, Path(root))) is not None:
        click.echo(
            f"earshot: warning: {path} leads out of the project (to {out}); /earshot not written",
            err=True,
        )
        return None
    return path, spec[1]


def put_command(spec: tuple[Path, str] | None, dry_run: bool) -> tuple[str | None, str | None]:
    """Write the agent's ``/earshot`` command unless a file of the person's is there;
    (the file written or to write, a file left alone)."""
    if spec is None:
        return None, None
    path, text = spec
    if path.is_symlink():
        return None, str(path)  # a link (maybe to nowhere) is someone's: never written through
    try:
        now = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        now = None
    except (OSError, UnicodeDecodeError):
        return None, str(path)
    if now == text:
        return None, None
    if now is not None:
        return None, str(path)  # someone's own /earshot: theirs to keep
    if not dry_run:
        try:
            note_made_dirs(path)
            path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                out.write(text)
        except OSError as exc:  # the hooks are in: say so, and go on without /earshot
            where = exc.filename or path
            click.echo(
                f"earshot: warning: {where}: cannot write the /earshot command ({exc.strerror})",
                err=True,
            )
            return None, None
    return str(path), None


def drop_command(spec: tuple[Path, str] | None, dry_run: bool) -> str | None:
    """Remove the agent's ``/earshot`` command if it is still the one earshot wrote."""
    if spec is None:
        return None
    path, text = spec
    try:
        if path.read_text(encoding="utf-8") != text:
            return None
    except (OSError, UnicodeDecodeError):
        return None
    if not dry_run:
        path.unlink()
        remove_made_dirs(path)  # commands/ (and .claude/) install made, left empty
    return str(path)
