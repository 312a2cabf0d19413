"""The remote's pack and index files: their byte layout, nothing of the network.

A pack (``data/<name>``) is a run of sealed objects, each sealed on its own
so one can be read with a range request. An object is sealed with its
digest, type and codec as associated data: bytes swapped between two places
fail to open. The codec is the local store's (zstd or raw): an object goes
out as it is stored, never recompressed.

Packs are of two sorts, as restic keeps trees apart from data: *metadata*
(snapshots, trees, chunk lists: what a pull walks first, a few MiB for a
100k-file tree) and *data* (file contents, fetched once the walk knows
which it needs).

An index file (``index/<name>``) lists what some packs hold::

    b"ESIX1\\n" + JSON list of pack names + b"\\n" + records
    record = digest (32) | pack number (2) | offset (4) | length (4)
             | type (1) | codec (1) | raw length (8)
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass

from earshot.cas.digest import DIGEST_SIZE, Digest
from earshot.cas.location import Codec, ObjectType

from .crypto import MasterKey, Tampered

_MAGIC = b"ESIX1\n"
_RECORD = struct.Struct(">32sHIIBBQ")
INDEX_AAD = b"earshot index"
#: Objects are gathered to about this size per pack before it is sent.
PACK_TARGET = 8 << 20
#: Metadata objects: what a pull reads before it knows which contents it needs.
META_TYPES = frozenset({ObjectType.TREE, ObjectType.SNAPSHOT, ObjectType.CHUNKED})


@dataclass(frozen=True, slots=True)
class Entry:
    """Where one object lives on the remote."""

    pack: str
    offset: int
    length: int
    type: ObjectType
    codec: Codec
    raw: int


def object_aad(digest: Digest, kind: ObjectType, codec: Codec) -> bytes:
    return bytes(digest) + bytes([int(kind), int(codec)])


def encode_index(entries: dict[Digest, Entry]) -> bytes:
    packs = sorted({e.pack for e in entries.values()})
    number = {name: i for i, name in enumerate(packs)}
    out = bytearray(_MAGIC + json.dumps(packs).encode() + b"\n")
    for digest, e in entries.items():
        out += _RECORD.pack(
            bytes(digest), number[e.pack], e.offset, e.length, e.type, e.codec, e.raw
        )
    return bytes(out)


def decode_index(data: bytes, what: str) -> dict[Digest, Entry]:
    """An index file's entries; ``Tampered`` if it does not parse (it opened, so
    a bad layout means a writer's bug or a forged key: refused all the same)."""
    try:
        if not data.startswith(_MAGIC):
            raise ValueError("no magic")
        line_end = data.index(b"\n", len(_MAGIC))
        packs = json.loads(data[len(_MAGIC) : line_end])
        body = memoryview(data)[line_end + 1 :]
        if len(body) % _RECORD.size or not all(isinstance(p, str) for p in packs):
            raise ValueError("bad length")
        entries: dict[Digest, Entry] = {}
        for digest, pack, offset, length, kind, codec, raw in _RECORD.iter_unpack(body):
            entries[Digest(digest)] = Entry(
                packs[pack], offset, length, ObjectType(kind), Codec(codec), raw
            )
        return entries
    except (ValueError, IndexError, struct.error):
        raise Tampered(what) from None


class PackBuilder:
    """Objects sealed one after another into one pack, with their entries."""

    def __init__(self, key: MasterKey) -> None:
        self._key = key
        self.data = bytearray()
        self.objects: list[tuple[Digest, int, int, ObjectType, Codec, int]] = []

    def add(self, digest: Digest, kind: ObjectType, codec: Codec, stored: bytes, raw: int) -> None:
        sealed = self._key.seal(stored, object_aad(digest, kind, codec))
        self.objects.append((digest, len(self.data), len(sealed), kind, codec, raw))
        self.data += sealed

    def entries(self, name: str) -> dict[Digest, Entry]:
        return {d: Entry(name, o, n, k, c, r) for d, o, n, k, c, r in self.objects}

    def __len__(self) -> int:
        return len(self.data)


def open_object(key: MasterKey, digest: Digest, entry: Entry, sealed: bytes) -> bytes:
    """An object's stored bytes (the codec's), authenticated as ``digest``."""
    return key.open(
        sealed, object_aad(digest, entry.type, entry.codec), f"object {digest.hex()[:12]}"
    )


assert DIGEST_SIZE == 32
