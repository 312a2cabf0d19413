"""Garbage collection: mark from the kept snapshots, sweep the rest, repack.

A pack holding any dead object is rewritten with only its live objects (their
stored bytes are copied as they are, still compressed); the index and the stat
cache lose every entry naming a dead object, so no later scan can reuse a
digest whose content is gone. The store is held exclusively meanwhile: a
writer in another process could otherwise dedup against an object being swept.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from . import schema
from .backend import StoreError
from .digest import Digest
from .logs import get_logger
from .objects import Location, ObjectStore, ObjectWriter
from .progress import QUIET, Progress
from .reach import reachable, reachable_blobs
from .statcache import decode_record


@dataclass(frozen=True, slots=True)
class GcReport:
    """What a collection removed and kept."""

    live_objects: int
    dead_objects: int
    dead_bytes: int
    packs_rewritten: int
    packs_deleted: int
    disk_before: int
    disk_after: int


def collect_garbage(
    store: ObjectStore,
    keep: Callable[[], Iterable[Digest]],
    compact: bool = False,
    progress: Progress = QUIET,
    keep_blobs: Callable[[], Iterable[Digest]] = tuple,
) -> GcReport:
    """Drop every object not reachable from the snapshots ``keep()`` names, nor
    among the blobs ``keep_blobs()`` names.

    Both are asked once the store is held alone: no process can record a
    snapshot (or begin an operation naming one) between the question and the
    collection. ``progress`` hears of the trees marked, then of the objects
    repacked (the live ones of packs that also hold dead ones).
    """
    backend = store.backend
    with backend.exclusive("gc"):
        disk_before = backend.disk_bytes()
        with store.reader() as reader:
            progress.stage("marking", unit="trees")
            live = reachable(reader, keep(), set(), progress)
            reachable_blobs(reader, keep_blobs(), live)
            by_pack: dict[int, list[tuple[Digest, Location]]] = {}
            dead: list[Digest] = []
            dead_bytes = 0
            for digest, loc in schema.locations(reader.view):
                by_pack.setdefault(loc.pack, []).append((digest, loc))
                if digest not in live:
                    dead.append(digest)
                    dead_bytes += loc.stored
            dead_set = set(dead)
            stale_records = [
                key
                for key, value, is_dir in schema.statcache_items(reader.view)
                if is_dir and _names_dead(value, dead_set)
            ]
            stale_counts = [t for t in schema.counted_trees(reader.view) if t not in live]
            # Packs no index entry names: left by a writer (or a gc) killed after
            # an early flush. Nothing reaches them; they only take room.
            orphans = [p for p in schema.pack_ids(reader.view) if p not in by_pack]
        # First what frees room without needing any: whole dead packs, index
        # entries, cache records. LMDB reuses the freed pages, so the repack
        # after it fits even on a full disk.
        deleted = 0
        partial: dict[int, list[tuple[Digest, Location]]] = {}
        with backend.write() as batch:
            for pack, members in by_pack.items():
                survivors = [(d, loc) for d, loc in members if d not in dead_set]
                if not survivors:
                    schema.delete_pack(batch, pack)
                    deleted += 1
                elif len(survivors) < len(members):
                    partial[pack] = survivors
            for digest in dead:
                schema.delete_location(batch, digest)
            for pack in orphans:
                schema.delete_pack(batch, pack)
                deleted += 1
            for key in stale_records:
                schema.delete_statcache(batch, key)
            for tree in stale_counts:
                schema.delete_counts(batch, tree)
        rewritten = 0
        if partial:
            moving = [s for survivors in partial.values() for s in survivors]
            size = sum(loc.stored for _, loc in moving)
            progress.stage("repacking", total=len(moving), total_bytes=size, unit="objects")
            try:
                with store.writer() as writer:
                    for pack, survivors in partial.items():
                        _repack(writer, pack, survivors, progress)
                        schema.delete_pack(writer.batch, pack)
            except StoreError as exc:
                if not exc.no_space:
                    raise
                # Consistent as it is: the old packs still hold their live objects.
                get_logger("earshot.cas").warning("gc_repack_skipped", reason=str(exc))
            else:
                rewritten = len(partial)
                deleted += len(partial)
    if compact:
        progress.stage("compacting")
        backend.compact()
    get_logger("earshot.cas").info(
        "gc", live=len(live), dead=len(dead), packs_rewritten=rewritten, compact=compact
    )
    return GcReport(
        live_objects=len(live),
        dead_objects=len(dead),
        dead_bytes=dead_bytes,
        packs_rewritten=rewritten,
        packs_deleted=deleted,
        disk_before=disk_before,
        disk_after=backend.disk_bytes(),
    )


def _repack(
    writer: ObjectWriter, pack: int, survivors: list[tuple[Digest, Location]], progress: Progress
) -> None:
    """Copy live objects' stored bytes into the writer's open pack."""
    for digest, loc in survivors:
        data = schema.read_packed(writer.batch, loc)
        progress.advance(1, loc.stored)
        if data is None:
            continue  # fsck reports it; nothing to copy
        writer.append_stored(digest, loc, data)


def _names_dead(raw: bytes, dead: set[Digest]) -> bool:
    record = decode_record(raw)
    if record is None:
        return True
    if record.tree in dead:
        return True
    return any(key[6] in dead for key in record.entries.values())
