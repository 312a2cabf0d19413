"""``earshot forget``, ``gc``, ``fsck`` and ``stats``: keeping the store small and sound."""

from __future__ import annotations

import click

from earshot.cas.project import Project

from . import render
from .common import Progress, fail, project_command, project_reader
from .readonly import unless_recorded


@click.command()
@click.argument("snapshot_ids", metavar="SNAPSHOT...", nargs=-1, required=True)
@project_command
def forget(project: Project, as_json: bool, snapshot_ids: tuple[str, ...]) -> None:
    """Unlist snapshots; their data goes at the next 'earshot gc'."""
    digests = [project.resolve(s) for s in snapshot_ids]
    count = project.forget(digests)
    render.emit({"forgotten": [d.hex() for d in digests]}, f"forgot {count} snapshots", as_json)


@click.command()
@click.option("--compact", is_flag=True, help="Also rewrite the store file to its live size.")
@project_command
def gc(project: Project, as_json: bool, compact: bool) -> None:
    """Drop every object no snapshot or kept session needs, and repack the rest.

    Sessions beyond the 20 most recently touched lose their checkpoint
    history first (their conversation logs stay). Needs the store to itself:
    fails if another earshot process has it open.
    """
    from earshot.agent.core.sessions import collect

    doc, text = render.gc_report(collect(project, compact=compact))
    render.emit(doc, text, as_json)


def _nothing_to_check(as_json: bool, **options: object) -> None:
    render.emit(*render.fsck_empty(), as_json)


def _no_stats(as_json: bool, **options: object) -> None:
    render.emit(*render.stats_empty(), as_json)


@click.command()
@unless_recorded(_nothing_to_check)
@click.option(
    "--repair",
    is_flag=True,
    help="Drop stat-cache records that name missing objects (a cache: nothing is lost), "
    "and set damaged intents aside (kept as files in the store's intents/ directory).",
)
@project_reader
def fsck(project: Project, as_json: bool, repair: bool) -> None:
    """Read every object, verify it against its digest, and check every reference.

    Also checks every batch and session record (each is sealed with a digest)
    and the stat cache. Exits 1 and lists the problems when anything is broken.
    """
    from earshot.agent.core.records import check_records
    from earshot.cas.fsck import drop_stale_cache

    progress = Progress("checking", enabled=True)
    report = project.fsck(progress)
    progress.done()
    with project.store.backend.read() as view:
        records, problems = check_records(view)
    report.problems.extend(problems)
    if repair and report.stale_cache:
        dropped = drop_stale_cache(project.store, report.stale_cache)
        report.problems = [p for p in report.problems if not p.startswith("stat cache of ")]
        click.echo(
            f"earshot: dropped {dropped} stat-cache records naming missing objects", err=True
        )
    if repair and report.damaged_intents:
        aside = project.intents.set_aside()
        report.problems = [p for p in report.problems if not p.startswith("intent ")]
        click.echo(
            f"earshot: set {len(aside)} damaged intents aside "
            f"(in {project.store_dir / 'intents'}); what they changed is recorded by "
            "the next snapshot, outside any batch",
            err=True,
        )
    doc, text = render.fsck_report(report, records)
    render.emit(doc, text, as_json)
    if not report.ok:
        fail(f"the store has {len(report.problems)} problems (listed on stdout)")


@click.command()
@unless_recorded(_no_stats)
@project_reader
def stats(project: Project, as_json: bool) -> None:
    """Objects, bytes of content, bytes stored and on disk, dedup and compression."""
    doc, text = render.stats_report(project.stats())
    render.emit(doc, text, as_json)
