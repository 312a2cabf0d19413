"""``earshot install AGENT`` and ``earshot uninstall AGENT``: earshot's hooks in an
agent's own settings.

The settings file is read, earshot's entries are added (or taken out) and
nothing else is touched (``earshot.agent.hooks.settings``); the file is
written whole (a temp file renamed over it) after a copy of it is kept as
``FILE.bak-TIME``. Running either twice changes nothing the second time.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click

from earshot.agent.hooks import quick
from earshot.agent.hooks.settings import (
    AGENT_TIMEOUT_S,
    EVENTS,
    HookCommand,
    add_hooks,
    command_file,
    installed,
    remove_hooks,
    settings_file,
)
from earshot.cas.errors import EarshotError

from . import render
from .common import configure_logging, error_kind, fail
from .install_files import (
    Settings,
    forget_hooks_config,
    remember_hooks_config,
    restore_hooks_config,
    trust_plan,
    turns_on_hooks,
    untrust_plan,
    write_config,
)
from .settings_io import PartlyWritten, SettingsError, leads_out

_NAMES = {"claude": "Claude Code", "codex": "Codex CLI", "gemini": "Gemini CLI"}


def _program(given: str | None) -> tuple[str, ...]:
    """What the agent runs: the given command, else this interpreter with earshot's
    ``__main__.py`` by its path (a console script costs each event ~6 ms more)."""
    if given:
        return (given,)
    main = Path(__file__).with_name("__main__.py")
    return (os.path.abspath(sys.executable), str(main.resolve()))


@contextlib.contextmanager
def _in_one_line() -> Iterator[None]:
    """earshot's errors as one line and their exit code (nothing was written)."""
    try:
        yield
    except EarshotError as exc:
        fail(str(exc), exc.exit_code, error_kind(exc))


@contextlib.contextmanager
def _after(written: Settings | None) -> Iterator[None]:
    """A write after ``written`` (the settings file, if it was): one that
    fails says the settings file was written."""
    try:
        yield
    except SettingsError as exc:
        if written is None:
            raise
        raise PartlyWritten(exc, written.path) from None


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


def _command_file(agent: str, user: bool, root: str) -> tuple[Path, str] | None:
    """The agent's ``/earshot`` command file and its text; None where the agent
    has none, or where a linked directory would take it out of the project."""
    spec = command_file(
        agent, "user" if user else "project", os.path.realpath(root), os.path.expanduser("~")
    )
    if spec is None:
        return None
    path = Path(spec[0])
    if not user and (out := leads_out(path, Path(root))) is not None:
        click.echo(f"earshot: {path}: leads out of the project (to {out}); not written", err=True)
        return None
    return path, spec[1]


def _put_command(spec: tuple[Path, str] | None, dry_run: bool) -> tuple[str | None, str | None]:
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
            path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                out.write(text)
        except OSError as exc:  # the hooks are in: say so, and go on without /earshot
            where = exc.filename or path
            click.echo(
                f"earshot: {where}: cannot write the /earshot command ({exc.strerror})", err=True
            )
            return None, None
    return str(path), None


def _drop_command(spec: tuple[Path, str] | None, dry_run: bool) -> str | None:
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
    return str(path)


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
    "--trust",
    is_flag=True,
    help="Codex only: mark earshot's hooks trusted in $CODEX_HOME/config.toml, as "
    "trusting them in Codex's /hooks would ('codex exec' skips hooks not trusted).",
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
    trust: bool,
    program: str | None,
) -> None:
    """Put earshot's hooks into AGENT's settings (claude, codex or gemini).

    Every tool call the agent makes is then recorded, one batch per model
    response (Codex: per turn), so 'earshot undo', 'redo' and
    'rewind N --code' work on what it did, shell commands included. Every
    other setting and hook is kept; a backup of the file is kept beside it.
    """
    configure_logging(0)
    if trust and agent != "codex":
        fail("--trust is for codex: the other agents run the hooks in their settings")
    # Everything is read and checked before anything is written.
    with _in_one_line():
        settings = Settings.read(_target(agent, user, root), None if user else Path(root))
        command = HookCommand(_program(program), agent, strict)
        new = add_hooks(settings.doc, command)
        hooks_changed = new != settings.doc
        config = trust_plan(settings.real, new) if trust else None
        backup = None
        if hooks_changed and not dry_run:
            # The note first: a settings file written without it could never
            # be given its switch back.
            remember_hooks_config(agent, settings, new)
            backup = settings.write(new)
        wrote, kept = _put_command(_command_file(agent, user, root), dry_run)
        trusted = None
        if config is not None:
            trusted = str(config[0].path)
            if not dry_run:
                with _after(settings if hooks_changed else None):
                    write_config(config)
        changed = hooks_changed or wrote is not None or bool(trusted)
        events = [event for event, _ in EVENTS[agent]]
        path = settings.path
        result = {
            "agent": agent,
            "file": str(path),
            "changed": changed,
            "dry_run": dry_run,
            "backup": backup,
            "command": command.line(),
            "events": events,
            "timeout_s": AGENT_TIMEOUT_S,
            "slash_command": wrote,
            "slash_command_kept": kept,
            "trusted": trusted,
        }
        name = _NAMES[agent]
        verb = "would add" if dry_run else "added"
        if not hooks_changed:
            lines = [f"earshot's hooks are already in {path}"]
        else:
            lines = [f"{verb} earshot's hooks to {path} ({name}):"]
            lines += [f"  {event}: {command.line()}" for event in events]
            if turns_on_hooks(agent, settings.doc, new):
                lines.append(
                    "  and hooksConfig.enabled, which was off: the other hooks there run too "
                    "('earshot uninstall gemini' turns it off again)"
                )
            if backup:
                lines.append(f"the file as it was is kept as {backup}")
        if wrote:
            lines.append(f"{verb} the command /earshot ({wrote})")
        if kept:
            lines.append(f"left {kept} as it is: it is not earshot's")
        if trusted:
            lines.append(f"{'would trust' if dry_run else 'trusted'} them in {trusted}")
        lines.append("nothing changed" if not changed else _next_steps(agent, user))
        render.emit(result, "\n".join(lines), as_json)


def _next_steps(agent: str, user: bool) -> str:
    where = "in every project" if user else "in this project"
    inside = "'/earshot undo' (or the prompt 'earshot undo') inside it"
    steps = {
        "claude": f"Claude Code started {where} now records into earshot; {inside}",
        "codex": (
            f"Codex started {where} records into earshot once the new hooks are trusted "
            "(its start screen asks, /hooks in its TUI, or 'earshot install codex --trust'; "
            "'codex exec' skips hooks not trusted); the prompt 'earshot undo' inside it"
        ),
        "gemini": f"Gemini CLI started {where} now records into earshot; {inside}",
    }
    return steps[agent] + ", or 'earshot undo' in the project, takes the last batch back"


@click.command()
@click.argument("agent", type=click.Choice(quick.AGENTS))
@_options
def uninstall(agent: str, user: bool, root: str, dry_run: bool, as_json: bool) -> None:
    """Take earshot's hooks out of AGENT's settings, keeping everything else.

    What earshot recorded stays: 'earshot log' and 'earshot undo' still work
    on the batches already made.
    """
    configure_logging(0)
    with _in_one_line():
        settings = Settings.read(_target(agent, user, root), None if user else Path(root))
        doc = settings.doc
        found = installed(doc, agent)
        plan = untrust_plan(settings.real, doc) if agent == "codex" else None
        untrusted = None if plan is None else str(plan[0].path)
        new = remove_hooks(doc, agent)
        switched = restore_hooks_config(agent, settings, new) if found else False
        hooks_changed = new != doc
        backup = settings.write(new) if hooks_changed and not dry_run else None
        # The settings file first, then what depends on it: a failure there
        # leaves the note and the trust in place for the next try.
        if not dry_run:
            with _after(settings if hooks_changed else None):
                if switched:
                    forget_hooks_config(settings)
                if plan is not None:
                    write_config(plan)
        dropped = _drop_command(_command_file(agent, user, root), dry_run)
        changed = hooks_changed or dropped is not None or untrusted is not None
        path = settings.path
        result = {
            "agent": agent,
            "file": str(path),
            "changed": changed,
            "dry_run": dry_run,
            "backup": backup,
            "events": found,
            "slash_command": dropped,
            "untrusted": untrusted,
        }
        verb = "would remove" if dry_run else "removed"
        lines = []
        if hooks_changed:
            lines.append(f"{verb} earshot's hooks from {path}: {', '.join(found)}")
            if switched:
                lines.append("  and gave hooksConfig.enabled back the value it had before install")
            if backup:
                lines.append(f"the file as it was is kept as {backup}")
        if untrusted:
            lines.append(f"{verb} their trust entries from {untrusted}")
        if dropped:
            lines.append(f"{verb} the command /earshot ({dropped})")
        if not changed:
            lines.append(f"no earshot hooks in {path}; nothing changed")
        render.emit(result, "\n".join(lines), as_json)
