"""Unsigned LEB128 varints, the length prefix of every canonical encoding."""

from __future__ import annotations

from .errors import EarshotError


class Truncated(EarshotError):
    """An encoding ended in the middle of a value."""

    def __init__(self, what: str) -> None:
        super().__init__(f"truncated {what}")


def encode_uvarint(value: int) -> bytes:
    """Encode a non-negative integer."""
    if value < 0:
        raise ValueError("uvarint of a negative number")
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def decode_uvarint(data: bytes | memoryview, pos: int) -> tuple[int, int]:
    """Decode the varint at ``pos``; return (value, position after it).

    Rejects non-minimal encodings, so every value has exactly one encoding
    (canonical forms must not have two spellings of one object).
    """
    value = 0
    shift = 0
    start = pos
    while True:
        if pos >= len(data):
            raise Truncated("varint")
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            if byte == 0 and pos - start > 1:
                raise Truncated("varint (non-minimal)")
            return value, pos
        shift += 7
        if shift > 63:
            raise Truncated("varint (too long)")
