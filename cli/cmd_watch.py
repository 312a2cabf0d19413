"""``earshot watch``: the daemon that makes a checkpoint cost what changed.

Not a ``project_command``: the daemon must not hold the store open (gc and
compact need it to themselves), and ``--status``/``--stop`` need no store.
"""

from __future__ import annotations

import os
import sys

import click

from earshot.agent.watch import client as watch_client
from earshot.cas.errors import EarshotError

from . import render, render_watch
from .common import DAEMON, configure_logging, discovered, error_kind, fail, root_option


@click.command()
@root_option("The working tree to watch.")
@click.option("--foreground", is_flag=True, help="Run in this process, logging to stderr.")
@click.option("--stop", is_flag=True, help="Stop the root's watch daemon.")
@click.option("--status", is_flag=True, help="Show what the daemon watches, its token and gaps.")
@click.option(
    "--list",
    "list_all",
    is_flag=True,
    help="List every running daemon of this data directory (root, pid, memory).",
)
@click.option("--all", "every", is_flag=True, help="With --stop: stop every daemon.")
@click.option(
    "--idle-timeout",
    type=click.FloatRange(min=0.1),
    default=watch_client.DEFAULT_IDLE_S,
    show_default=True,
    metavar="SECONDS",
    help="Exit after this long without a request.",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document on stdout.")
@click.option("-v", "--verbose", count=True, help="Log to stderr (-vv for debug).")
def watch(
    root: str | None,
    foreground: bool,
    stop: bool,
    status: bool,
    list_all: bool,
    every: bool,
    idle_timeout: float,
    as_json: bool,
    verbose: int,
) -> None:
    """Watch the root so each checkpoint costs what changed, not the tree's size.

    Starts a background daemon (one per root, Linux inotify) that tells
    earshot which paths changed since the last checkpoint, so a shell
    command's changes are recorded exactly, attributed to it, on a tree of
    any size. A second start finds the first. It exits after --idle-timeout
    without a request. Commands start it on their own when $EARSHOT_WATCH is
    `always`, or `auto` (the default) on a root whose full restage costs
    more than the restage budget; `never` never starts one.
    """
    configure_logging(verbose)
    if sum((foreground, stop, status, list_all)) > 1:
        raise click.UsageError("give at most one of --foreground, --stop, --status, --list")
    if every and not stop:
        raise click.UsageError("--all goes with --stop")
    if list_all or every:
        if every:
            stopped = [
                (item.paths.root, watch_client.stop_daemon(item.paths))
                for item in watch_client.running_daemons()
            ]
            doc, text = render_watch.stopped_all(stopped)
        else:
            doc, text = render_watch.listed(watch_client.running_daemons())
        render.emit(doc, text, as_json)
        return
    try:
        root = discovered(root)
    except EarshotError as exc:
        fail(str(exc), exc.exit_code, error_kind(exc))
    if not os.path.isdir(root):
        fail(f"{root}: no such directory (give --root an existing directory)")
    if not sys.platform.startswith("linux"):
        fail("earshot watch needs Linux (inotify); checkpoints fall back to full restages")
    paths = watch_client.daemon_paths(root)
    if status:
        doc, text = render_watch.status(paths.root, watch_client.daemon_status(paths))
    elif stop:
        doc, text = render_watch.stopped(paths.root, watch_client.stop_daemon(paths))
    elif foreground:
        from earshot.agent.watch.daemon import run_foreground

        from .daemon import hosting

        ran = run_foreground(paths.root, paths.home, idle_timeout, host=hosting)
        if ran == watch_client.ALREADY_RUNNING:
            pid = watch_client.daemon_pid(paths)
            doc, text = render_watch.started(paths.root, pid, True, str(paths.log))
        else:
            doc, text = {"root": paths.root, "running": False}, ""
    else:
        pid = watch_client.daemon_pid(paths)
        already = pid is not None
        if not already:
            pid, ready = watch_client.start_daemon(paths, idle_timeout, wait=120.0, module=DAEMON)
            if pid is None or not ready:
                fail(f"the watch daemon did not start; see {paths.log}")
        doc, text = render_watch.started(paths.root, pid, already, str(paths.log))
    render.emit(doc, text, as_json)
