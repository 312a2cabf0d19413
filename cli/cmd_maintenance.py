"""``forget``, ``gc``, ``fsck``, ``stats`` and ``purge``: keeping the store small and sound."""

from __future__ import annotations

import contextlib
import fcntl
import functools
import os
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from earshot.cas.project import Project

from . import completion, render
from .cmd_remote import check_remote, or_remote, prune_remote
from .common import (
    configure_logging,
    discovered,
    error_kind,
    fail,
    project_command,
    project_reader,
    root_option,
)
from .progress import progress_for
from .readonly import unless_recorded
from .render import human_bytes

F = TypeVar("F", bound=Callable[..., Any])


@click.command()
@click.argument(
    "snapshot_ids",
    metavar="SNAPSHOT...",
    nargs=-1,
    required=True,
    shell_complete=completion.snapshot_ids,
)
@project_command
def forget(project: Project, as_json: bool, snapshot_ids: tuple[str, ...]) -> None:
    """Unlist snapshots; their data goes at the next 'earshot gc'."""
    digests = [project.resolve(s) for s in snapshot_ids]
    count = project.forget(digests)
    render.emit({"forgotten": [d.hex() for d in digests]}, f"forgot {count} snapshots", as_json)


def _grace_option(func: F) -> F:
    return click.option(
        "--grace",
        "remote_grace",
        type=click.FloatRange(min=0),
        metavar="SECONDS",
        help="With --remote: keep packs younger than this (default 3600: a push "
        "still sending may not have named them yet).",
    )(func)


@click.command()
@or_remote(prune_remote, _grace_option)
@click.option("--compact", is_flag=True, help="Also rewrite the store file to its live size.")
@project_command
def gc(project: Project, as_json: bool, compact: bool) -> None:
    """Drop every object no snapshot or kept session needs, and repack the rest.

    Sessions beyond the 20 most recently touched lose their checkpoint
    history first (their conversation logs stay). Needs the store to itself:
    fails if another earshot process has it open.
    """
    from earshot.agent.core.sessions import collect

    with progress_for(as_json) as progress:
        report = collect(project, compact=compact, progress=progress)
    doc, text = render.gc_report(report)
    render.emit(doc, text, as_json)


def _nothing_to_check(as_json: bool, **options: object) -> None:
    render.emit(*render.fsck_empty(), as_json)


def _no_stats(as_json: bool, **options: object) -> None:
    render.emit(*render.stats_empty(), as_json)


def _pages_first(func: F) -> F:
    """Below ``unless_recorded``: the store's pages are checked without LMDB before
    it is opened, since LMDB may abort the process on a page it trusts."""

    @functools.wraps(func)
    def wrapper(**options: Any) -> Any:
        from earshot.cas.lmdb_backend import damaged_pages
        from earshot.cas.paths import checkpoints_dir

        store = checkpoints_dir(options["root"])
        found = damaged_pages(store) if os.path.isdir(options["root"]) else None
        if found:
            more = f", and {len(found) - 1} more" if len(found) > 1 else ""
            fail(
                f"store {store}: damaged pages, which LMDB cannot read safely ({found[0]}{more}); "
                f"nothing was changed. Move {store} aside and earshot starts a new store",
                1,
                "store_damaged",
            )
        return func(**options)

    return wrapper  # type: ignore[return-value]


@click.command()
@or_remote(check_remote)
@unless_recorded(_nothing_to_check)
@_pages_first
@click.option(
    "--repair",
    is_flag=True,
    help="Drop stat-cache records that name missing objects (a cache: nothing is lost), "
    "and set damaged intents aside (kept as files in the store's intents/ directory).",
)
@click.option(
    "--quick",
    is_flag=True,
    help="Check the records and that every snapshot's tree is there, reading no "
    "object's content (milliseconds; what 'earshot doctor' runs).",
)
@project_reader
def fsck(project: Project, as_json: bool, repair: bool, quick: bool) -> None:
    """Read every object, verify it against its digest, and check every reference.

    Also checks every batch and session record (each is sealed with a digest)
    and the stat cache. Exits 1 and lists the problems when anything is broken.
    """
    from earshot.agent.core.records import check_records
    from earshot.cas.fsck import check_quick, drop_stale_cache

    if quick:
        report = check_quick(project.store)
    else:
        with progress_for(as_json) as progress:
            report = project.fsck(progress)
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


@click.command()
@root_option("The working tree whose store to remove.")
@click.option("--yes", is_flag=True, help="Do not ask: remove at once.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document on stdout.")
@click.option("-v", "--verbose", count=True, help="Log to stderr (-vv for debug).")
def purge(root: str | None, yes: bool, as_json: bool, verbose: int) -> None:
    """Remove everything earshot keeps for the root: every snapshot, batch and
    session log, and its watch daemon. The working tree is not touched.

    Asks first on a terminal; elsewhere --yes is needed. Refused while
    another earshot process has the store open (an agent's call, a chat).
    """
    configure_logging(verbose)
    from earshot.agent.watch import client as watch_client
    from earshot.cas import faults
    from earshot.cas.errors import EarshotError
    from earshot.cas.paths import checkpoints_dir, data_home, sessions_dir

    try:
        root = discovered(root)
    except EarshotError as exc:
        fail(str(exc), exc.exit_code, error_kind(exc))
    real = os.path.realpath(root)
    home = data_home()
    store, logs = checkpoints_dir(real, home), sessions_dir(real, home)
    for left in [*_killed_purges(store), *_killed_purges(logs)]:
        shutil.rmtree(left, ignore_errors=True)  # a purge killed mid-way meant it gone
    if not store.exists() and not logs.exists():
        render.emit({"root": real, "removed": False}, f"earshot keeps nothing for {real}", as_json)
        return
    size = _tree_bytes(store) + _tree_bytes(logs)
    count = len(list(logs.glob("*.jsonl"))) if logs.exists() else 0
    what = f"every checkpoint and {count} session log(s) of {real} ({human_bytes(size)})"
    if not yes:
        if not (sys.stdin.isatty() and sys.stderr.isatty()):
            fail(f"purge removes {what}: give --yes to mean it", 2, "confirmation_needed")
        if not click.confirm(f"Remove {what}?", default=False, err=True):
            fail("nothing removed", 1, "declined")
    watch_client.stop_daemon(watch_client.daemon_paths(real, home))
    gone = store.with_name(f".{store.name}.purging-{os.getpid()}")
    logs_gone = logs.with_name(f".{logs.name}.purging-{os.getpid()}")
    if store.exists():
        lock = os.open(store / "open.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                fail(
                    f"another earshot process has the store of {real} open (an agent's call, "
                    "a chat): nothing removed; try again when it is done",
                    1,
                    "store_busy",
                )
            # The logs first, then the store, each in one step: a purge killed
            # between them leaves a store without logs, never logs a new store
            # would take up as its sessions; the next purge removes what is left.
            _set_aside(logs, logs_gone)
            faults.point("purge-logs-aside")
            os.rename(store, gone)
        finally:
            os.close(lock)
        shutil.rmtree(gone)
    _set_aside(logs, logs_gone)
    shutil.rmtree(logs_gone, ignore_errors=True)
    doc = {"root": real, "removed": True, "bytes": size, "session_logs": count}
    render.emit(doc, f"removed {what}", as_json)


def _set_aside(path: Path, aside: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.rename(path, aside)


def _killed_purges(kept: Path) -> list[Path]:
    """What a purge of this store (or these logs) left when it was killed after
    setting them aside (``.KEY.purging-PID``, its process gone)."""
    found = []
    for path in kept.parent.glob(f".{kept.name}.purging-*"):
        pid = path.name.rpartition("-")[2]
        if pid.isdigit() and not Path(f"/proc/{pid}").exists():
            found.append(path)
    return found


def _tree_bytes(top: Path) -> int:
    """Bytes on disk under ``top`` (blocks, as du counts them)."""
    total = 0
    for path in top.rglob("*") if top.exists() else ():
        with contextlib.suppress(OSError):
            if path.is_file() and not path.is_symlink():
                total += path.stat().st_blocks * 512
    return total
