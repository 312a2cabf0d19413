"""Snapshot records: canonical JSON, round trip, and what decode refuses."""

from __future__ import annotations

import json

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from earshot.cas.digest import Digest, blob_digest, snapshot_digest, tree_digest
from earshot.cas.snapshot import (
    CorruptSnapshot,
    Snapshot,
    decode_snapshot,
    encode_snapshot,
    hash_snapshot,
)

TREE = Digest(bytes(range(32)))

# Roots come from the file system: arbitrary bytes, decoded with surrogateescape.
fs_text = st.binary(max_size=40).map(lambda b: b.decode("utf-8", "surrogateescape"))
texts = st.text(max_size=40) | fs_text

snapshots = st.builds(
    Snapshot,
    tree=st.binary(min_size=32, max_size=32).map(Digest),
    time_ns=st.integers(0, 2**64 - 1),
    root=texts,
    note=texts,
    session=st.none() | st.text(max_size=20),
    files=st.integers(0, 2**40),
    content_bytes=st.integers(0, 2**63),
    unrecorded=st.integers(0, 2**32),
)

EDGE = [
    Snapshot(TREE, 0, ""),
    Snapshot(
        TREE,
        1_700_000_000_000_000_000,
        "/home/u/proj\udcff",
        'note "quoted" \\ \n',
        "sess-1",
        3,
        10,
        1,
    ),
    Snapshot(TREE, 2**63, "/ünïcödé/名前", "🙂", None, 0, 0, 0),
]


@given(snapshots)
@example(EDGE[0])
@example(EDGE[1])
@example(EDGE[2])
def test_snapshot_round_trips_through_encode_and_decode(snap: Snapshot) -> None:
    assert decode_snapshot(encode_snapshot(snap)) == snap
    assert decode_snapshot(memoryview(encode_snapshot(snap))) == snap


@given(snapshots)
@example(EDGE[1])
def test_snapshot_encoding_is_canonical_ascii_json_with_sorted_keys(snap: Snapshot) -> None:
    encoded = encode_snapshot(snap)
    assert encoded.isascii()
    canonical = json.dumps(
        json.loads(encoded), sort_keys=True, separators=(",", ":"), ensure_ascii=True
    )
    assert encoded == canonical.encode()


@given(snapshots, snapshots)
def test_snapshot_different_records_have_different_encodings(a: Snapshot, b: Snapshot) -> None:
    assert (encode_snapshot(a) == encode_snapshot(b)) == (a == b)


def test_snapshot_digest_is_keyed_and_differs_from_blob_and_tree_digests_of_the_same_bytes() -> (
    None
):
    digest, encoded = hash_snapshot(EDGE[1])
    assert digest == snapshot_digest(encoded)
    assert digest not in (blob_digest(encoded), tree_digest(encoded))


def _doc(**changes: object) -> bytes:
    doc = json.loads(encode_snapshot(EDGE[1]))
    for key, value in changes.items():
        if value is KeyError:
            del doc[key]
        else:
            doc[key] = value
    return json.dumps(doc).encode()


CORRUPT = {
    "not-json": b"not json",
    "not-utf8": b"\xff\xfe{}",
    "empty": b"",
    "version-2": _doc(v=2),
    "no-version": _doc(v=KeyError),
    "tree-not-hex": _doc(tree="zz" * 32),
    "tree-too-short": _doc(tree="ab" * 31),
    "no-tree": _doc(tree=KeyError),
    "no-time": _doc(time_ns=KeyError),
    "time-not-a-number": _doc(time_ns="soon"),
    "no-root": _doc(root=KeyError),
    "no-note": _doc(note=KeyError),
    "no-session": _doc(session=KeyError),
    "files-not-a-number": _doc(files="many"),
    "no-unrecorded": _doc(unrecorded=KeyError),
}


@pytest.mark.parametrize("data", list(CORRUPT.values()), ids=list(CORRUPT))
def test_snapshot_decode_rejects_a_defective_record(data: bytes) -> None:
    with pytest.raises(CorruptSnapshot):
        decode_snapshot(data)


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(b"[1, 2]", id="json-array"),
        pytest.param(b'"v"', id="json-string"),
        pytest.param(b"null", id="json-null"),
        pytest.param(_doc(tree=5), id="tree-not-a-string"),
    ],
)
def test_snapshot_decode_rejects_a_record_of_the_wrong_json_type(data: bytes) -> None:
    with pytest.raises(CorruptSnapshot):
        decode_snapshot(data)


def test_snapshot_decode_rejects_every_truncation() -> None:
    encoded = encode_snapshot(EDGE[1])
    for cut in range(len(encoded)):
        with pytest.raises(CorruptSnapshot):
            decode_snapshot(encoded[:cut])


@pytest.mark.parametrize("session", [5, ["a"], {"x": 1}])
def test_snapshot_decode_rejects_a_session_that_is_not_text_or_null(session: object) -> None:
    with pytest.raises(CorruptSnapshot):
        decode_snapshot(_doc(session=session))
