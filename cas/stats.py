"""What the store holds and what it costs on disk."""

from __future__ import annotations

from dataclasses import dataclass

from . import schema
from .objects import ObjectStore, ObjectType


@dataclass(frozen=True, slots=True)
class StoreStats:
    """Counts and sizes; ``content_bytes`` counts each distinct content once."""

    #: Listed snapshots (``earshot snapshots``).
    snapshots: int
    #: Every snapshot recorded: listed ones, and those of batches (before, after).
    recorded_snapshots: int
    objects: dict[str, int]
    packs: int
    #: Distinct file content (blobs and chunks, uncompressed).
    content_bytes: int
    #: What the recorded snapshots describe, summed over all of them (before dedup).
    logical_bytes: int
    #: Bytes in packs (after compression), all objects.
    stored_bytes: int
    #: Bytes in packs of file content alone (for the compression ratio).
    content_stored_bytes: int
    disk_bytes: int

    @property
    def disk_per_content_byte(self) -> float:
        return self.disk_bytes / self.content_bytes if self.content_bytes else 0.0

    @property
    def compression_ratio(self) -> float:
        return self.content_bytes / self.content_stored_bytes if self.content_stored_bytes else 0.0

    @property
    def dedup_ratio(self) -> float:
        return self.logical_bytes / self.content_bytes if self.content_bytes else 0.0


def store_stats(store: ObjectStore) -> StoreStats:
    counts = {t.name.lower(): 0 for t in ObjectType}
    content = stored = content_stored = 0
    packs: set[int] = set()
    logical = 0
    with store.reader() as reader:
        for digest, loc in schema.locations(reader.view):
            counts[loc.type.name.lower()] += 1
            stored += loc.stored
            packs.add(loc.pack)
            if loc.type is ObjectType.BLOB:
                content += loc.raw
                content_stored += loc.stored
            elif loc.type is ObjectType.SNAPSHOT:
                # Batches' snapshots too: dedup is what every state recorded
                # would cost stored whole, over what is stored once.
                logical += reader.read_snapshot(digest).content_bytes
        snapshots = sum(1 for _ in schema.listed_snapshots(reader.view))
    return StoreStats(
        snapshots=snapshots,
        recorded_snapshots=counts[ObjectType.SNAPSHOT.name.lower()],
        objects=counts,
        packs=len(packs),
        content_bytes=content,
        logical_bytes=logical,
        stored_bytes=stored,
        content_stored_bytes=content_stored,
        disk_bytes=store.backend.disk_bytes(),
    )
