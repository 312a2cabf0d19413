"""What the store reads that is not an object, fed damaged bytes: stat-cache records,
git index files, mountinfo and an intent's notes. Each is a cache or a hint:
damage makes it absent or refused in words, never an exception.
"""

from __future__ import annotations

import marshal
from pathlib import Path

import blake3
from fuzz import DEEP_JSON, damaged, examples, json_bytes, json_values
from hypothesis import example, given
from hypothesis import strategies as st
from test_gitindex import encode_index
from test_gitindex import paths as index_paths

from earshot.cas.gitindex import BadIndex, parse_index
from earshot.cas.intents import DAMAGED, read_notes
from earshot.cas.mounts import mount_points, parse_mountinfo
from earshot.cas.statcache import DirRecord, decode_record

# -- stat-cache records -----------------------------------------------------------------

entry_keys = st.tuples(
    *[st.integers(0, 7), st.integers(0, 0o7777)],
    *[st.integers(-1, 2**62)] * 4,
    st.none() | st.binary(min_size=32, max_size=32),
    st.integers(0, 8),
)
record_bodies = st.builds(
    lambda *fields: marshal.dumps((5, *fields)),
    st.text(max_size=12),
    st.binary(max_size=16),
    st.binary(min_size=32, max_size=32),
    st.dictionaries(st.text(max_size=6), entry_keys, max_size=3),
    st.integers(-1, 2**62),
    st.lists(st.text(max_size=8), max_size=2).map(tuple),
    st.binary(max_size=8),
)


def checked(body: bytes) -> bytes:
    return body + blake3.blake3(body).digest(16)


@examples(4)
@given(damaged(record_bodies.map(checked)))
def test_a_damaged_stat_cache_record_is_absent(raw: bytes) -> None:
    assert decode_record(raw) is None or raw == checked(raw[:-16])


marshal_values = st.recursive(
    st.none() | st.integers() | st.binary(max_size=8) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4).map(tuple)
        | st.lists(inner, max_size=4)
        | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=10,
)
other_shapes = st.one_of(
    marshal_values,
    st.lists(marshal_values, min_size=7, max_size=9).map(lambda rest: (5, *rest)),
)


@examples(2)
@given(other_shapes.map(marshal.dumps))
@example(marshal.dumps((5, "", b"", b"", {}, 0, 7, b"")))
@example(marshal.dumps((5, "", b"", b"", {}, 0, (), b"", b"")))
@example(marshal.dumps("abcdefgh"))
def test_a_stat_cache_record_that_is_checked_but_not_a_record_is_absent(body: bytes) -> None:
    # Its checksum matches (written so by a version with other fields): loading
    # it must still fail in the one way that makes its directory read again.
    # (Only sound marshal streams: marshal given damaged bytes may allocate a
    # tuple of 2**31 items; the checksum keeps damage from reaching it.)
    record = decode_record(checked(body))
    assert record is None or isinstance(record, DirRecord)


# -- git index files --------------------------------------------------------------------

indexes = st.builds(encode_index, index_paths, st.sampled_from([2, 3, 4]))


@examples(4)
@given(damaged(indexes, max_size=400))
def test_a_damaged_git_index_is_a_bad_index_or_sorted_paths(data: bytes) -> None:
    try:
        read = parse_index(data)
    except BadIndex:
        return
    assert read.paths == sorted(read.paths)


# -- mountinfo --------------------------------------------------------------------------

MOUNTINFO = (
    b"22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n"
    b"23 22 0:21 / /proc rw,nosuid - proc proc rw\n"
    b"24 22 0:22 / /my\\040disk rw master:2 - tmpfs tmpfs rw\n"
)


@examples(4)
@given(damaged(st.just(MOUNTINFO), max_size=120))
def test_damaged_mountinfo_lines_are_skipped(data: bytes) -> None:
    types = parse_mountinfo(data)
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in types.items())
    assert all(isinstance(i, int) for i, _ in mount_points(data))


# -- an intent's notes ------------------------------------------------------------------

notes = st.lists(json_bytes(st.dictionaries(st.text(max_size=6), json_values, max_size=3)))
note_files = notes.map(lambda lines: b"".join(line + b"\n" for line in lines))


@examples(1)
@given(damaged(note_files, max_size=120) | st.just(DEEP_JSON + b"\n{}\n"))
def test_damaged_notes_read_as_notes_ending_with_one_that_says_so(data: bytes) -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "notes"
        path.write_bytes(data)
        read = read_notes(path)
    assert all(isinstance(note, dict) for note in read)
    lines = data.split(b"\n")
    if any(line.strip() and not _is_note(line) for line in lines[:-1]):
        assert any(DAMAGED in note for note in read)


def _is_note(line: bytes) -> bool:
    import json

    try:
        return isinstance(json.loads(line), dict)
    except (ValueError, RecursionError):
        return False
