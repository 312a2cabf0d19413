"""The store's record decoders fed damaged bytes: each returns a value or raises its
own error, never another exception.

Every valid encoding here is canonical (one spelling per value), so a
decoder that accepts a damaged encoding must have read back a value that
encodes to exactly those bytes: anything else is damage taken for data.
"""

from __future__ import annotations

import contextlib
import json

from fuzz import DEEP_JSON, damaged, examples, json_bytes, json_values, mutated_doc
from hypothesis import example, given
from hypothesis import strategies as st
from test_tree import digests, modes, names, sizes

from earshot.cas import schema
from earshot.cas.backend import MemoryBackend
from earshot.cas.digest import DIGEST_SIZE, Digest
from earshot.cas.intents import Intent, put_intent, read_intents
from earshot.cas.location import Codec, CorruptObject, Location, ObjectType
from earshot.cas.objects import decode_chunks, encode_chunks
from earshot.cas.sealed import CorruptRecord, seal, seal_json, unseal, unseal_json
from earshot.cas.snapshot import CorruptSnapshot, Snapshot, decode_snapshot, encode_snapshot
from earshot.cas.tree import (
    CorruptTree,
    Ident,
    Kind,
    TreeEntry,
    Unrecorded,
    decode_tree,
    encode_tree,
)
from earshot.cas.varint import Truncated, decode_uvarint, encode_uvarint

DIGEST = Digest(bytes(range(32)))

# -- varints ----------------------------------------------------------------------------

varints = st.integers(0, 2**64 - 1).map(encode_uvarint)


@examples(4)
@given(damaged(varints, max_size=12), st.integers(0, 3))
@example(b"\x80" * 10 + b"\x01", 0)
@example(b"\xff" * 9 + b"\x7f", 0)
def test_a_damaged_varint_decodes_to_its_own_encoding_or_is_truncated(
    data: bytes, pos: int
) -> None:
    with contextlib.suppress(Truncated):
        value, end = decode_uvarint(data, pos)
        assert encode_uvarint(value) == data[pos:end]


# -- trees ------------------------------------------------------------------------------


@st.composite
def tree_entries(draw: st.DrawFn) -> TreeEntry:
    kind = draw(st.sampled_from(Kind))
    name, mode, size = draw(names), draw(modes), draw(sizes)
    if kind is not Kind.UNRECORDED:
        return TreeEntry(name, kind, mode, size, draw(digests))
    ident = draw(st.none() | st.builds(Ident, st.integers(0, 2**63), st.integers(-(2**63), 2**63)))
    return TreeEntry(name, kind, mode, size, None, draw(st.sampled_from(Unrecorded)), ident)


trees = st.lists(tree_entries(), unique_by=lambda e: e.name, max_size=6).map(encode_tree)


@examples(4)
@given(damaged(trees, max_size=300))
def test_a_damaged_tree_is_refused_or_is_the_canonical_encoding_of_what_it_read(
    data: bytes,
) -> None:
    with contextlib.suppress(CorruptTree):
        assert encode_tree(decode_tree(data)) == data


# -- snapshots --------------------------------------------------------------------------

snapshot_records = st.builds(
    Snapshot,
    tree=digests,
    time_ns=st.integers(0, 2**64),
    root=st.text(max_size=12),
    note=st.text(max_size=12),
    session=st.none() | st.text(max_size=12),
    files=st.integers(0, 2**40),
    content_bytes=st.integers(0, 2**63),
    unrecorded=st.integers(0, 2**32),
).map(encode_snapshot)
snapshot_docs = json_bytes(mutated_doc(snapshot_records.map(json.loads)))


@examples(4)
@given(damaged(snapshot_records) | snapshot_docs)
@example(DEEP_JSON)
@example(encode_snapshot(Snapshot(DIGEST, 1, "/r")).replace(b'"time_ns":1', b'"time_ns":1e999'))
def test_a_damaged_snapshot_record_is_a_corrupt_snapshot_or_a_well_typed_one(data: bytes) -> None:
    with contextlib.suppress(CorruptSnapshot):
        snap = decode_snapshot(data)
        assert len(snap.tree) == DIGEST_SIZE
        assert all(type(n) is int for n in (snap.time_ns, snap.files, snap.content_bytes))
        assert type(snap.unrecorded) is int
        assert type(snap.root) is str and type(snap.note) is str
        assert snap.session is None or type(snap.session) is str


# -- chunk lists and index entries ------------------------------------------------------

chunk_lists = st.lists(st.tuples(digests, st.integers(0, 2**40)), max_size=4).map(encode_chunks)


@examples(4)
@given(damaged(chunk_lists))
def test_a_damaged_chunk_list_is_truncated_or_is_the_canonical_encoding_of_what_it_read(
    data: bytes,
) -> None:
    with contextlib.suppress(Truncated):
        chunks = decode_chunks(data)
        assert all(len(digest) == DIGEST_SIZE for digest, _ in chunks)
        assert encode_chunks(chunks) == data


locations = st.builds(
    Location,
    st.sampled_from(ObjectType),
    st.sampled_from(Codec),
    st.integers(0, 2**64 - 1),
    st.integers(0, 2**32 - 1),
    st.integers(0, 2**32 - 1),
    st.integers(0, 2**32 - 1),
).map(Location.encode)


@examples(4)
@given(damaged(locations, max_size=40))
def test_a_damaged_index_entry_is_a_corrupt_object_or_reads_back_as_itself(data: bytes) -> None:
    with contextlib.suppress(CorruptObject):
        assert Location.decode(data, DIGEST).encode() == data


# -- sealed records ---------------------------------------------------------------------

keys = st.binary(min_size=1, max_size=16)
sealed = st.tuples(keys, st.binary(max_size=60)).map(lambda kp: seal(*kp))


@examples(4)
@given(keys, damaged(sealed))
def test_a_damaged_sealed_record_is_refused_unless_it_is_sealed_under_its_key(
    key: bytes, value: bytes
) -> None:
    with contextlib.suppress(CorruptRecord):
        assert seal(key, unseal(key, value, "record")) == value


sealed_docs = st.one_of(
    json_bytes(json_values),
    damaged(json_bytes(json_values)),
    st.just(DEEP_JSON),
    st.just(b"{" * 50_000),
)


@examples(2)
@given(keys, sealed_docs)
@example(b"k", DEEP_JSON)
def test_a_sealed_payload_that_is_not_json_is_a_corrupt_record(key: bytes, payload: bytes) -> None:
    # Sound under its key yet not JSON: a legacy record sealed as it was by an upgrade.
    with contextlib.suppress(CorruptRecord):
        json.dumps(unseal_json(key, seal(key, payload), "record"))


def canonical(doc: object) -> str:
    return json.dumps(doc, sort_keys=True)


# -- intents ----------------------------------------------------------------------------

intent_docs = st.builds(
    Intent,
    st.text(min_size=1, max_size=12),
    st.sampled_from(["batch", "undo", "restore"]),
    st.integers(0, 2**63),
    st.integers(1, 2**22),
    st.dictionaries(st.text(max_size=6), json_values, max_size=3),
    st.none() | st.tuples(st.integers(1, 2**22), st.none() | st.integers(0, 2**40)),
).map(Intent.to_json)


@examples(2)
@given(st.one_of(mutated_doc(intent_docs), json_values, intent_docs))
@example([])
@example({"id": "a", "kind": "k", "started_ns": 1e999, "pid": 1, "doc": {}})
@example({"id": "a", "kind": "k", "started_ns": 1, "pid": 1, "doc": {}, "holder": [1, 1e999]})
@example({"id": "0", "kind": "batch", "started_ns": 0, "pid": 1, "doc": {}, "holder": []})
def test_an_intent_whose_record_is_sealed_but_not_an_intent_is_listed_as_damaged(
    doc: object,
) -> None:
    backend = MemoryBackend()
    with backend.write() as txn:
        schema.put_intent_record(txn, "i", seal_json(schema.intent_key("i"), doc))
    with backend.read() as view:
        sound, bad = read_intents(view)
    assert len(sound) + len(bad) == 1
    for intent in sound:
        assert type(intent.started_ns) is int and type(intent.pid) is int
        assert isinstance(intent.doc, dict)


@examples(2)
@given(intent_docs, st.data())
def test_a_damaged_intent_record_is_listed_as_damaged_never_read(
    doc: dict[str, object], data: st.DataObject
) -> None:
    backend = MemoryBackend()
    with backend.write() as txn:
        put_intent(txn, Intent.from_json(doc))
        key = schema.intent_key(str(doc["id"]))
        value = data.draw(damaged(st.just(seal_json(key, doc))))
        schema.put_intent_record(txn, str(doc["id"]), value)
    with backend.read() as view:
        sound, bad = read_intents(view)
    whole = value == seal_json(key, doc)
    assert [canonical(i.to_json()) for i in sound] == ([canonical(doc)] if whole else [])
    assert len(bad) == (0 if sound else 1)


# -- the small values of the meta table -------------------------------------------------


@examples(2)
@given(st.binary(max_size=40) | json_bytes(json_values) | st.just(DEEP_JSON))
def test_a_damaged_list_of_linked_files_is_none_or_a_list_of_paths(value: bytes) -> None:
    backend = MemoryBackend()
    with backend.write() as txn:
        txn.put(schema.META, b"linked-files", value)
    with backend.read() as view:
        linked = schema.get_linked(view)
    assert linked is None or all(isinstance(p, str) for p in linked)
