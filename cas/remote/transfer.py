"""Objects between the local store and a remote: what one lacks, sent or fetched.

Sending walks the local store from the snapshots asked for and stops at
every object the remote's index already names: a tree is only ever sent
after everything under it (children first, and data packs before the
metadata pack that names them), so a tree the remote holds means its whole
subtree is there. A push of a 10-file batch on a 100k-file tree walks the
changed directories only and sends one or two packs.

Fetching walks the remote's metadata (whole metadata packs, kept in memory
for the walk), then fetches the contents the local store lacks, a data pack
whole when most of it is wanted, else object by object with range requests.
Every object is checked against its digest before the local store takes it,
and nothing names it locally until the caller commits its records.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import zstandard

from earshot.cas import faults, schema
from earshot.cas.digest import Digest, blob_digest, snapshot_digest, tree_digest
from earshot.cas.location import Codec, CorruptObject, Location, ObjectType
from earshot.cas.objects import MissingObject, ObjectReader, ObjectWriter, decode_chunks
from earshot.cas.progress import QUIET, Progress
from earshot.cas.snapshot import decode_snapshot
from earshot.cas.tree import Kind, decode_tree

from .crypto import NONCE_SIZE, TAG_SIZE, Tampered, content_name
from .locks import Lock
from .packs import META_TYPES, PACK_TARGET, Entry, PackBuilder, open_object
from .repository import Repository
from .storage import RemoteError

#: A data pack is fetched whole when at least this share of it is wanted.
_WHOLE_PACK_SHARE = 0.5


@dataclass
class Sent:
    objects: int = 0
    bytes: int = 0
    packs: int = 0


@dataclass
class Fetched:
    objects: int = 0
    bytes: int = 0
    requests: int = 0


# -- sending ------------------------------------------------------------------


def missing_objects(
    reader: ObjectReader,
    snapshots: Iterable[Digest],
    blobs: Iterable[Digest],
    remote_has: Callable[[Digest], bool],
    whole: bool = False,
) -> tuple[list[Digest], list[Digest]]:
    """(contents, metadata) the remote lacks; metadata children first.

    The walk stops at every object the remote has (all under it is there);
    ``whole`` walks everything and trusts nothing of that (a push that must
    check the remote again after a gc may have run beside it).
    """
    seen: set[Digest] = set()
    data: list[Digest] = []
    meta_pre: list[Digest] = []

    def lacks(digest: Digest) -> bool:
        return not remote_has(digest)

    def blob(digest: Digest) -> None:
        if digest in seen or not (whole or lacks(digest)):
            return
        seen.add(digest)
        loc = reader.locate(digest)
        if loc is None:
            raise MissingObject(digest)
        if loc.type is ObjectType.CHUNKED:
            if lacks(digest):
                meta_pre.append(digest)
            for chunk, _size in decode_chunks(reader.read_raw(digest)[1]):
                blob(chunk)
        elif lacks(digest):
            data.append(digest)

    stack: list[Digest] = []
    for snap in snapshots:
        if snap in seen or not (whole or lacks(snap)):
            continue
        seen.add(snap)
        if lacks(snap):
            meta_pre.append(snap)
        stack.append(reader.read_snapshot(snap).tree)
        while stack:
            tree = stack.pop()
            if tree in seen or not (whole or lacks(tree)):
                continue
            seen.add(tree)
            if lacks(tree):
                meta_pre.append(tree)
            for entry in reader.read_tree(tree):
                if entry.digest is None:
                    continue
                if entry.kind is Kind.DIR:
                    stack.append(entry.digest)
                else:
                    blob(entry.digest)
    for digest in blobs:
        blob(digest)
    meta_pre.reverse()  # pre-order reversed: every object after all it names
    return data, meta_pre


def send(
    repo: Repository,
    reader: ObjectReader,
    data: list[Digest],
    meta: list[Digest],
    progress: Progress = QUIET,
    lock: Lock | None = None,
    loose: dict[Digest, bytes] | None = None,
    force: bool = False,
) -> Sent:
    """Upload the objects, contents first; each pack is followed by its index file.

    ``loose``: contents that are in no store (a higher layer's documents),
    sent as contents unless the remote's index names them (``force``: even so,
    the caller having checked they are truly there).
    """
    sent = Sent()
    if progress.active:
        total = sum(_located(reader, d).stored for d in (*data, *meta))
        progress.stage("pushing", len(data) + len(meta), total, unit="objects")

    def ship(builder: PackBuilder) -> None:
        if not builder.objects:
            return
        name = repo.put_pack(bytes(builder.data))
        faults.point("remote-pack-sent")
        if lock is not None:
            lock.refresh()
            if lock.lapsed:
                # A gc beside a lapsed lock may have taken this pack, unnamed
                # yet: sent again (same bytes, same name) before its index.
                repo.put_pack(bytes(builder.data))
        repo.put_index(builder.entries(name))
        faults.point("remote-index-sent")
        sent.packs += 1
        sent.bytes += len(builder)

    index = repo.index()
    for group in (data, meta):
        builder = PackBuilder(repo.key)
        if group is data:
            for digest, raw in (loose or {}).items():
                if force or digest not in index:
                    packed = zstandard.ZstdCompressor(level=3).compress(raw)
                    codec = Codec.ZSTD if len(packed) < len(raw) else Codec.RAW
                    body = packed if codec is Codec.ZSTD else raw
                    builder.add(digest, ObjectType.BLOB, codec, body, len(raw))
                    sent.objects += 1
        for digest in group:
            loc = _located(reader, digest)
            stored = schema.read_packed(reader.view, loc)
            if stored is None:
                raise MissingObject(digest)
            builder.add(digest, loc.type, loc.codec, bytes(stored), loc.raw)
            sent.objects += 1
            progress.advance(1, loc.stored)
            if len(builder) >= PACK_TARGET:
                ship(builder)
                builder = PackBuilder(repo.key)
        ship(builder)
    return sent


def _located(reader: ObjectReader, digest: Digest) -> Location:
    loc = reader.locate(digest)
    if loc is None:
        raise MissingObject(digest)
    return loc


# -- fetching -----------------------------------------------------------------


class Fetcher:
    """Reads objects from a remote, verified: into a local store's writer, or
    (with no writer) only to walk them."""

    def __init__(
        self, repo: Repository, writer: ObjectWriter | None, progress: Progress = QUIET
    ) -> None:
        self.repo = repo
        self.writer = writer
        self.progress = progress
        self.index = repo.index()
        self.fetched = Fetched()
        self._meta_packs: dict[str, bytes] = {}
        self._dctx = zstandard.ZstdDecompressor()

    def entry(self, digest: Digest) -> Entry:
        found = self.index.get(digest)
        if found is None:
            raise RemoteError(
                self.repo.storage.url,
                f"object {digest.hex()[:12]} is named but not on the remote "
                "(an unfinished push? run 'earshot fsck --remote NAME')",
            )
        return found

    def fetch(self, snapshots: Iterable[Digest], blobs: Iterable[Digest]) -> Fetched:
        """Bring every object reachable from ``snapshots``, and ``blobs``, that the
        local store lacks. Contents are written first, metadata after."""
        assert self.writer is not None
        missing = [b for b in dict.fromkeys(blobs) if not self.writer.has(b)]
        # A content over the chunking threshold is a chunk list: metadata,
        # walked to its chunks like a tree.
        lists = [b for b in missing if self.entry(b).type in META_TYPES]
        metadata, wanted = self.walk([*snapshots, *lists], self.writer.has)
        wanted.update(b for b in missing if b not in lists)
        self._fetch_data(sorted(wanted))
        # Children before parents, as a push sends them: the walk found
        # parents first.
        for digest, entry, stored in reversed(metadata):
            self.writer.append_stored(digest, _location(entry), stored)
            if entry.type is ObjectType.CHUNKED:
                self._check_chunked(digest)
        self._meta_packs.clear()
        return self.fetched

    def walk(
        self, snapshots: Iterable[Digest], have: Callable[[Digest], bool]
    ) -> tuple[list[tuple[Digest, Entry, bytes]], set[Digest]]:
        """The remote's metadata reachable from ``snapshots`` that ``have`` lacks,
        each checked against its digest (parents first), and the contents it names."""
        metadata: list[tuple[Digest, Entry, bytes]] = []
        wanted: set[Digest] = set()
        frontier = [s for s in dict.fromkeys(snapshots) if not have(s)]
        seen: set[Digest] = set(frontier)
        self.progress.stage("reading the remote's trees", None, unit="objects")
        while frontier:
            digest = frontier.pop()
            entry = self.entry(digest)
            stored = self._meta_object(digest, entry)
            raw = self._raw(digest, entry, stored)
            metadata.append((digest, entry, stored))
            self.progress.advance(1, len(stored))
            for child in self._children(digest, entry.type, raw):
                if child in seen or have(child):
                    continue
                seen.add(child)
                if self.entry(child).type in META_TYPES:
                    frontier.append(child)
                else:
                    wanted.add(child)
        return metadata, wanted

    @staticmethod
    def _children(digest: Digest, kind: ObjectType, raw: bytes) -> list[Digest]:
        if kind is ObjectType.SNAPSHOT:
            if snapshot_digest(raw) != digest:
                raise Tampered(f"snapshot {digest.hex()[:12]}")
            return [decode_snapshot(raw).tree]
        if kind is ObjectType.TREE:
            if tree_digest(raw) != digest:
                raise Tampered(f"tree {digest.hex()[:12]}")
            return [e.digest for e in decode_tree(raw) if e.digest is not None]
        if kind is ObjectType.CHUNKED:
            # Checked once its chunks are in (the whole content's digest).
            return [chunk for chunk, _size in decode_chunks(raw)]
        raise Tampered(f"object {digest.hex()[:12]} (a content where a tree was named)")

    def _meta_object(self, digest: Digest, entry: Entry) -> bytes:
        pack = self._meta_packs.get(entry.pack)
        if pack is None:
            pack = self._get(f"data/{entry.pack}")
            self._meta_packs[entry.pack] = pack
        sealed = pack[entry.offset : entry.offset + entry.length]
        return open_object(self.repo.key, digest, entry, sealed)

    def _fetch_data(self, wanted: list[Digest]) -> None:
        assert self.writer is not None
        by_pack: dict[str, list[tuple[Digest, Entry]]] = defaultdict(list)
        for digest in wanted:
            by_pack[self.entry(digest).pack].append((digest, self.entry(digest)))
        total = sum(e.length for items in by_pack.values() for _, e in items)
        self.progress.stage("fetching", len(wanted), total, unit="objects")
        ends = self._pack_ends(set(by_pack))
        for pack, items in by_pack.items():
            want = sum(e.length for _, e in items)
            whole = self._get(f"data/{pack}") if want >= ends[pack] * _WHOLE_PACK_SHARE else None
            for digest, entry in sorted(items, key=lambda item: item[1].offset):
                if whole is not None:
                    sealed = whole[entry.offset : entry.offset + entry.length]
                else:
                    sealed = self._get_range(f"data/{pack}", entry.offset, entry.length)
                stored = open_object(self.repo.key, digest, entry, sealed)
                raw = self._raw(digest, entry, stored)
                if entry.type is not ObjectType.BLOB or blob_digest(raw) != digest:
                    raise Tampered(f"object {digest.hex()[:12]}")
                self.writer.append_stored(digest, _location(entry), stored)
                self.fetched.objects += 1
                self.progress.advance(1, entry.length)
            faults.point("remote-pack-fetched")

    def _pack_ends(self, packs: set[str]) -> dict[str, int]:
        """How long each pack is, as far as the index knows it (its last object's end)."""
        ends = dict.fromkeys(packs, 0)
        for entry in self.index.values():
            if entry.pack in ends:
                ends[entry.pack] = max(ends[entry.pack], entry.offset + entry.length)
        return ends

    def _check_chunked(self, digest: Digest) -> None:
        """A chunked file's whole content against its digest, its chunks in."""
        assert self.writer is not None
        try:
            self.writer.verify(digest)
        except (CorruptObject, MissingObject):
            raise Tampered(f"object {digest.hex()[:12]}") from None

    def _raw(self, digest: Digest, entry: Entry, stored: bytes) -> bytes:
        if entry.codec is Codec.RAW:
            raw = stored
        else:
            try:
                raw = self._dctx.decompress(stored, max_output_size=entry.raw)
            except zstandard.ZstdError:
                raise Tampered(f"object {digest.hex()[:12]}") from None
        if len(raw) != entry.raw:
            raise Tampered(f"object {digest.hex()[:12]}")
        return raw

    def _get(self, path: str) -> bytes:
        data = self.repo.storage.get(path)
        self.fetched.requests += 1
        if data is None:
            raise RemoteError(self.repo.storage.url, f"{path} is missing")
        self.fetched.bytes += len(data)
        if content_name(data) != path.rsplit("/", 1)[-1]:
            raise Tampered(path)
        return data

    def _get_range(self, path: str, offset: int, length: int) -> bytes:
        data = self.repo.storage.get_range(path, offset, length)
        self.fetched.requests += 1
        if data is None or len(data) != length:
            raise RemoteError(self.repo.storage.url, f"{path} is missing or short")
        self.fetched.bytes += len(data)
        return data


def _location(entry: Entry) -> Location:
    """Where the local store's writer takes an object: the stored (codec) length
    is the sealed length less the nonce and the tag."""
    stored = entry.length - NONCE_SIZE - TAG_SIZE
    return Location(entry.type, entry.codec, 0, 0, stored, entry.raw)
