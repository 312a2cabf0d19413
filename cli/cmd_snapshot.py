"""``earshot snapshot`` and ``earshot snapshots``."""

from __future__ import annotations

import time

import click

from earshot.cas.project import Project

from . import render
from .common import list_option, project_command, project_reader, tracker
from .progress import progress_for
from .readonly import unless_recorded


@click.command()
@click.argument("paths", metavar="[PATH]...", nargs=-1)
@click.option("-m", "--message", default="", help="A note stored with the snapshot.")
@list_option
@project_command
def snapshot(
    project: Project, as_json: bool, message: str, paths: tuple[str, ...], every: bool
) -> None:
    """Record the root as a snapshot and print its id.

    Unchanged files are not read again (stat cache). With no change since the
    last snapshot, says so and reuses it. While the root's watch daemon has
    watched since the last recorded state, only what it saw change is re-read
    ("vouched": true in --json); otherwise the tree is walked. Given PATHs
    (relative to the root), only those are re-read, on top of the last
    snapshot: a scoped restage that does not walk the tree.
    """
    from earshot.agent.core.vouched import record_now

    start = time.perf_counter()
    with progress_for(as_json) as progress:
        if paths:
            rec, vouched = project.record(list(paths), note=message, progress=progress), False
        else:
            rec, vouched = record_now(project, tracker(project), message, progress=progress)
    doc, text = render.recorded(rec, time.perf_counter() - start, every)
    doc["vouched"] = vouched
    render.emit(doc, text, as_json)


def _no_snapshots(as_json: bool, **options: object) -> None:
    render.emit(*render.snapshot_list([]), as_json)


@click.command()
@unless_recorded(_no_snapshots)
@project_reader
def snapshots(project: Project, as_json: bool) -> None:
    """List the snapshots of the root, newest first."""
    doc, text = render.snapshot_list(project.snapshots())
    render.emit(doc, text, as_json)
