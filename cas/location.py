"""Where an object lives: its type, codec, pack and place in it (the index value)."""

from __future__ import annotations

import struct
from dataclasses import dataclass
from enum import IntEnum

_INDEX = struct.Struct(">BBQIII")


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
    def decode(data: bytes) -> Location:
        t, c, pack, offset, stored, raw = _INDEX.unpack(data)
        return Location(ObjectType(t), Codec(c), pack, offset, stored, raw)
