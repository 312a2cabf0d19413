"""Trees: canonical encoding, round trip, and every defect decode must refuse."""

from __future__ import annotations

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from earshot.cas.digest import Digest, blob_digest, tree_digest
from earshot.cas.tree import (
    MAGIC,
    CorruptTree,
    Kind,
    TreeEntry,
    Unrecorded,
    decode_tree,
    encode_tree,
    hash_tree,
)
from earshot.cas.varint import encode_uvarint

D1 = Digest(bytes(range(32)))
D2 = Digest(bytes(range(32, 64)))

# Any bytes but "/" and NUL, and never "." or "..".
names = (
    st.lists(st.integers(1, 255).filter(lambda b: b != 0x2F), min_size=1, max_size=12)
    .map(bytes)
    .filter(lambda n: n not in (b".", b".."))
)
modes = st.integers(0, 0o7777)
sizes = st.integers(0, 2**63 - 1)
digests = st.binary(min_size=32, max_size=32).map(Digest)


@st.composite
def entries(draw: st.DrawFn, name: bytes | None = None) -> TreeEntry:
    name = draw(names) if name is None else name
    kind = draw(st.sampled_from(Kind))
    if kind is Kind.UNRECORDED:
        return TreeEntry(
            name, kind, draw(modes), draw(sizes), None, draw(st.sampled_from(Unrecorded))
        )
    return TreeEntry(name, kind, draw(modes), draw(sizes), draw(digests))


listings = st.lists(entries(), unique_by=lambda e: e.name, max_size=10)

EDGE_LISTINGS = [
    [],
    [TreeEntry(b"big", Kind.UNRECORDED, 0o644, 2**40, None, Unrecorded.TOO_LARGE)],
    [
        TreeEntry(b"a", Kind.FILE, 0, 0, D1),
        TreeEntry(b"a\x01", Kind.SYMLINK, 0o777, 3, D2),
        TreeEntry(b"ab", Kind.DIR, 0o7777, 0, D1),
        TreeEntry(b"\xff\xfe", Kind.UNRECORDED, 0o600, 0, None, Unrecorded.SPECIAL),
    ],
    [
        TreeEntry(b"...", Kind.FILE, 0o644, 1, D1),
        TreeEntry(b".a", Kind.FILE, 0o644, 1, D1),
        TreeEntry(b"..a", Kind.FILE, 0o644, 1, D1),
        TreeEntry(b"bad\xff", Kind.FILE, 0o755, 7, D2),
        TreeEntry(b"x" * 300, Kind.UNRECORDED, 0, 0, None, Unrecorded.UNREADABLE),
    ],
]


def by_name(listing: list[TreeEntry]) -> list[TreeEntry]:
    return sorted(listing, key=lambda e: e.name)


def raw_entry(
    name: bytes, kind: int, mode: int = 0o644, size: int = 1, payload: bytes = D1
) -> bytes:
    """One entry, encoded by hand (bypassing encode_tree's checks)."""
    return (
        encode_uvarint(len(name))
        + name
        + bytes((kind,))
        + encode_uvarint(mode)
        + encode_uvarint(size)
        + payload
    )


# -- round trip and canonical form ---------------------------------------------


@given(listings)
@example(EDGE_LISTINGS[0])
@example(EDGE_LISTINGS[1])
@example(EDGE_LISTINGS[2])
@example(EDGE_LISTINGS[3])
def test_tree_round_trips_through_encode_and_decode(listing: list[TreeEntry]) -> None:
    assert decode_tree(encode_tree(listing)) == by_name(listing)
    assert decode_tree(memoryview(encode_tree(listing))) == by_name(listing)


@given(listings.flatmap(lambda listing: st.tuples(st.just(listing), st.permutations(listing))))
@example((EDGE_LISTINGS[2], list(reversed(EDGE_LISTINGS[2]))))
@example((EDGE_LISTINGS[3], EDGE_LISTINGS[3][1:] + EDGE_LISTINGS[3][:1]))
def test_tree_same_entries_in_any_order_give_the_same_bytes_and_digest(
    pair: tuple[list[TreeEntry], list[TreeEntry]],
) -> None:
    listing, shuffled = pair
    assert encode_tree(shuffled) == encode_tree(listing)
    assert hash_tree(shuffled) == hash_tree(listing)


@given(listings, listings)
def test_tree_different_listings_have_different_encodings(
    a: list[TreeEntry], b: list[TreeEntry]
) -> None:
    assert (encode_tree(a) == encode_tree(b)) == (by_name(a) == by_name(b))


def test_tree_encoding_starts_with_magic_and_lists_entries_in_name_byte_order() -> None:
    encoded = encode_tree(
        [TreeEntry(b"b", Kind.FILE, 0o644, 1, D1), TreeEntry(b"a", Kind.DIR, 0o755, 0, D2)]
    )
    assert encoded == MAGIC + raw_entry(b"a", Kind.DIR, 0o755, 0, D2) + raw_entry(
        b"b", Kind.FILE, 0o644, 1, D1
    )


def test_tree_digest_is_keyed_and_differs_from_the_blob_digest_of_the_same_bytes() -> None:
    digest, encoded = hash_tree([TreeEntry(b"a", Kind.FILE, 0o644, 1, D1)])
    assert digest == tree_digest(encoded)
    assert digest != blob_digest(encoded)


# -- decode refuses ---------------------------------------------------------------

GOOD = raw_entry(b"good", Kind.FILE)

CORRUPT = {
    "name-dotdot": MAGIC + raw_entry(b"..", Kind.DIR),
    "name-dot": MAGIC + raw_entry(b".", Kind.DIR),
    "name-empty": MAGIC + raw_entry(b"", Kind.FILE),
    "name-with-slash": MAGIC + raw_entry(b"../x", Kind.FILE),
    "name-with-slash-inside": MAGIC + raw_entry(b"a/b", Kind.FILE),
    "name-with-nul": MAGIC + raw_entry(b"a\0b", Kind.FILE),
    "dotdot-after-a-good-entry": MAGIC
    + raw_entry(b"!first", Kind.FILE)
    + raw_entry(b"..", Kind.DIR),
    "out-of-order": MAGIC + raw_entry(b"b", Kind.FILE) + raw_entry(b"a", Kind.FILE),
    "prefix-after-longer-name": MAGIC + raw_entry(b"ab", Kind.FILE) + raw_entry(b"a", Kind.FILE),
    "duplicate": MAGIC + GOOD + GOOD,
    "bad-kind-0": MAGIC + raw_entry(b"a", 0),
    "bad-kind-5": MAGIC + raw_entry(b"a", 5),
    "bad-kind-255": MAGIC + raw_entry(b"a", 255),
    "bad-unrecorded-reason": MAGIC + raw_entry(b"a", Kind.UNRECORDED, payload=b"\x09"),
    "unrecorded-without-reason": MAGIC + raw_entry(b"a", Kind.UNRECORDED, payload=b""),
    "mode-beyond-permission-bits": MAGIC + raw_entry(b"a", Kind.FILE, mode=0o100644),
    "short-digest": MAGIC + raw_entry(b"a", Kind.FILE, payload=D1[:31]),
    "name-longer-than-data": MAGIC + encode_uvarint(50) + b"abc",
    "entry-ends-after-name": MAGIC + encode_uvarint(1) + b"a",
    "non-minimal-name-length": MAGIC + b"\x81\x00" + b"a" + bytes((Kind.FILE,)) + b"\x01\x01" + D1,
    "non-minimal-mode": MAGIC + b"\x01a" + bytes((Kind.FILE,)) + b"\x81\x00" + b"\x01" + D1,
    "non-minimal-size": MAGIC + b"\x01a" + bytes((Kind.FILE,)) + b"\x01" + b"\x80\x00" + D1,
    "varint-too-long": MAGIC
    + b"\x01a"
    + bytes((Kind.FILE,))
    + b"\x81" * 10
    + b"\x01"
    + b"\x01"
    + D1,
    "bad-magic": b"T2" + GOOD,
    "no-magic": GOOD,
    "empty-data": b"",
    "half-magic": b"T",
}


@pytest.mark.parametrize("data", list(CORRUPT.values()), ids=list(CORRUPT))
def test_tree_decode_rejects_defective_encoding(data: bytes) -> None:
    with pytest.raises(CorruptTree):
        decode_tree(data)


def test_tree_decode_of_a_valid_hand_encoding_succeeds() -> None:
    # The control for the table above: the same hand encoder, no defect.
    assert decode_tree(MAGIC + GOOD) == [TreeEntry(b"good", Kind.FILE, 0o644, 1, D1)]


@given(listings.filter(lambda listing: len(listing) > 0))
@example(EDGE_LISTINGS[2])
@example(EDGE_LISTINGS[3])
def test_tree_decode_rejects_data_cut_inside_an_entry(listing: list[TreeEntry]) -> None:
    ordered = by_name(listing)
    encoded = encode_tree(ordered)
    boundaries = {len(encode_tree(ordered[:i])): i for i in range(len(ordered) + 1)}
    for cut in range(len(encoded)):
        if cut in boundaries:
            assert decode_tree(encoded[:cut]) == ordered[: boundaries[cut]]
        else:
            with pytest.raises(CorruptTree):
                decode_tree(encoded[:cut])


# -- encode refuses ---------------------------------------------------------------


@pytest.mark.parametrize("name", [b"", b".", b"..", b"a/b", b"/", b"a\0"])
def test_tree_encode_refuses_a_name_that_is_not_one_safe_component(name: bytes) -> None:
    with pytest.raises(CorruptTree):
        encode_tree([TreeEntry(name, Kind.FILE, 0o644, 1, D1)])


def test_tree_encode_refuses_duplicate_names() -> None:
    entry = TreeEntry(b"a", Kind.FILE, 0o644, 1, D1)
    with pytest.raises(CorruptTree, match="duplicate"):
        encode_tree([entry, TreeEntry(b"a", Kind.DIR, 0o755, 0, D2)])
    with pytest.raises(CorruptTree, match="duplicate"):
        encode_tree([entry, entry])


@pytest.mark.parametrize(
    "entry",
    [
        TreeEntry(b"a", Kind.UNRECORDED, 0o644, 1, None, None),
        TreeEntry(b"a", Kind.UNRECORDED, 0o644, 1, D1, Unrecorded.TOO_LARGE),
        TreeEntry(b"a", Kind.FILE, 0o644, 1, None),
        TreeEntry(b"a", Kind.SYMLINK, 0o777, 1, Digest(b"short")),
        TreeEntry(b"a", Kind.DIR, 0o755, 0, None),
    ],
    ids=[
        "unrecorded-no-reason",
        "unrecorded-with-digest",
        "file-no-digest",
        "short-digest",
        "dir-no-digest",
    ],
)
def test_tree_encode_refuses_an_entry_with_inconsistent_payload(entry: TreeEntry) -> None:
    with pytest.raises(CorruptTree):
        encode_tree([entry])


def test_tree_encode_refuses_a_mode_decode_would_reject() -> None:
    # Encoder and decoder must agree: a tree that is hashed and stored but can
    # never be read back is a corrupt store made on purpose.
    with pytest.raises(CorruptTree):
        encode_tree([TreeEntry(b"a", Kind.FILE, 0o100644, 1, D1)])
