"""parse_index against an index writer of its own (gitformat-index(5)), and against damage.

Real git-written indexes are read in test_scan_git.py; here the decoder is
driven through every version, both object name sizes, paths of any length
(past the 12-bit length field) and every way of being cut short.
"""

from __future__ import annotations

import struct

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from earshot.cas.gitindex import BadIndex, SplitIndex, parse_index


def git_varint(n: int) -> bytes:
    """git's offset varint (varint.c encode_varint)."""
    out = [n & 0x7F]
    n >>= 7
    while n:
        n -= 1
        out.append(0x80 | (n & 0x7F))
        n >>= 7
    return bytes(reversed(out))


def encode_index(
    paths: list[bytes],
    version: int,
    digest_size: int = 20,
    extended: frozenset[int] = frozenset(),
    extensions: tuple[tuple[bytes, bytes], ...] = (),
) -> bytes:
    out = bytearray(b"DIRC" + struct.pack(">II", version, len(paths)))
    previous = b""
    for i, path in enumerate(paths):
        start = len(out)
        out += bytes(40) + b"\xab" * digest_size
        wide = version >= 3 and i in extended
        out += struct.pack(">H", min(len(path), 0xFFF) | (0x4000 if wide else 0))
        if wide:
            out += struct.pack(">H", 0x2000)  # intent-to-add
        if version == 4:
            common = 0  # bytes shared with the previous path (not path components)
            while common < min(len(previous), len(path)) and previous[common] == path[common]:
                common += 1
            out += git_varint(len(previous) - common) + path[common:] + b"\0"
        else:
            out += path
            out += bytes(8 - (len(out) - start) % 8)  # 1-8 NULs
        previous = path
    for signature, data in extensions:
        out += signature + struct.pack(">I", len(data)) + data
    return bytes(out + b"\xcd" * digest_size)


names = st.binary(min_size=1, max_size=12).filter(lambda b: b"\0" not in b and b"/" not in b)
paths = st.lists(
    st.lists(names, min_size=1, max_size=4).map(b"/".join), min_size=0, max_size=30, unique=True
).map(sorted)


@given(
    paths=paths,
    version=st.sampled_from([2, 3, 4]),
    digest_size=st.sampled_from([20, 32]),
    wide=st.sets(st.integers(0, 29)),
)
@example(paths=[b"a" * 5000, b"b"], version=2, digest_size=20, wide=set())
@example(paths=[b"a" * 5000, b"b" * 300 + b"/c"], version=4, digest_size=32, wide={0})
@example(paths=[b"x" * 200, b"\xc3\xa9/z"], version=4, digest_size=20, wide=set())
def test_parse_index_reads_back_every_path_written(
    paths: list[bytes], version: int, digest_size: int, wide: set[int]
) -> None:
    data = encode_index(paths, version, digest_size, frozenset(wide), ((b"TREE", b"\x00" * 9),))
    read = parse_index(data, digest_size)
    assert (read.version, read.paths) == (version, paths)


@given(paths=paths.filter(bool), version=st.sampled_from([2, 3, 4]), data=st.data())
def test_a_cut_index_is_a_bad_index_never_another_error(
    paths: list[bytes], version: int, data: st.DataObject
) -> None:
    whole = encode_index(paths, version)
    cut = data.draw(st.integers(0, len(whole) - 21))  # short of the last entry's end
    try:
        read = parse_index(whole[:cut] + b"\xcd" * 20)
    except BadIndex:
        return
    assert read.paths != paths  # it never reads back what was not all there


def test_a_split_index_is_refused() -> None:
    data = encode_index([b"a"], 2, extensions=((b"link", b"\x11" * 20),))
    with pytest.raises(SplitIndex):
        parse_index(data)


@pytest.mark.parametrize(
    ("data", "why"),
    [
        (b"DIRC", "too short"),
        (b"XXXX" + struct.pack(">II", 2, 0) + bytes(20), "no DIRC signature"),
        (b"DIRC" + struct.pack(">II", 5, 0) + bytes(20), "version 5"),
        (encode_index([b"b", b"a"], 2), "entries out of order"),
    ],
)
def test_an_index_that_is_not_one_is_refused_with_the_reason(data: bytes, why: str) -> None:
    with pytest.raises(BadIndex, match=why):
        parse_index(data)
