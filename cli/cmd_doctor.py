"""``earshot doctor [AGENT]``: is earshot recording, and if not, what to do.

Runs each check of ``doctor_checks`` and prints one line per check (and a
``fix:`` line under each that is not ok), or one JSON document. Exit 0 when
nothing failed (warnings included), 1 when something did.
"""

from __future__ import annotations

import os

import click

from earshot.agent.hooks import quick

from . import render
from .common import configure_logging, discovered, error_kind, fail
from .doctor_checks import FAILED, OK, WARNING, Check, hook_checks


def agent_checks(agents: tuple[str, ...], root: str) -> list[Check]:
    """The hook checks of ``agents``; with none named, of every agent installed,
    and a warning when there is none."""
    named = bool(agents)
    checks: list[Check] = []
    for agent in agents or quick.AGENTS:
        found = hook_checks(agent, root)
        if not found and not named:
            continue
        if not found:
            found = [
                Check(
                    f"{agent} hooks",
                    FAILED,
                    f"earshot's hooks are not in {agent}'s settings here or in your own",
                    f"earshot install {agent}",
                )
            ]
        checks += found
    if not checks:
        checks.append(
            Check(
                "hooks",
                WARNING,
                "no agent's settings hold earshot's hooks: nothing an agent does is recorded",
                "earshot install claude (or codex, gemini)",
            )
        )
    return checks


def all_checks(agents: tuple[str, ...], root: str) -> list[Check]:
    from .doctor_checks import daemon_check, disk_check, inotify_check, store_check

    checks = agent_checks(agents, root)
    daemon, status = daemon_check(root)
    checks += [daemon, inotify_check(root, status), store_check(root), disk_check(root)]
    return checks


_MARK = {OK: "ok     ", WARNING: "warning", FAILED: "FAILED "}


def check_lines(checks: list[Check]) -> list[str]:
    lines = []
    for check in checks:
        lines.append(f"{_MARK[check.status]} {check.name}: {check.detail}")
        if check.status != OK and check.fix:
            lines.append(f"        fix: {check.fix}")
    return lines


def check_docs(checks: list[Check]) -> list[dict[str, str | None]]:
    return [{"name": c.name, "status": c.status, "detail": c.detail, "fix": c.fix} for c in checks]


@click.command()
@click.argument("agents", nargs=-1, type=click.Choice(quick.AGENTS))
@click.option(
    "--root",
    type=click.Path(file_okay=False, path_type=str),
    default=None,
    help="The project (default: the current directory's root).",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document on stdout.")
def doctor(agents: tuple[str, ...], root: str | None, as_json: bool) -> None:
    """Check that earshot records what the agents do here, and say how to fix what is not so.

    For each agent whose settings hold earshot's hooks (or the AGENTS named):
    its hook command is run as the agent runs it, fed a probe event that
    records nothing; Codex's trust of the hooks and of the project is read.
    Then: the root's watch daemon answers; the inotify limits fit the tree;
    the store passes 'earshot fsck --quick'; there is free disk space.

    \b
    Exit codes: 0 every check ok (or only warnings); 1 a check failed;
    2 usage.
    """
    configure_logging(0)
    from earshot.cas.errors import EarshotError

    try:
        root = discovered(root)
    except EarshotError as exc:
        fail(str(exc), exc.exit_code, error_kind(exc))
    if not os.path.isdir(root):
        fail(f"{root}: no such directory (give --root an existing directory)")
    checks = all_checks(agents, root)
    failed = [c for c in checks if c.status == FAILED]
    doc = {"root": os.path.realpath(root), "ok": not failed, "checks": check_docs(checks)}
    render.emit(doc, "\n".join(check_lines(checks)), as_json)
    if failed:
        raise SystemExit(1)
