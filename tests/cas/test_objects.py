"""The object store: blobs, chunked files, trees and snapshots in packs, and their failures."""

from __future__ import annotations

import gc
import os
import random
from collections.abc import Iterator
from pathlib import Path

import blake3
import pytest
from hypothesis import given
from hypothesis import strategies as st

from earshot.cas import objects, packer, schema
from earshot.cas.backend import MemoryBackend
from earshot.cas.digest import Digest, blob_digest, snapshot_digest, tree_digest
from earshot.cas.lmdb_backend import LmdbBackend
from earshot.cas.objects import (
    CHUNK_THRESHOLD,
    Codec,
    CorruptObject,
    Location,
    MissingObject,
    ObjectStore,
    ObjectType,
    UnknownFormat,
    decode_chunks,
    encode_chunks,
)
from earshot.cas.snapshot import Snapshot, encode_snapshot
from earshot.cas.tree import Kind, TreeEntry, encode_tree

#: BLAKE3 of the empty input, from the BLAKE3 test vectors (what ``b3sum`` prints).
EMPTY_B3 = "af1349b9f5f9a1a6a0404dea36dcc9499bcb25c9adc112b7cc9a93cae41f3262"
UNKNOWN = Digest(b"\x42" * 32)


@pytest.fixture
def store() -> ObjectStore:
    return ObjectStore(MemoryBackend())


@pytest.fixture
def lmdb_store(tmp_path: Path) -> Iterator[ObjectStore]:
    s = ObjectStore.open(tmp_path / "store")
    yield s
    s.close()


def rand(n: int, seed: int = 1) -> bytes:
    return random.Random(seed).randbytes(n)


def flip_byte(s: ObjectStore, digest: Digest, at: int = 3) -> None:
    """Corrupt one stored byte of an object by rewriting its pack through the backend."""
    with s.reader() as reader:
        loc = reader.locate(digest)
    assert loc is not None
    with s.backend.write() as batch:
        pack = bytearray(batch.get(schema.PACKS, schema.pack_key(loc.pack)) or b"")
        pack[loc.offset + min(at, loc.stored - 1)] ^= 0x01
        schema.put_pack(batch, loc.pack, bytes(pack))


# -- blobs --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "data",
    [b"", b"x", b"hello world\n" * 100, rand(5000), bytes(range(256)) * 4000],
    ids=["empty", "one-byte", "compressible", "incompressible", "just-under-1MiB"],
)
def test_blob_put_then_read_returns_the_same_bytes(store: ObjectStore, data: bytes) -> None:
    with store.writer() as writer:
        digest = writer.put_blob(data)
    with store.reader() as reader:
        assert reader.read_blob(digest) == data
        assert reader.verify(digest) is ObjectType.BLOB


def test_blob_is_readable_from_the_writer_before_commit(store: ObjectStore) -> None:
    with store.writer() as writer:
        digest = writer.put_blob(b"pending" * 50)
        assert writer.has(digest)
        assert writer.read_blob(digest) == b"pending" * 50
        with store.reader() as reader:
            assert not reader.has(digest)


def test_blob_digest_is_plain_blake3_as_b3sum_prints_it(store: ObjectStore, tmp_path: Path) -> None:
    big = rand(3 << 20)
    (tmp_path / "big").write_bytes(big)
    with store.writer() as writer:
        empty = writer.put_blob(b"")
        small = writer.put_blob(b"abc")
        chunked = writer.put_large(big)
        with open(tmp_path / "big", "rb") as handle:
            from_file = writer.put_file(handle.fileno(), len(big))
    assert empty.hex() == EMPTY_B3
    assert small == blake3.blake3(b"abc").digest() == blob_digest(b"abc")
    assert chunked == from_file == blake3.blake3(big).digest()


def test_blob_stored_twice_is_kept_once(store: ObjectStore) -> None:
    data = rand(10_000)
    with store.writer() as writer:
        first = writer.put_blob(data)
        second = writer.put_blob(data)
        assert writer.new_objects == 1
    with store.writer() as writer:
        third = writer.put_large(data)
        assert (writer.new_objects, writer.stored_bytes) == (0, 0)
    assert first == second == third
    with store.reader() as reader:
        assert len(list(reader.view.items("index"))) == 1


def test_blob_from_an_open_file_is_stored_by_its_content(
    store: ObjectStore, tmp_path: Path
) -> None:
    for name, data in [
        ("empty", b""),
        ("small", b"some text\n"),
        ("large", rand(CHUNK_THRESHOLD + 1)),
    ]:
        (tmp_path / name).write_bytes(data)
        with store.writer() as writer, open(tmp_path / name, "rb") as handle:
            digest = writer.put_file(handle.fileno(), len(data))
        with store.reader() as reader:
            assert digest == blob_digest(data)
            assert reader.read_blob(digest) == data


# -- large files -----------------------------------------------------------------------


def test_large_file_is_chunked_and_reads_back_whole(store: ObjectStore) -> None:
    data = rand(3 << 20)
    with store.writer() as writer:
        digest = writer.put_large(data)
    with store.reader() as reader:
        loc = reader.locate(digest)
        assert loc is not None and loc.type is ObjectType.CHUNKED
        assert reader.read_blob(digest) == data
        assert len(list(reader.iter_blob(digest))) > 1
        assert reader.verify(digest) is ObjectType.CHUNKED
        # No stored object is larger than the biggest chunk: no unbounded value.
        sizes = [Location.decode(v, k).raw for k, v in reader.view.items("index")]
        assert max(sizes) <= 1 << 20


def test_large_file_edited_in_the_middle_stores_only_the_chunks_around_the_edit(
    store: ObjectStore,
) -> None:
    data = rand(3 << 20)
    middle = len(data) // 2
    edited = data[:middle] + b"0123456789" + data[middle:]
    with store.writer() as writer:
        writer.put_large(data)
    assert writer.stored_bytes >= len(data)  # complete once the block has ended
    with store.writer() as writer:
        digest = writer.put_large(edited)
    assert writer.stored_bytes < 0.4 * len(edited)
    with store.reader() as reader:
        assert reader.read_blob(digest) == edited


def test_file_at_the_chunk_threshold_is_a_single_blob(store: ObjectStore) -> None:
    data = rand(CHUNK_THRESHOLD)
    with store.writer() as writer:
        digest = writer.put_large(data)
    with store.reader() as reader:
        loc = reader.locate(digest)
        assert loc is not None and loc.type is ObjectType.BLOB


# -- trees and snapshots -----------------------------------------------------------------


def test_tree_and_snapshot_digests_differ_from_the_blob_digest_of_the_same_bytes(
    store: ObjectStore,
) -> None:
    entries = [TreeEntry(b"f", Kind.FILE, 0o644, 1, blob_digest(b"x"))]
    snap = Snapshot(tree=tree_digest(encode_tree(entries)), time_ns=1, root="/r")
    with store.writer() as writer:
        tree = writer.put_tree(entries)
        snapshot = writer.put_snapshot(snap)
        tree_as_blob = writer.put_blob(encode_tree(entries))
        snapshot_as_blob = writer.put_blob(encode_snapshot(snap))
        assert writer.new_objects == 4
    assert tree == tree_digest(encode_tree(entries)) != tree_as_blob
    assert snapshot == snapshot_digest(encode_snapshot(snap)) != snapshot_as_blob
    with store.reader() as reader:
        assert reader.read_tree(tree) == entries
        assert reader.read_snapshot(snapshot) == snap
        assert reader.read_blob(tree_as_blob) == encode_tree(entries)
        assert reader.verify(tree) is ObjectType.TREE
        assert reader.verify(snapshot) is ObjectType.SNAPSHOT


def test_reading_an_object_as_the_wrong_type_raises_corrupt_object(store: ObjectStore) -> None:
    with store.writer() as writer:
        blob = writer.put_blob(b"T1")  # would even decode as an empty tree
        tree = writer.put_tree([])
    with store.reader() as reader:
        with pytest.raises(CorruptObject, match="not a tree"):
            reader.read_tree(blob)
        with pytest.raises(CorruptObject, match="not a blob"):
            reader.read_blob(tree)
        with pytest.raises(CorruptObject, match="not a snapshot"):
            reader.read_snapshot(tree)


def test_reading_a_pending_object_as_the_wrong_type_raises_corrupt_object(
    store: ObjectStore,
) -> None:
    with store.writer() as writer:
        blob = writer.put_blob(b"T1")
        with pytest.raises(CorruptObject, match="not a tree"):
            writer.read_tree(blob)


# -- packs ------------------------------------------------------------------------------


def test_small_objects_share_one_pack(store: ObjectStore) -> None:
    with store.writer() as writer:
        digests = [writer.put_blob(rand(1000, seed=i)) for i in range(100)]
    with store.reader() as reader:
        assert len(list(reader.view.items("packs"))) == 1
        assert len({reader.locate(d).pack for d in digests}) == 1  # type: ignore[union-attr]


def test_packs_are_sealed_at_the_target_size_and_all_objects_stay_readable(
    store: ObjectStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(packer, "RAW_PACK_TARGET", 2000)
    blobs = {rand(700, seed=i): None for i in range(30)}
    with store.writer() as writer:
        digests = {data: writer.put_blob(data) for data in blobs}
    with store.reader() as reader:
        assert len(list(reader.view.items("packs"))) >= 10
        for data, digest in digests.items():
            assert reader.read_blob(digest) == data


def test_objects_flushed_before_a_failure_are_complete_and_nothing_dangles(
    store: ObjectStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(packer, "RAW_PACK_TARGET", 2000)
    monkeypatch.setattr(objects, "FLUSH_BYTES", 5000)
    with pytest.raises(RuntimeError), store.writer() as writer:
        for i in range(40):
            writer.put_blob(rand(700, seed=i))
        raise RuntimeError("interrupted")
    with store.reader() as reader:
        index = [Digest(k) for k, _ in reader.view.items("index")]
        assert 0 < len(index) < 40  # some flushed, the rest dropped
        for digest in index:
            assert reader.verify(digest) is ObjectType.BLOB


def test_writer_block_that_fails_stores_nothing(store: ObjectStore) -> None:
    with pytest.raises(RuntimeError), store.writer() as writer:
        digest = writer.put_blob(b"never")
        raise RuntimeError
    with store.reader() as reader:
        assert not reader.has(digest)
        assert list(reader.view.items("packs")) == []


@given(
    st.sampled_from(ObjectType),
    st.sampled_from(Codec),
    st.integers(0, 2**64 - 1),
    st.integers(0, 2**32 - 1),
    st.integers(0, 2**32 - 1),
    st.integers(0, 2**32 - 1),
)
def test_location_round_trips_through_its_index_encoding(
    t: ObjectType, c: Codec, pack: int, offset: int, stored: int, raw: int
) -> None:
    loc = Location(t, c, pack, offset, stored, raw)
    assert Location.decode(loc.encode(), Digest(b"\0" * 32)) == loc


@given(st.lists(st.tuples(st.binary(min_size=32, max_size=32), st.integers(0, 2**40))))
def test_chunk_list_round_trips(chunks: list[tuple[bytes, int]]) -> None:
    typed = [(Digest(d), n) for d, n in chunks]
    assert decode_chunks(encode_chunks(typed)) == typed


# -- format version ---------------------------------------------------------------------


def test_new_store_records_its_format_and_reopens(tmp_path: Path) -> None:
    ObjectStore.open(tmp_path / "store").close()
    backend = LmdbBackend(tmp_path / "store")
    with backend.read() as view:
        assert view.get("meta", b"format") == objects.FORMAT_VERSION
    ObjectStore(backend).close()


def test_a_store_of_format_2_opens_and_is_upgraded_to_format_3(tmp_path: Path) -> None:
    # Format 3 adds what an earshot of format 2 cannot read (identities of
    # unrecorded entries); a format-2 store's trees read as they are.
    backend = LmdbBackend(tmp_path / "store")
    with backend.write() as batch:
        batch.put("meta", b"format", b"2")
    backend.close()
    ObjectStore.open(tmp_path / "store").close()
    backend = LmdbBackend(tmp_path / "store")
    with backend.read() as view:
        assert view.get("meta", b"format") == objects.FORMAT_VERSION == b"3"
    backend.close()


def test_store_of_an_unknown_format_raises_unknown_format_on_open(tmp_path: Path) -> None:
    backend = LmdbBackend(tmp_path / "store")
    with backend.write() as batch:
        batch.put("meta", b"format", b"999")
    backend.close()
    with pytest.raises(UnknownFormat, match="999"):
        ObjectStore.open(tmp_path / "store")
    with pytest.raises(UnknownFormat):
        backend = MemoryBackend()
        with backend.write() as batch:
            batch.put("meta", b"format", b"999")
        ObjectStore(backend)


def _descriptors_under(path: Path) -> list[str]:
    found = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith(str(path)):
            found.append(target)
    return found


def test_store_refused_for_its_format_leaves_no_descriptor_open(tmp_path: Path) -> None:
    backend = LmdbBackend(tmp_path / "store")
    with backend.write() as batch:
        batch.put("meta", b"format", b"999")
    backend.close()
    assert _descriptors_under(tmp_path) == []
    with pytest.raises(UnknownFormat):
        ObjectStore.open(tmp_path / "store")
    gc.collect()
    assert _descriptors_under(tmp_path) == []


# -- corruption and absence ----------------------------------------------------------------


@pytest.mark.parametrize(
    "make",
    [
        lambda w: w.put_blob(rand(500)),
        lambda w: w.put_blob(b"compressible text\n" * 200),
        lambda w: w.put_tree([TreeEntry(b"name", Kind.FILE, 0o644, 3, blob_digest(b"abc"))]),
        lambda w: w.put_snapshot(
            Snapshot(tree=Digest(b"\1" * 32), time_ns=5, root="/r", note="n" * 80)
        ),
    ],
    ids=["raw-blob", "compressed-blob", "tree", "snapshot"],
)
def test_verify_raises_corrupt_object_when_a_pack_byte_is_flipped(
    lmdb_store: ObjectStore, make: object
) -> None:
    with lmdb_store.writer() as writer:
        digest = make(writer)  # type: ignore[operator]
    with lmdb_store.reader() as reader:
        reader.verify(digest)
    flip_byte(lmdb_store, digest, at=40)
    with lmdb_store.reader() as reader, pytest.raises(CorruptObject):
        reader.verify(digest)


def test_verify_of_a_chunked_file_raises_corrupt_object_when_a_chunk_byte_is_flipped(
    lmdb_store: ObjectStore,
) -> None:
    with lmdb_store.writer() as writer:
        digest = writer.put_large(rand(2 << 20))
    with lmdb_store.reader() as reader:
        first_chunk = decode_chunks(reader.read_raw(digest)[1])[0][0]
    flip_byte(lmdb_store, first_chunk, at=1000)
    with lmdb_store.reader() as reader, pytest.raises(CorruptObject):
        reader.verify(digest)


def test_read_blob_raises_corrupt_object_when_a_pack_byte_is_flipped(
    lmdb_store: ObjectStore,
) -> None:
    data = rand(500)  # incompressible: stored raw
    with lmdb_store.writer() as writer:
        digest = writer.put_blob(data)
    flip_byte(lmdb_store, digest)
    with lmdb_store.reader() as reader, pytest.raises(CorruptObject):
        reader.read_blob(digest)


def test_read_of_an_object_whose_pack_is_gone_or_short_raises_corrupt_object(
    store: ObjectStore,
) -> None:
    with store.writer() as writer:
        digest = writer.put_blob(rand(500))
    with store.reader() as reader:
        loc = reader.locate(digest)
    assert loc is not None
    with store.backend.write() as batch:
        schema.put_pack(batch, loc.pack, b"short")
    with store.reader() as reader, pytest.raises(CorruptObject, match="missing or short"):
        reader.read_blob(digest)
    with store.backend.write() as batch:
        schema.delete_pack(batch, loc.pack)
    with store.reader() as reader, pytest.raises(CorruptObject, match="missing or short"):
        reader.read_blob(digest)


def test_compressed_object_that_does_not_decompress_raises_corrupt_object(
    store: ObjectStore,
) -> None:
    data = b"abc" * 1000
    with store.writer() as writer:
        digest = writer.put_blob(data)
    with store.reader() as reader:
        loc = reader.locate(digest)
    assert loc is not None and loc.codec is Codec.ZSTD
    with store.backend.write() as batch:
        schema.put_pack(batch, loc.pack, b"\0" * (loc.offset + loc.stored))
    with store.reader() as reader, pytest.raises(CorruptObject):
        reader.read_blob(digest)


@pytest.mark.parametrize(
    "method", ["read_blob", "read_tree", "read_snapshot", "verify", "read_raw"]
)
def test_unknown_digest_raises_missing_object(store: ObjectStore, method: str) -> None:
    with store.reader() as reader:
        assert not reader.has(UNKNOWN)
        assert reader.locate(UNKNOWN) is None
        with pytest.raises(MissingObject) as info:
            getattr(reader, method)(UNKNOWN)
        assert info.value.digest == UNKNOWN


def test_storing_a_tree_again_replaces_a_damaged_copy(store: ObjectStore) -> None:
    # A tree of its own: decoded trees are cached per process, by digest.
    entries = [TreeEntry(b"replaced-copy", Kind.FILE, 0o644, 1, blob_digest(b"r"))]
    with store.writer() as writer:
        writer.put_blob(b"r")
        digest = writer.put_tree(entries)
    flip_byte(store, digest)
    with store.reader() as reader, pytest.raises(CorruptObject):
        reader.read_tree(digest)
    with store.writer() as writer:
        assert writer.put_tree(entries) == digest
    with store.reader() as reader:
        assert reader.read_tree(digest) == entries
