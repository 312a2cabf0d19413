"""The object store: blobs, trees and snapshots packed into LMDB values.

Why packs: LMDB spends whole 4 KiB overflow pages on values over half a page,
doubling the size of the 1-4 KiB blobs that make up most source trees
(docs/FACTS.md). So objects are appended, each compressed on its own, to a
pack of about 4 MiB stored as one value; the ``index`` table maps a digest to
(type, codec, pack, offset, lengths). A read copies only its slice of a pack.

Files over ``CHUNK_THRESHOLD`` are cut by content-defined chunking (FastCDC,
64 KiB-1 MiB chunks, 256 KiB average): no value is unbounded, and an edit in a
large file stores only the chunks around it. The file's digest stays the plain
BLAKE3 of its whole content; it names a chunk list.
"""

from __future__ import annotations

import mmap
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import blake3
import zstandard

from . import faults, schema
from .backend import Backend, ReadView, WriteBatch
from .digest import DIGEST_SIZE, Digest, blob_digest, short, snapshot_digest, tree_digest
from .errors import EarshotError
from .location import Codec as Codec
from .location import CorruptObject as CorruptObject
from .location import Location as Location
from .location import ObjectType as ObjectType
from .packer import Packer, new_pack_id
from .snapshot import Snapshot, decode_snapshot, hash_snapshot
from .tree import TreeEntry, decode_tree, hash_tree
from .varint import decode_uvarint, encode_uvarint

#: 2: intents, sealed agent records, and no stat-cache record of format 1
#: (which a kill could leave naming a missing object) is trusted.
#: 3: trees may hold unrecorded entries with their identity (inode, mtime)
#: and the reasons of what git ignores (``tree.Unrecorded``), which an
#: earshot reading format 2 would take for corrupt trees: it refuses the
#: store in words instead. A format-2 store is opened as it is.
FORMAT_VERSION = b"3"
#: Formats this version opens, upgrading them in place to FORMAT_VERSION.
UPGRADES_FROM = (b"1", b"2")
PACK_TARGET = 4 << 20
#: Buffered objects are committed once they pass this (bounded memory on huge trees).
FLUSH_BYTES = 64 << 20
CHUNK_THRESHOLD = 1 << 20
CHUNK_AVG = 256 << 10
_TREE_CACHE = 4096

#: Decoded trees and a name index for each, shared by every reader of the
#: process: a tree is immutable under its digest, a lookup walks from the root,
#: and the same large directories come up in each restage and lookup.
_DECODED_TREES: dict[Digest, tuple[list[TreeEntry], dict[bytes, TreeEntry]]] = {}


class MissingObject(EarshotError):
    """A digest the store does not hold."""

    def __init__(self, digest: Digest, what: str = "object") -> None:
        super().__init__(f"{what} {short(digest)} is not in the store")
        self.digest = digest


class UnknownFormat(EarshotError):
    """A store written by another version of earshot."""

    def __init__(self, found: bytes) -> None:
        super().__init__(
            f"the store has format {found.decode(errors='replace')!r}; this earshot "
            f"reads format {FORMAT_VERSION.decode()} (upgrade earshot, or move the store aside)"
        )


def encode_chunks(chunks: list[tuple[Digest, int]]) -> bytes:
    return b"".join(d + encode_uvarint(n) for d, n in chunks)


def decode_chunks(data: bytes) -> list[tuple[Digest, int]]:
    chunks = []
    pos = 0
    while pos < len(data):
        digest = Digest(data[pos : pos + DIGEST_SIZE])
        size, pos = decode_uvarint(data, pos + DIGEST_SIZE)
        chunks.append((digest, size))
    return chunks


def check_type(digest: Digest, loc: Location, expect: ObjectType | None) -> None:
    """A blob may be stored whole or chunked; any other mismatch is corruption."""
    if expect is None or loc.type is expect:
        return
    if expect is ObjectType.BLOB and loc.type is ObjectType.CHUNKED:
        return
    found, wanted = loc.type.name.lower(), expect.name.lower()
    raise CorruptObject(digest, f"is a {found}, not a {wanted}")


class ObjectReader:
    """Reads objects through one consistent view of the tables."""

    def __init__(self, view: ReadView) -> None:
        self.view = view
        self._dctx = zstandard.ZstdDecompressor()
        self._trees = _DECODED_TREES

    def locate(self, digest: Digest) -> Location | None:
        return schema.get_location(self.view, digest)

    def has(self, digest: Digest) -> bool:
        return self.locate(digest) is not None

    def read_raw(self, digest: Digest, expect: ObjectType | None = None) -> tuple[Location, bytes]:
        """An object's stored bytes, decompressed but not verified."""
        loc = self.locate(digest)
        if loc is None:
            raise MissingObject(digest)
        check_type(digest, loc, expect)
        data = schema.read_packed(self.view, loc)
        if data is None or len(data) != loc.stored:
            raise CorruptObject(digest, f"its pack {loc.pack:016x} is missing or short")
        if loc.codec is Codec.ZSTD:
            try:
                data = self._dctx.decompress(data, max_output_size=loc.raw)
            except zstandard.ZstdError as exc:
                raise CorruptObject(digest, f"does not decompress ({exc})") from None
        if len(data) != loc.raw:
            raise CorruptObject(digest, f"{len(data)} bytes, expected {loc.raw}")
        return loc, data

    def iter_blob(self, digest: Digest) -> Iterator[bytes]:
        """A file's content, piece by piece (one piece per chunk), verified.

        Each piece is checked against its digest before it is handed out; the
        whole of a chunked file is checked after its last piece.
        """
        loc, data = self.read_raw(digest, ObjectType.BLOB)
        if loc.type is ObjectType.BLOB:
            if blob_digest(data) != digest:
                raise CorruptObject(digest, "content does not match its digest")
            yield data
            return
        whole = blake3.blake3()
        for chunk, size in decode_chunks(data):
            _, piece = self.read_raw(chunk, ObjectType.BLOB)
            if len(piece) != size or blob_digest(piece) != chunk:
                raise CorruptObject(digest, f"chunk {short(chunk)} does not match its digest")
            whole.update(piece)
            yield piece
        if whole.digest() != digest:
            raise CorruptObject(digest, "content does not match its digest")

    def read_blob(self, digest: Digest) -> bytes:
        return b"".join(self.iter_blob(digest))

    def read_tree(self, digest: Digest) -> list[TreeEntry]:
        """A directory's entries (shared with later calls: do not mutate)."""
        cached = self._trees.get(digest)
        if cached is not None:
            return cached[0]
        data = self.read_raw(digest, ObjectType.TREE)[1]
        # Trees are small and steer restore: always checked (~1 us each).
        if tree_digest(data) != digest:
            raise CorruptObject(digest, "tree content does not match its digest")
        entries = decode_tree(data)
        if len(self._trees) >= _TREE_CACHE:
            self._trees.clear()  # a bound, not an LRU: lookups revisit few trees
        self._trees[digest] = (entries, {})
        return entries

    def find_entry(self, digest: Digest, name: bytes) -> TreeEntry | None:
        """One name in a directory, through a per-tree index built on first use."""
        entries = self.read_tree(digest)
        index = self._trees[digest][1] if digest in self._trees else {}
        if not index:
            index.update((e.name, e) for e in entries)
        return index.get(name)

    def read_snapshot(self, digest: Digest) -> Snapshot:
        return decode_snapshot(self.read_raw(digest, ObjectType.SNAPSHOT)[1])

    def verify(self, digest: Digest) -> ObjectType:
        """Check an object against its digest; raise CorruptObject if it fails."""
        loc, data = self.read_raw(digest)
        if loc.type is ObjectType.BLOB:
            got = blob_digest(data)
        elif loc.type is ObjectType.TREE:
            got = tree_digest(data)
        elif loc.type is ObjectType.SNAPSHOT:
            got = snapshot_digest(data)
        else:
            hasher = blake3.blake3()
            for chunk, _size in decode_chunks(data):
                _, piece = self.read_raw(chunk, ObjectType.BLOB)
                hasher.update(piece)
            got = Digest(hasher.digest())
        if got != digest:
            raise CorruptObject(digest, "content does not match its digest")
        return loc.type


class ObjectWriter(ObjectReader):
    """Adds objects, deduplicated, to packs; everything commits when the block ends."""

    def __init__(self, batch: WriteBatch) -> None:
        super().__init__(batch)
        self.batch = batch
        # New objects: gathered raw, compressed a pack at a time on another core.
        self._packer = Packer()
        # Objects moved by gc, already compressed: packed here, directly.
        self._pack = bytearray()
        self._pack_id = new_pack_id()
        self._pending: dict[Digest, Location] = {}
        self._cdc: object | None = None
        #: Bytes of the packs put into the batch so far: complete after finish().
        self.stored_bytes = 0
        self.new_objects = 0
        self._unflushed = 0

    def locate(self, digest: Digest) -> Location | None:
        pending = self._pending.get(digest)
        if pending is not None:
            return pending
        waiting = self._packer.waiting(digest)
        if waiting is not None:
            kind, raw = waiting
            return Location(kind, Codec.RAW, 0, 0, len(raw), len(raw))
        return super().locate(digest)

    def read_raw(self, digest: Digest, expect: ObjectType | None = None) -> tuple[Location, bytes]:
        waiting = self._packer.waiting(digest)
        if waiting is not None:
            kind, raw = waiting
            unpacked = Location(kind, Codec.RAW, 0, 0, len(raw), len(raw))
            check_type(digest, unpacked, expect)
            return unpacked, raw
        loc = self._pending.get(digest)
        if loc is None:
            return super().read_raw(digest, expect)
        check_type(digest, loc, expect)
        data = bytes(self._pack[loc.offset : loc.offset + loc.stored])
        if loc.codec is Codec.ZSTD:
            data = self._dctx.decompress(data, max_output_size=loc.raw)
        return loc, data

    def _add(self, digest: Digest, kind: ObjectType, data: bytes | memoryview) -> None:
        # A copy: a view may be of a file's mmap, closed once the file is done.
        self._packer.add(digest, kind, bytes(data))
        self.new_objects += 1
        self._store_packed()

    def _store_packed(self, wait: bool = False) -> None:
        """Put the packs the worker has finished into the batch, in order."""
        for sealed in self._packer.ready(wait):
            schema.put_pack(self.batch, sealed.pack_id, sealed.data)
            for digest, loc in sealed.locations:
                schema.put_location(self.batch, digest, loc)
            self.stored_bytes += len(sealed.data)
            self._unflushed += len(sealed.data)
            self._flush_if_large()

    def append_stored(self, digest: Digest, old: Location, stored: bytes) -> None:
        """Move an object's stored bytes (as they are) into the open pack (gc)."""
        loc = Location(old.type, old.codec, self._pack_id, len(self._pack), old.stored, old.raw)
        self._pack += stored
        self._pending[digest] = loc
        if len(self._pack) >= PACK_TARGET:
            self._seal_pack()

    def _seal_pack(self) -> None:
        if not self._pending:
            return
        schema.put_pack(self.batch, self._pack_id, bytes(self._pack))
        self._unflushed += len(self._pack)
        for digest, loc in self._pending.items():
            schema.put_location(self.batch, digest, loc)
        self._pending.clear()
        self._pack = bytearray()
        self._pack_id = new_pack_id()
        self._flush_if_large()

    def _flush_if_large(self) -> None:
        if self._unflushed >= FLUSH_BYTES:
            faults.point("object-flush")
            # Only objects: each pack with its index entries. Anything that
            # names an object (stat cache, snapshots, records) commits at the
            # end of the write block, after every object it could name, so a
            # kill at any instant leaves no record naming a missing object.
            self.batch.flush(schema.OBJECT_TABLES)
            faults.point("object-flushed")
            self._unflushed = 0

    def put_blob(self, data: bytes | memoryview) -> Digest:
        """Store content that fits in one object; return its digest."""
        digest = blob_digest(data)
        if not self.has(digest):
            self._add(digest, ObjectType.BLOB, data)
        return digest

    def put_large(self, data: bytes | memoryview) -> Digest:
        """Store content of any size, chunking it when large."""
        if len(data) <= CHUNK_THRESHOLD:
            return self.put_blob(data)
        digest = Digest(blake3.blake3(data, max_threads=blake3.blake3.AUTO).digest())
        if self.has(digest):
            return digest
        from pyfastcdc import FastCDC  # a large file is rare: keep start-up lean

        if self._cdc is None:
            self._cdc = FastCDC(CHUNK_AVG)
        view = memoryview(data)
        chunks = []
        for chunk in self._cdc.cut_buf(view):  # type: ignore[attr-defined]
            piece = view[chunk.offset : chunk.offset + chunk.length]
            chunks.append((self.put_blob(piece), chunk.length))
        self._add(digest, ObjectType.CHUNKED, encode_chunks(chunks))
        return digest

    def put_file(self, fd: int, size: int) -> Digest:
        """Store an open file's content (``size`` bytes, from its fstat)."""
        if size == 0:
            return self.put_blob(b"")
        if size <= CHUNK_THRESHOLD:
            return self.put_blob(read_exact(fd, size))
        with mmap.mmap(fd, 0, access=mmap.ACCESS_READ) as mapped, memoryview(mapped) as view:
            return self.put_large(view)

    def put_tree(self, entries: list[TreeEntry]) -> Digest:
        """Store a tree; a stored copy that fails its digest is replaced by this one.

        A tree is small and read back from the process's cache when it was
        read before, so checking the copy a digest already names costs little;
        without it, a revert that brings back an earlier state would name a
        damaged tree it has just made whole on disk.
        """
        digest, encoded = hash_tree(entries)
        if self.has(digest):
            try:
                self.read_tree(digest)
                return digest
            except CorruptObject:
                pass  # stored again below: the index then names the sound copy
        self._add(digest, ObjectType.TREE, encoded)
        return digest

    def put_snapshot(self, snap: Snapshot) -> Digest:
        digest, encoded = hash_snapshot(snap)
        if not self.has(digest):
            self._add(digest, ObjectType.SNAPSHOT, encoded)
        return digest

    def finish(self) -> None:
        """Wait for every pack and put it into the batch (the caller commits it)."""
        self._store_packed(wait=True)
        self._seal_pack()

    def close(self) -> None:
        """Stop the compression worker (after an error, its packs are dropped)."""
        self._packer.close()


def read_exact(fd: int, size: int) -> bytes:
    """Read up to ``size`` bytes (fewer if the file shrank meanwhile)."""
    parts = []
    remaining = size
    while remaining > 0:
        piece = os.read(fd, remaining)
        if not piece:
            break
        parts.append(piece)
        remaining -= len(piece)
    return parts[0] if len(parts) == 1 else b"".join(parts)


class ObjectStore:
    """Objects over a backend: ``reader()`` for a consistent view, ``writer()`` to add."""

    def __init__(self, backend: Backend) -> None:
        self.backend = backend
        self._check_format()

    @classmethod
    def open(cls, path: Path, tables: tuple[str, ...] | None = None) -> ObjectStore:
        from .lmdb_backend import LmdbBackend

        backend = LmdbBackend(path, tables or schema.CORE_TABLES)
        try:
            return cls(backend)
        except BaseException:
            backend.close()  # a refused store keeps no lock or descriptor
            raise

    def _check_format(self) -> None:
        with self.backend.read() as view:
            found = schema.get_format(view)
        if found is None or found in UPGRADES_FROM:
            # New, or older: the new tables exist once opened; format 1's
            # stat cache is dropped by its record version. Higher layers
            # upgrade their own records (see earshot.agent.core.records).
            with self.backend.write() as batch:
                if schema.get_format(batch) in (None, *UPGRADES_FROM):
                    schema.put_format(batch, FORMAT_VERSION)
        elif found != FORMAT_VERSION:
            raise UnknownFormat(found)

    @contextmanager
    def reader(self) -> Iterator[ObjectReader]:
        with self.backend.read() as view:
            yield ObjectReader(view)

    @contextmanager
    def writer(self) -> Iterator[ObjectWriter]:
        with self.backend.write() as batch:
            writer = ObjectWriter(batch)
            try:
                yield writer
                writer.finish()
            finally:
                writer.close()

    def close(self) -> None:
        self.backend.close()
