"""What a snapshot keeps alive: every object reachable from it."""

from __future__ import annotations

from collections.abc import Iterable

from .digest import Digest
from .objects import ObjectReader, ObjectType, decode_chunks
from .progress import QUIET, Progress
from .tree import Kind


def reachable(
    reader: ObjectReader,
    snapshots: Iterable[Digest],
    live: set[Digest],
    progress: Progress = QUIET,
) -> set[Digest]:
    """Add to ``live`` the snapshots, their trees, blobs and chunks; return it.

    A subtree already in ``live`` is not walked again, so marking many
    snapshots of one slowly changing root costs about one walk plus the changes.
    ``progress`` hears of each tree read.
    """
    for snap in snapshots:
        if snap in live:
            continue
        live.add(snap)
        _mark_tree(reader, reader.read_snapshot(snap).tree, live, progress)
    return live


def reachable_blobs(
    reader: ObjectReader, blobs: Iterable[Digest], live: set[Digest]
) -> set[Digest]:
    """Add to ``live`` the blobs the store holds among ``blobs`` (a chunked one with
    its chunks); return it.

    For what a higher layer's record names by content alone, in no snapshot
    (the agent layer's ledgers: a state another writer held only for a
    moment). A blob the store lacks is passed over.
    """
    for digest in blobs:
        if digest not in live and reader.locate(digest) is not None:
            _mark_blob(reader, digest, live)
    return live


def _mark_tree(reader: ObjectReader, tree: Digest, live: set[Digest], progress: Progress) -> None:
    stack = [tree]
    while stack:
        digest = stack.pop()
        if digest in live:
            continue
        live.add(digest)
        progress.advance()
        for entry in reader.read_tree(digest):
            if entry.digest is None or entry.digest in live:
                continue
            if entry.kind is Kind.DIR:
                stack.append(entry.digest)
            else:
                _mark_blob(reader, entry.digest, live)


def _mark_blob(reader: ObjectReader, digest: Digest, live: set[Digest]) -> None:
    live.add(digest)
    loc = reader.locate(digest)
    if loc is not None and loc.type is ObjectType.CHUNKED:
        live.update(chunk for chunk, _ in decode_chunks(reader.read_raw(digest)[1]))
