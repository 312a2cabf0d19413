"""Unsigned LEB128 varints: round trip, minimal length, and what decode refuses."""

from __future__ import annotations

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from earshot.cas.varint import Truncated, decode_uvarint, encode_uvarint

U64 = st.integers(min_value=0, max_value=2**64 - 1)


@given(U64)
@example(0)
@example(1)
@example(0x7F)
@example(0x80)
@example(0x3FFF)
@example(0x4000)
@example(2**63)
@example(2**64 - 1)
def test_uvarint_round_trips_every_64_bit_value(value: int) -> None:
    encoded = encode_uvarint(value)
    assert decode_uvarint(encoded, 0) == (value, len(encoded))


@given(U64, st.binary(max_size=8), st.binary(max_size=8))
def test_uvarint_decodes_at_an_offset_and_returns_the_position_after_it(
    value: int, before: bytes, after: bytes
) -> None:
    data = before + encode_uvarint(value) + after
    assert decode_uvarint(data, len(before)) == (value, len(data) - len(after))
    assert decode_uvarint(memoryview(data), len(before)) == (value, len(data) - len(after))


@given(U64)
@example(0)
@example(0x7F)
@example(0x80)
def test_uvarint_encoding_has_minimal_length(value: int) -> None:
    assert len(encode_uvarint(value)) == max(1, -(-value.bit_length() // 7))


@given(U64, U64)
def test_uvarint_distinct_values_have_distinct_encodings(a: int, b: int) -> None:
    assert (encode_uvarint(a) == encode_uvarint(b)) == (a == b)


@pytest.mark.parametrize(
    ("data", "value"),
    [(b"\x00", 0), (b"\x01", 1), (b"\x7f", 127), (b"\x80\x01", 128), (b"\xac\x02", 300)],
)
def test_uvarint_matches_known_leb128_encodings(data: bytes, value: int) -> None:
    assert encode_uvarint(value) == data
    assert decode_uvarint(data, 0) == (value, len(data))


def test_uvarint_encode_refuses_a_negative_number() -> None:
    with pytest.raises(ValueError):
        encode_uvarint(-1)


@pytest.mark.parametrize(
    "data",
    [b"\x80\x00", b"\x81\x00", b"\xff\x80\x00", b"\x80\x80\x80\x00"],
    ids=["zero-in-two-bytes", "one-in-two-bytes", "trailing-zero-groups", "zero-in-four-bytes"],
)
def test_uvarint_decode_rejects_non_minimal_encodings(data: bytes) -> None:
    with pytest.raises(Truncated, match="non-minimal"):
        decode_uvarint(data, 0)


@pytest.mark.parametrize("data", [b"", b"\x80", b"\xff\xff", b"\x01\x80"])
def test_uvarint_decode_rejects_data_ending_inside_a_value(data: bytes) -> None:
    pos = 1 if data == b"\x01\x80" else 0
    with pytest.raises(Truncated):
        decode_uvarint(data, pos)


def test_uvarint_decode_rejects_more_than_ten_bytes() -> None:
    with pytest.raises(Truncated, match="too long"):
        decode_uvarint(b"\x81" * 10 + b"\x01", 0)
