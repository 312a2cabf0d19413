"""``earshot install AGENT`` and ``earshot uninstall AGENT``: earshot's hooks in an
agent's own settings.

The settings file is read, earshot's entries are added (or taken out) and
nothing else is touched (``earshot.agent.hooks.settings``); the file is
written whole (a temp file renamed over it) after a copy of it is kept as
``FILE.bak-TIME``. Running either twice changes nothing the second time.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import click

from earshot.agent.hooks import quick
from earshot.agent.hooks.settings import (
    AGENT_TIMEOUT_S,
    EVENTS,
    HookCommand,
    add_hooks,
    installed,
    remove_hooks,
    settings_file,
)

from . import render
from .common import configure_logging, fail

_NAMES = {"claude": "Claude Code", "codex": "Codex CLI", "gemini": "Gemini CLI"}


def _program(given: str | None) -> tuple[str, ...]:
    """What the agent runs: the given command, else this interpreter with earshot's
    ``__main__.py`` by its path (a console script costs each event ~6 ms more)."""
    if given:
        return (given,)
    main = Path(__file__).with_name("__main__.py")
    return (os.path.abspath(sys.executable), str(main.resolve()))


def _read(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError) as exc:
        fail(f"{path}: cannot read it ({exc}); nothing was written")
    if not text.strip():
        return {}
    try:
        doc = json.loads(text)
    except ValueError as exc:
        fail(f"{path}: not JSON ({exc}); fix it or move it away, nothing was written")
    if not isinstance(doc, dict):
        fail(f"{path}: not a JSON object; fix it or move it away, nothing was written")
    return dict(doc)


def _write(path: Path, doc: dict[str, Any]) -> str | None:
    """Write ``doc`` to ``path`` through a temp file; return the backup kept, if any."""
    path.parent.mkdir(parents=True, exist_ok=True)
    backup = None
    mode = 0o644
    if path.exists():
        stamp = time.strftime("%Y%m%d-%H%M%S")
        backup = f"{path}.bak-{stamp}"
        shutil.copy2(path, backup)
        mode = path.stat().st_mode & 0o7777
    temp = path.with_name(f".{path.name}.earshot-tmp-{os.getpid()}")
    try:
        with open(temp, "w", encoding="utf-8") as out:
            out.write(json.dumps(doc, indent=2, ensure_ascii=False) + "\n")
            out.flush()
            os.fsync(out.fileno())
        os.chmod(temp, mode)
        os.replace(temp, path)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise
    return backup


def _target(agent: str, user: bool, root: str) -> Path:
    return Path(
        settings_file(
            agent,
            "user" if user else "project",
            os.path.realpath(root),
            os.path.expanduser("~"),
            os.environ.get("CODEX_HOME"),
        )
    )


_SCOPE = [
    click.option(
        "--user/--project",
        "user",
        default=False,
        help="The agent's own settings, for every project; or the project's (in --root; "
        "the default).",
    ),
    click.option(
        "--root",
        type=click.Path(file_okay=False, path_type=str),
        default=".",
        show_default="the current directory",
        help="The project.",
    ),
    click.option("--dry-run", is_flag=True, help="Show what would change; write nothing."),
    click.option("--json", "as_json", is_flag=True, help="Print one JSON document on stdout."),
]


def _options(func: Any) -> Any:
    for option in reversed(_SCOPE):
        func = option(func)
    return func


@click.command()
@click.argument("agent", type=click.Choice(quick.AGENTS))
@_options
@click.option(
    "--strict",
    is_flag=True,
    help="Refuse a tool call whose state before earshot cannot record (the model is "
    "told why), instead of letting it run unrecorded.",
)
@click.option(
    "--command",
    "program",
    default=None,
    metavar="PATH",
    help="The earshot command the agent runs (default: this Python running earshot's "
    "cli/__main__.py, by absolute paths).",
)
def install(
    agent: str,
    user: bool,
    root: str,
    dry_run: bool,
    as_json: bool,
    strict: bool,
    program: str | None,
) -> None:
    """Put earshot's hooks into AGENT's settings (claude, codex or gemini).

    Every tool call the agent makes is then recorded, one batch per model
    response (Codex: per turn), so 'earshot undo', 'redo' and
    'rewind N --code' work on what it did, shell commands included. Every
    other setting and hook is kept; a backup of the file is kept beside it.
    """
    configure_logging(0)
    path = _target(agent, user, root)
    doc = _read(path)
    command = HookCommand(_program(program), agent, strict)
    new = add_hooks(doc, command)
    changed = new != doc
    backup = _write(path, new) if changed and not dry_run else None
    events = [event for event, _ in EVENTS[agent]]
    result = {
        "agent": agent,
        "file": str(path),
        "changed": changed,
        "dry_run": dry_run,
        "backup": backup,
        "command": command.line(),
        "events": events,
        "timeout_s": AGENT_TIMEOUT_S,
    }
    name = _NAMES[agent]
    if not changed:
        text = f"earshot's hooks are already in {path}; nothing changed"
    else:
        verb = "would add" if dry_run else "added"
        lines = [f"{verb} earshot's hooks to {path} ({name}):"]
        lines += [f"  {event}: {command.line()}" for event in events]
        if backup:
            lines.append(f"the file as it was is kept as {backup}")
        lines.append(_next_steps(agent, user))
        text = "\n".join(lines)
    render.emit(result, text, as_json)


def _next_steps(agent: str, user: bool) -> str:
    where = "in every project" if user else "in this project"
    steps = {
        "claude": f"Claude Code started {where} now records into earshot",
        "codex": f"Codex asks you to trust new hooks once (/hooks in its TUI) {where}",
        "gemini": f"Gemini CLI started {where} now records into earshot",
    }
    return steps[agent] + "; 'earshot log' and 'earshot undo' work on its batches"


@click.command()
@click.argument("agent", type=click.Choice(quick.AGENTS))
@_options
def uninstall(agent: str, user: bool, root: str, dry_run: bool, as_json: bool) -> None:
    """Take earshot's hooks out of AGENT's settings, keeping everything else.

    What earshot recorded stays: 'earshot log' and 'earshot undo' still work
    on the batches already made.
    """
    configure_logging(0)
    path = _target(agent, user, root)
    doc = _read(path)
    found = installed(doc, agent)
    new = remove_hooks(doc, agent)
    changed = new != doc
    backup = _write(path, new) if changed and not dry_run else None
    result = {
        "agent": agent,
        "file": str(path),
        "changed": changed,
        "dry_run": dry_run,
        "backup": backup,
        "events": found,
    }
    if not changed:
        text = f"no earshot hooks in {path}; nothing changed"
    else:
        verb = "would remove" if dry_run else "removed"
        text = f"{verb} earshot's hooks from {path}: {', '.join(found)}"
        if backup:
            text += f"\nthe file as it was is kept as {backup}"
    render.emit(result, text, as_json)
