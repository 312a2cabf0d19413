"""``earshot restore``."""

from __future__ import annotations

import sys

import click

from earshot.cas.digest import short
from earshot.cas.project import Project
from earshot.cas.restore import delete_everything, keep_everything

from . import completion, render
from .common import EXIT_SKIPPED, list_option, project_command, tracker
from .progress import progress_for


@click.command()
@click.argument("snapshot_id", metavar="SNAPSHOT", shell_complete=completion.snapshot_ids)
@click.option("--dry-run", is_flag=True, help="Show what would be written, deleted and skipped.")
@click.option(
    "--force",
    is_flag=True,
    help="Mirror the snapshot exactly: also delete files it does not have.",
)
@list_option
@project_command
def restore(
    project: Project, as_json: bool, snapshot_id: str, dry_run: bool, force: bool, every: bool
) -> None:
    """Bring the root back to SNAPSHOT (full id or a unique prefix, 8+ hex digits).

    The current state is recorded first, so a restore can itself be undone.
    Without --force, files the snapshot lacks are kept and reported, never
    deleted. Ignored files, .git and files too large to record are never touched.
    Exits 3 when some paths were skipped.
    """
    from earshot.agent.core.vouched import mark_after, record_now

    target = project.resolve(snapshot_id)
    rule = delete_everything if force else keep_everything
    with progress_for(as_json) as progress:
        if dry_run:
            res = project.restore(target, may_delete=rule, dry_run=True, progress=progress)
        else:
            # While the watch daemon vouches, the state before is a scoped restage
            # of what it saw, not a walk; and the next call is vouched for again.
            watch = tracker(project)
            before, _ = record_now(
                project, watch, f"before restore to {short(target)}", progress=progress
            )
            res = project.restore(target, may_delete=rule, progress=progress, before=before)
            mark_after(project, watch)
    doc, text = render.restored(res, target, dry_run, every)
    render.emit(doc, text, as_json)
    if doc["skipped"]:
        sys.exit(EXIT_SKIPPED)
