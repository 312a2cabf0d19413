"""The store's tables and key layouts, in one place, with typed accessors.

A project's store is a few named tables of byte keys and byte values
(``earshot.cas.backend``). This module is the only one that names them or
lays out their keys; everything else reads and writes through the functions
below, so a key layout can change in one place.

| table | key | value |
|---|---|---|
| ``meta`` | ``format`` | the store's format version, ASCII digits |
| | ``head`` | the newest snapshot's digest (32 bytes) |
| | ``full-restage-ns`` | how long the last full scan took, 8-byte ns |
| ``packs`` | pack id, 8 bytes big-endian | a pack of compressed objects |
| ``index`` | object digest, 32 bytes | its ``Location`` in a pack |
| ``snapshots`` | time, 8 bytes big-endian, + digest | empty: the listing, in time order |
| ``counts`` | tree digest | files and content bytes under it, 8 + 8 bytes |
| ``statcache`` | BLAKE3 of a directory's path, first 16 bytes | the directory's stat record |
| | ``git-index/`` + BLAKE3 of an index file's path | the paths that index tracks |
| ``intents`` | intent id (ASCII) | a sealed JSON intent |

Higher layers keep their records in tables of their own, named when the
project is opened (``Project(extra_tables=...)``) and laid out by them; the
store never reads those.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import TYPE_CHECKING

import blake3

from .digest import Digest
from .location import Location

if TYPE_CHECKING:  # the backend module takes its default tables from here
    from .backend import ReadView, WriteBatch

META = "meta"
PACKS = "packs"
INDEX = "index"
SNAPSHOTS = "snapshots"
COUNTS = "counts"
STATCACHE = "statcache"
INTENTS = "intents"
#: Every table the store itself opens.
CORE_TABLES = (META, PACKS, INDEX, SNAPSHOTS, STATCACHE, COUNTS, INTENTS)
#: The tables an early flush commits: objects, each pack with its index entries.
OBJECT_TABLES = (PACKS, INDEX)

_FORMAT = b"format"
_HEAD = b"head"
_FULL_COST = b"full-restage-ns"
_LINKED = b"linked-files"
_TIME_BYTES = 8
_COUNT_BYTES = 8
_STATCACHE_KEY_BYTES = 16
_INDEX_PATHS = b"git-index/"


# -- meta -------------------------------------------------------------------


def get_format(view: ReadView) -> bytes | None:
    return view.get(META, _FORMAT)


def put_format(txn: WriteBatch, version: bytes) -> None:
    txn.put(META, _FORMAT, version)


def get_head(view: ReadView) -> Digest | None:
    """The newest snapshot, listed or not (every batch state is one)."""
    raw = view.get(META, _HEAD)
    return Digest(bytes(raw)) if raw else None


def put_head(txn: WriteBatch, digest: Digest | None) -> None:
    if digest is None:
        txn.delete(META, _HEAD)
    else:
        txn.put(META, _HEAD, digest)


def get_full_cost(view: ReadView) -> int | None:
    """Nanoseconds the last full scan of the root took, if one was made."""
    raw = view.get(META, _FULL_COST)
    return int.from_bytes(raw, "big") if raw else None


def put_full_cost(txn: WriteBatch, elapsed_ns: int) -> None:
    txn.put(META, _FULL_COST, elapsed_ns.to_bytes(8, "big"))


def get_linked(view: ReadView) -> list[str] | None:
    """The recorded files that have other hard links (None: not known yet)."""
    raw = view.get(META, _LINKED)
    if raw is None:
        return None
    try:
        paths = json.loads(bytes(raw))
    except (ValueError, RecursionError):
        return None  # a cache: a damaged one is as good as none
    return [p for p in paths if isinstance(p, str)] if isinstance(paths, list) else None


def put_linked(txn: WriteBatch, paths: list[str]) -> None:
    txn.put(META, _LINKED, json.dumps(sorted(set(paths))).encode())


# -- objects: packs and their index -----------------------------------------


def pack_key(pack: int) -> bytes:
    return pack.to_bytes(8, "big")


def get_location(view: ReadView, digest: Digest) -> Location | None:
    raw = view.get(INDEX, digest)
    return None if raw is None else Location.decode(raw, digest)


def has_location(view: ReadView, digest: Digest) -> bool:
    """Whether the index has an entry for ``digest``, read or not (a damaged entry
    is the object check's to report)."""
    return view.get(INDEX, digest) is not None


def put_location(txn: WriteBatch, digest: Digest, location: Location) -> None:
    txn.put(INDEX, digest, location.encode())


def delete_location(txn: WriteBatch, digest: Digest) -> None:
    txn.delete(INDEX, digest)


def locations(view: ReadView) -> Iterator[tuple[Digest, Location]]:
    """Every stored object and where it lives, in digest order (``CorruptObject``
    at a damaged index entry)."""
    for key, value in view.items(INDEX):
        digest = Digest(bytes(key))
        yield digest, Location.decode(value, digest)


def index_entries(view: ReadView) -> Iterator[tuple[Digest, bytes]]:
    """Every index entry as stored (fsck decodes each, to report the damaged ones)."""
    for key, value in view.items(INDEX):
        yield Digest(bytes(key)), bytes(value)


def read_packed(view: ReadView, location: Location) -> bytes | None:
    """An object's stored bytes, as they lie in their pack (None: no such pack)."""
    return view.get_slice(PACKS, pack_key(location.pack), location.offset, location.stored)


def put_pack(txn: WriteBatch, pack: int, data: bytes) -> None:
    txn.put(PACKS, pack_key(pack), data)


def delete_pack(txn: WriteBatch, pack: int) -> None:
    txn.delete(PACKS, pack_key(pack))


def pack_ids(view: ReadView) -> Iterator[int]:
    """Every pack's id, without reading the packs (MiBs each)."""
    for key in view.keys(PACKS):
        yield int.from_bytes(key, "big")


# -- the snapshot listing ---------------------------------------------------


def _snapshot_key(digest: Digest, time_ns: int) -> bytes:
    """Snapshots are listed in time order: the key leads with the time."""
    return time_ns.to_bytes(_TIME_BYTES, "big") + digest


def list_snapshot(txn: WriteBatch, digest: Digest, time_ns: int) -> None:
    txn.put(SNAPSHOTS, _snapshot_key(digest, time_ns), b"")


def is_listed(view: ReadView, digest: Digest, time_ns: int) -> bool:
    return view.get(SNAPSHOTS, _snapshot_key(digest, time_ns)) is not None


def listed_snapshots(view: ReadView) -> Iterator[tuple[int, Digest]]:
    """(time, digest) of every listed snapshot, oldest first."""
    for key, _ in view.items(SNAPSHOTS):
        yield int.from_bytes(key[:_TIME_BYTES], "big"), Digest(bytes(key[_TIME_BYTES:]))


def unlist_snapshot(txn: WriteBatch, digest: Digest, time_ns: int) -> None:
    txn.delete(SNAPSHOTS, _snapshot_key(digest, time_ns))


# -- counts per recorded tree -----------------------------------------------


def get_counts(view: ReadView, tree: Digest) -> tuple[int, int] | None:
    """(files, content bytes) under a tree some snapshot recorded."""
    raw = view.get(COUNTS, tree)
    if raw is None or len(raw) != 2 * _COUNT_BYTES:
        return None
    return int.from_bytes(raw[:_COUNT_BYTES], "big"), int.from_bytes(raw[_COUNT_BYTES:], "big")


def put_counts(txn: WriteBatch, tree: Digest, files: int, content_bytes: int) -> None:
    txn.put(
        COUNTS,
        tree,
        files.to_bytes(_COUNT_BYTES, "big") + content_bytes.to_bytes(_COUNT_BYTES, "big"),
    )


def counted_trees(view: ReadView) -> Iterator[Digest]:
    for key in view.keys(COUNTS):
        yield Digest(bytes(key))


def delete_counts(txn: WriteBatch, tree: Digest) -> None:
    txn.delete(COUNTS, tree)


# -- the stat cache -----------------------------------------------------------


def statcache_key(rel: str) -> bytes:
    """A directory's stat record: keyed by a digest of its root-relative path."""
    digest = blake3.blake3(rel.encode("utf-8", "surrogateescape")).digest()
    return digest[:_STATCACHE_KEY_BYTES]


def get_dir_record(view: ReadView, rel: str) -> bytes | None:
    return view.get(STATCACHE, statcache_key(rel))


def put_dir_record(txn: WriteBatch, rel: str, value: bytes) -> None:
    txn.put(STATCACHE, statcache_key(rel), value)


def _index_paths_key(index_path: bytes) -> bytes:
    return _INDEX_PATHS + blake3.blake3(index_path).digest()[:_STATCACHE_KEY_BYTES]


def get_index_paths(view: ReadView, index_path: bytes) -> bytes | None:
    """What was kept of a git index file (``statcache.StoredPaths`` decodes it)."""
    return view.get(STATCACHE, _index_paths_key(index_path))


def put_index_paths(txn: WriteBatch, index_path: bytes, value: bytes) -> None:
    txn.put(STATCACHE, _index_paths_key(index_path), value)


def statcache_items(view: ReadView) -> Iterator[tuple[bytes, bytes, bool]]:
    """(key, value, is a directory record) of every stat-cache entry."""
    for key, value in view.items(STATCACHE):
        yield bytes(key), value, not key.startswith(_INDEX_PATHS)


def delete_statcache(txn: WriteBatch, key: bytes) -> None:
    txn.delete(STATCACHE, key)


# -- intents ----------------------------------------------------------------


def intent_key(intent_id: str) -> bytes:
    """The key an intent is stored (and sealed) under."""
    return intent_id.encode()


def get_intent(view: ReadView, intent_id: str) -> bytes | None:
    return view.get(INTENTS, intent_key(intent_id))


def put_intent_record(txn: WriteBatch, intent_id: str, value: bytes) -> None:
    txn.put(INTENTS, intent_key(intent_id), value)


def delete_intent_record(txn: WriteBatch, intent_id: str) -> None:
    txn.delete(INTENTS, intent_key(intent_id))


def intent_records(view: ReadView) -> Iterator[tuple[str, bytes, bytes]]:
    """(id, key, value) of every intent, in id order."""
    for key, value in view.items(INTENTS):
        yield bytes(key).decode(errors="replace"), bytes(key), value
