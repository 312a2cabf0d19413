"""Verifying a store: every object against its digest, every reference.

References are checked from the snapshots, and from the stat cache too: a
scan trusts a cached digest without reading the file, so a cache record that
names a missing object would make the next snapshot name it as well.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from . import schema
from .digest import Digest, short
from .errors import EarshotError
from .intents import read_intents
from .location import Location
from .objects import ObjectReader, ObjectStore, ObjectType, decode_chunks
from .progress import QUIET, Progress
from .statcache import decode_record
from .tree import Kind


@dataclass(slots=True)
class FsckReport:
    """What was checked and what is broken (one line per problem)."""

    objects: int = 0
    snapshots: int = 0
    problems: list[str] = field(default_factory=list)
    #: Stat-cache records that name a missing object (``stale_cache`` repairs them).
    stale_cache: list[bytes] = field(default_factory=list)
    #: Intents whose records are damaged (``Intents.set_aside`` repairs them).
    damaged_intents: int = 0

    @property
    def ok(self) -> bool:
        return not self.problems


def check_store(store: ObjectStore, progress: Progress = QUIET) -> FsckReport:
    """Read every object and verify it; then check that references resolve."""
    report = FsckReport()
    with store.reader() as reader:
        types: dict[bytes, ObjectType] = {}
        if progress.active:  # one pass over the index (no object read) gives the totals
            count, size = 0, 0
            for _, raw in schema.index_entries(reader.view):
                count += 1
                size += _stored(raw)
            progress.stage("checking", total=count, total_bytes=size, unit="objects")
        else:
            progress.stage("checking", unit="objects")
        for digest, raw in schema.index_entries(reader.view):
            try:
                location = Location.decode(raw, digest)
            except EarshotError as exc:
                report.objects += 1
                report.problems.append(str(exc))
                continue
            types[digest] = location.type
            report.objects += 1
            try:
                reader.verify(digest)
            except EarshotError as exc:
                report.problems.append(str(exc))
            progress.advance(1, location.stored)
        for _, snapshot in schema.listed_snapshots(reader.view):
            report.snapshots += 1
            _check_references(reader, snapshot, types, report)
        _check_stat_cache(reader, types, report)
        _check_intents(reader, report)
    return report


def check_quick(store: ObjectStore) -> FsckReport:
    """A glance, for ``earshot doctor`` and ``fsck --quick``: every listed snapshot,
    and the tree it names, are in the index, and no intent is damaged. Reads
    the index alone, no object's content: it takes milliseconds where
    ``check_store`` reads the whole store."""
    report = FsckReport()
    with store.reader() as reader:
        for _, snap in schema.listed_snapshots(reader.view):
            report.snapshots += 1
            if schema.get_location(reader.view, snap) is None:
                report.problems.append(f"snapshot {short(snap)} is listed but missing")
                continue
            try:
                tree = reader.read_snapshot(snap).tree
            except EarshotError as exc:
                report.problems.append(str(exc))
                continue
            if schema.get_location(reader.view, tree) is None:
                report.problems.append(f"snapshot {short(snap)}: its tree {short(tree)} missing")
        _check_intents(reader, report)
    return report


def _check_intents(reader: ObjectReader, report: FsckReport) -> None:
    """Each damaged intent, a problem (``--repair`` sets it aside)."""
    for _, damaged in read_intents(reader.view)[1]:
        report.problems.append(
            f"{damaged.what} is damaged ({damaged.why}); 'earshot fsck --repair' sets it aside"
        )
        report.damaged_intents += 1


def _stored(raw: bytes) -> int:
    """The stored size an index entry gives (0 for a damaged one, which fsck reports)."""
    try:
        return Location.decode(raw, Digest(b"")).stored
    except EarshotError:
        return 0


def _check_stat_cache(
    reader: ObjectReader, types: dict[bytes, ObjectType], report: FsckReport
) -> None:
    for key, value, is_dir in schema.statcache_items(reader.view):
        record = decode_record(value) if is_dir else None
        if record is None:
            continue  # of another version: scans ignore it
        missing = [record.tree] if record.tree not in types else []
        missing += [k[6] for k in record.entries.values() if k[6] is not None and k[6] not in types]
        if missing:
            report.stale_cache.append(key)
            report.problems.append(
                f"stat cache of /{record.rel}: names {len(missing)} missing objects "
                f"({short(Digest(missing[0]))}...); 'earshot fsck --repair' drops the record"
            )


def drop_stale_cache(store: ObjectStore, keys: list[bytes]) -> int:
    """Remove stat-cache records (a cache: the next scan reads those files again)."""
    with store.backend.write() as batch:
        for key in keys:
            schema.delete_statcache(batch, key)
    return len(keys)


def _check_references(
    reader: ObjectReader, snap: Digest, types: dict[bytes, ObjectType], report: FsckReport
) -> None:
    if types.get(snap) is not ObjectType.SNAPSHOT:
        report.problems.append(f"snapshot {short(snap)} is listed but missing")
        return
    try:
        tree = reader.read_snapshot(snap).tree
    except EarshotError as exc:
        report.problems.append(str(exc))
        return
    stack = [(tree, "/")]
    seen: set[Digest] = set()
    while stack:
        digest, path = stack.pop()
        if digest in seen:
            continue
        seen.add(digest)
        if types.get(digest) is not ObjectType.TREE:
            report.problems.append(
                f"snapshot {short(snap)}: tree {short(digest)} at {path} missing"
            )
            continue
        try:
            entries = reader.read_tree(digest)
        except EarshotError as exc:
            report.problems.append(f"snapshot {short(snap)}: {path}: {exc}")
            continue
        for entry in entries:
            if entry.digest is None:
                continue
            name = path + entry.name.decode("utf-8", "surrogateescape")
            if entry.kind is Kind.DIR:
                stack.append((entry.digest, name + "/"))
            elif entry.digest not in types:
                report.problems.append(
                    f"snapshot {short(snap)}: {name}: content {short(entry.digest)} missing"
                )
            elif types[entry.digest] is ObjectType.CHUNKED:
                _check_chunks(reader, entry.digest, types, name, report)


def _check_chunks(
    reader: ObjectReader,
    digest: Digest,
    types: dict[bytes, ObjectType],
    name: str,
    report: FsckReport,
) -> None:
    try:
        chunks = decode_chunks(reader.read_raw(digest)[1])
    except EarshotError:
        return  # already reported by the object pass
    for chunk, _size in chunks:
        if chunk not in types:
            report.problems.append(f"{name}: chunk {short(chunk)} missing")
