"""Where an object lives: its type, codec, pack and place in it (the index value)."""

from __future__ import annotations

import struct
from dataclasses import dataclass
from enum import IntEnum

from .digest import Digest, short
from .errors import EarshotError

_INDEX = struct.Struct(">BBQIII")


class CorruptObject(EarshotError):
    """A stored object whose bytes no longer hash to its digest, or whose index
    entry no longer says where it is."""

    def __init__(self, digest: Digest, why: str) -> None:
        super().__init__(f"object {short(digest)} is corrupt: {why}")
        self.digest = digest
        self.why = why


class ObjectType(IntEnum):
    BLOB = 1
    CHUNKED = 2
    TREE = 3
    SNAPSHOT = 4


class Codec(IntEnum):
    RAW = 0
    ZSTD = 1


@dataclass(frozen=True, slots=True)
class Location:
    """Where an object lives."""

    type: ObjectType
    codec: Codec
    pack: int
    offset: int
    stored: int
    raw: int

    def encode(self) -> bytes:
        return _INDEX.pack(self.type, self.codec, self.pack, self.offset, self.stored, self.raw)

    @staticmethod
    def decode(data: bytes, digest: Digest) -> Location:
        """The index entry of ``digest``; ``CorruptObject`` if it is damaged."""
        try:
            t, c, pack, offset, stored, raw = _INDEX.unpack(data)
            return Location(ObjectType(t), Codec(c), pack, offset, stored, raw)
        except (struct.error, ValueError):
            raise CorruptObject(digest, "its index entry is damaged") from None
