"""``earshot install AGENT`` and ``earshot uninstall AGENT``: earshot's hooks in an
agent's own settings.

The settings file is read, earshot's entries are added (or taken out) and
nothing else is touched (``earshot.agent.hooks.settings``); the file is
written whole (a temp file renamed over it), the first time after a copy
of it is kept as ``FILE.earshot.bak`` (``settings_io``). Running either
twice changes nothing the second time. A command that does not run is
refused before anything is written, and install ends with ``earshot
doctor``'s checks of the agent.
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
    EVENTS,
    HookCommand,
    add_hooks,
    agent_timeout,
    installed,
    machine_specific,
    personal_file,
    remove_hooks,
    settings_file,
)
from earshot.cas.errors import EarshotError

from . import render
from .cmd_doctor import check_docs, check_lines
from .common import configure_logging, error_kind, fail
from .doctor_checks import hook_checks, kept_trust_line
from .install_commands import command_spec, drop_command, put_command
from .install_files import (
    Settings,
    codex_config_file,
    forget_hooks_config,
    kept_trust,
    remember_hooks_config,
    restore_hooks_config,
    trust_plan,
    turns_on_hooks,
    untrust_plan,
    write_config,
)
from .settings_io import PartlyWritten, SettingsError

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


def _targets(agent: str, user: bool, root: str, program: tuple[str, ...] | None) -> list[Path]:
    """The settings file earshot's hooks go to, then any other file of the scope
    they may be in from an earlier install. A command naming paths of this
    machine goes into the project's personal file where the agent has one
    (Claude Code's settings.local.json), else the shared one."""
    shared = _target(agent, user, root)
    personal = None if user else personal_file(agent, os.path.realpath(root))
    if personal is None:
        return [shared]
    if program is not None and not machine_specific(program):
        return [shared, Path(personal)]
    return [Path(personal), shared]


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
    help="Codex only: trust earshot's hooks in $CODEX_HOME/config.toml, as Codex's "
    "/hooks would, and (for a project's hooks) the project ('codex exec' skips hooks "
    "not trusted, and reads a project's hooks only in a trusted project).",
)
@click.option(
    "--command",
    "program",
    default=None,
    metavar="PATH",
    help="The earshot command the agent runs (default: this Python running earshot's "
    "cli/__main__.py, by absolute paths). It must run: it is tried first.",
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
    other setting and hook is kept; the file as it was before earshot is
    kept beside it (FILE.earshot.bak). Paths of this machine go into
    Claude Code's .claude/settings.local.json, not the shared settings.json.
    Ends with 'earshot doctor's checks of the agent.

    \b
    Exit codes: 0 installed; 1 nothing written (a settings file earshot
    cannot edit, a --command that does not run); 3 installed, but with
    --trust Codex's config says the project is not trusted (a setting of
    yours earshot leaves: one line says what to change by hand).
    """
    from .doctor_checks import FAILED, OK

    configure_logging(0)
    if trust and agent != "codex":
        fail("--trust is for codex: the other agents run the hooks in their settings")
    command = HookCommand(_program(program), agent, strict)
    probed: frozenset[str] = frozenset()
    if program is not None:
        from earshot.agent.hooks.probe import probe_failure

        line = command.line()
        why = probe_failure(line, agent, os.path.realpath(root))
        if why is not None:
            fail(f"--command {program} {why}; nothing was written", 1, "command_fails")
        probed = frozenset(command.line(event) for event, _ in EVENTS[agent])
    # Everything is read and checked before anything is written.
    with _in_one_line():
        inside = None if user else Path(root)
        target, *others = [
            Settings.read(p, inside) for p in _targets(agent, user, root, command.program)
        ]
        settings = target
        new = add_hooks(settings.doc, command)
        hooks_changed = new != settings.doc
        moved = [(o, remove_hooks(o.doc, agent)) for o in others if installed(o.doc, agent)]
        project = None if user else os.path.realpath(root)
        config = trust_plan(settings.real, new, project) if trust else None
        trust_kept = kept_trust(project) if trust else None
        backup = None
        if hooks_changed and not dry_run:
            # The note first: a settings file written without it could never
            # be given its switch back.
            remember_hooks_config(agent, settings, new)
            backup = settings.write(new)
        if not dry_run:
            for other, without in moved:
                with _after(settings if hooks_changed else None):
                    other.write(without)
        wrote, kept = put_command(command_spec(agent, user, root), dry_run)
        in_place = wrote is not None or _command_in_place(agent, user, root)
        trusted = None
        if config is not None:
            trusted = str(config[0].path)
            if not dry_run:
                with _after(settings if hooks_changed else None):
                    write_config(config, adding=True)
        changed = hooks_changed or bool(moved) or wrote is not None or bool(trusted)
        events = [event for event, _ in EVENTS[agent]]
        path = settings.path
        checks = [] if dry_run else hook_checks(agent, root, probed, user)
        result = {
            "agent": agent,
            "file": str(path),
            "changed": changed,
            "dry_run": dry_run,
            "backup": backup,
            "command": command.line(),
            "events": events,
            "timeout_s": {event: agent_timeout(agent, event) for event in events},
            "slash_command": wrote,
            "slash_command_kept": kept,
            "trusted": trusted,
            "project_trust_kept": trust_kept,
            "moved_from": [str(o.path) for o, _ in moved],
            "checks": check_docs(checks),
        }
        name = _NAMES[agent]
        verb = "would add" if dry_run else "added"
        if not hooks_changed:
            lines = [f"earshot's hooks are already in {path}"]
        else:
            lines = [f"{verb} earshot's hooks to {path} ({name}):"]
            lines += [f"  {event}: {command.line(event)}" for event in events]
            if turns_on_hooks(agent, settings.doc, new):
                lines.append(
                    "  and hooksConfig.enabled, which was off: the other hooks there run too "
                    "('earshot uninstall gemini' turns it off again)"
                )
            if backup:
                lines.append(f"the file as it was is kept as {backup}")
        for other, _ in moved:
            verb_moved = "would take" if dry_run else "took"
            lines.append(f"{verb_moved} earshot's hooks out of {other.path} (they are here now)")
        if not user and machine_specific(command.program) and personal_file(agent, root) is None:
            lines.append(
                f"note: {path} now names paths of this machine ({command.program[0]}): keep it "
                "out of version control, or install with --user or --command earshot"
            )
        if wrote:
            lines.append(f"{verb} the command /earshot ({wrote})")
        if kept:
            lines.append(f"left {kept} as it is: it is not earshot's")
        if trusted:
            lines.append(f"{'would trust' if dry_run else 'trusted'} them in {trusted}")
            if config is not None and config[2] is not None:
                lines.append(
                    f"  and the project {config[2]}, whose own hooks Codex reads only then"
                )
        if trust_kept is not None and project is not None and dry_run:
            lines.append(kept_trust_line(codex_config_file(), project, trust_kept))
        failed = [c for c in checks if c.status == FAILED]
        lines += check_lines([c for c in checks if c.status != OK])
        if failed or trust_kept is not None:
            lines.append(f"{name} records nothing here until this is fixed")
        elif changed:
            lines.append(_next_steps(agent, user, in_place))
        else:
            lines.append("nothing changed")
        render.emit(result, "\n".join(lines), as_json)
    if trust_kept is not None:
        raise SystemExit(3)


def _command_in_place(agent: str, user: bool, root: str) -> bool:
    spec = command_spec(agent, user, root)
    if spec is None:
        return False
    try:
        return spec[0].read_text(encoding="utf-8") == spec[1]
    except (OSError, UnicodeDecodeError):
        return False


def _next_steps(agent: str, user: bool, slash: bool) -> str:
    where = "in every project" if user else "in this project"
    inside = (
        "'/earshot undo' (or the prompt 'earshot undo') inside it"
        if slash
        else "the prompt 'earshot undo' inside it"
    )
    steps = {
        "claude": f"Claude Code started {where} now records into earshot; {inside}",
        "codex": f"Codex started {where} now records into earshot; {inside}",
        "gemini": f"Gemini CLI started {where} now records into earshot; {inside}",
    }
    return steps[agent] + ", or 'earshot undo' in the project, takes the last batch back"


@click.command()
@click.argument("agent", type=click.Choice(quick.AGENTS))
@_options
def uninstall(agent: str, user: bool, root: str, dry_run: bool, as_json: bool) -> None:
    """Take earshot's hooks out of AGENT's settings, keeping everything else.

    What earshot recorded stays: 'earshot log' and 'earshot undo' still work
    on the batches already made. A file left as it was before install gets
    its own bytes back (and its backup goes); a file install created, and
    left empty, is removed.
    """
    configure_logging(0)
    with _in_one_line():
        inside = None if user else Path(root)
        files = [Settings.read(p, inside) for p in _targets(agent, user, root, None)]
        project = None if user else os.path.realpath(root)
        lines: list[str] = []
        found_all: list[str] = []
        untrusted = None
        backup = None
        written: Settings | None = None
        verb = "would remove" if dry_run else "removed"
        for settings in files:
            doc = settings.doc
            found = installed(doc, agent)
            plan = untrust_plan(settings.real, doc, project) if agent == "codex" else None
            new = remove_hooks(doc, agent)
            switched = restore_hooks_config(agent, settings, new) if found else False
            if new == doc and plan is None:
                continue
            if new != doc:
                found_all += [e for e in found if e not in found_all]
                if not dry_run:
                    with _after(written):
                        backup = settings.write(new) or backup
                    written = settings
                lines.append(f"{verb} earshot's hooks from {settings.path}: {', '.join(found)}")
                if switched:
                    lines.append(
                        "  and gave hooksConfig.enabled back the value it had before install"
                    )
            # The settings file first, then what depends on it: a failure there
            # leaves the note and the trust in place for the next try.
            if not dry_run:
                with _after(written):
                    if switched:
                        forget_hooks_config(settings)
                    if plan is not None:
                        write_config(plan, adding=False)
            if plan is not None:
                untrusted = str(plan[0].path)
                lines.append(f"{verb} their trust entries from {untrusted}")
                if plan[2] is not None:
                    lines.append(f"  and the trust of the project {plan[2]}, which install added")
        dropped = drop_command(command_spec(agent, user, root), dry_run)
        if dropped:
            lines.append(f"{verb} the command /earshot ({dropped})")
        changed = bool(lines)
        path = files[0].path
        if not changed:
            lines.append(f"no earshot hooks in {path}; nothing changed")
        result = {
            "agent": agent,
            "file": str(path),
            "changed": changed,
            "dry_run": dry_run,
            "backup": backup,
            "events": found_all,
            "slash_command": dropped,
            "untrusted": untrusted,
        }
        render.emit(result, "\n".join(lines), as_json)
