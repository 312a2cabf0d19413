"""The store's remote, below the CLI: sealing, packs and index files, locks, and
what a fetch refuses, against a real S3 server (moto's, on 127.0.0.1) and a
real LMDB store."""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from pathlib import Path

import pytest
from s3_server import CREDENTIALS, S3Server

from earshot.cas.digest import Digest, blob_digest
from earshot.cas.location import Codec, ObjectType
from earshot.cas.project import Project
from earshot.cas.remote import crypto, locks
from earshot.cas.remote.crypto import MasterKey, Tampered
from earshot.cas.remote.packs import Entry, PackBuilder, decode_index, encode_index, open_object
from earshot.cas.remote.repository import Repository
from earshot.cas.remote.storage import Storage
from earshot.cas.remote.transfer import Fetcher, missing_objects, send


@pytest.fixture(scope="module")
def s3() -> Iterator[S3Server]:
    server = S3Server().start()
    yield server
    server.stop()


@pytest.fixture
def repo(s3: S3Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Repository:
    for key, value in CREDENTIALS.items():
        monkeypatch.setenv(key, value)
    bucket = s3.make_bucket(f"u{random.randrange(1 << 40):x}")
    storage = Storage(f"s3://{bucket}/r", s3.endpoint)
    return Repository.open(storage, b"pass", tmp_path / "cache", create=True)


# -- sealing --------------------------------------------------------------------------


def test_a_sealed_object_opens_only_as_what_it_was_sealed_as() -> None:
    key = MasterKey.new()
    sealed = key.seal(b"content", b"as this")
    assert key.open(sealed, b"as this", "x") == b"content"
    with pytest.raises(Tampered):
        key.open(sealed, b"as that", "x")
    with pytest.raises(Tampered):
        MasterKey.new().open(sealed, b"as this", "x")
    flipped = bytearray(sealed)
    flipped[-1] ^= 1
    with pytest.raises(Tampered):
        key.open(bytes(flipped), b"as this", "x")


def test_an_object_sealed_under_one_digest_does_not_open_under_another() -> None:
    key = MasterKey.new()
    builder = PackBuilder(key)
    a, b = blob_digest(b"a"), blob_digest(b"b")
    builder.add(a, ObjectType.BLOB, Codec.RAW, b"a", 1)
    (entry,) = builder.entries("p").values()
    sealed = bytes(builder.data)
    assert open_object(key, a, entry, sealed) == b"a"
    with pytest.raises(Tampered):
        open_object(key, b, entry, sealed)
    with pytest.raises(Tampered):
        open_object(key, a, Entry("p", 0, len(sealed), ObjectType.TREE, Codec.RAW, 1), sealed)


def test_the_wrapped_key_opens_with_its_secret_alone() -> None:
    key = MasterKey.new()
    doc = crypto.wrap(key, b"right")
    assert crypto.unwrap(doc, b"right") == key
    assert crypto.unwrap(doc, b"wrong") is None
    assert crypto.unwrap(b"not json", b"right") is None
    assert key.keyed_name("session:x") == key.keyed_name("session:x")
    assert key.keyed_name("session:x") != MasterKey.new().keyed_name("session:x")


def test_an_index_file_round_trips_and_a_damaged_one_is_refused() -> None:
    entries = {
        blob_digest(bytes([i])): Entry(f"pack{i % 3}", i * 10, 40, ObjectType.BLOB, Codec.ZSTD, 99)
        for i in range(50)
    }
    data = encode_index(entries)
    assert decode_index(data, "i") == entries
    with pytest.raises(Tampered):
        decode_index(data[:-3], "i")
    with pytest.raises(Tampered):
        decode_index(b"ESIX1\n[\n", "i")


# -- the repository -----------------------------------------------------------------


def test_a_remote_opens_with_its_passphrase_and_refuses_another(
    repo: Repository, tmp_path: Path
) -> None:
    again = Repository.open(repo.storage, b"pass", tmp_path / "c2")
    assert again.id == repo.id and again.key == repo.key
    with pytest.raises(crypto.WrongKey):
        Repository.open(repo.storage, b"other", tmp_path / "c3")


def _project(tmp_path: Path, name: str, files: dict[str, bytes]) -> Project:
    root = tmp_path / name
    root.mkdir()
    for rel, data in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    return Project(root, home=tmp_path / f"{name}-home")


def test_a_snapshot_sent_and_fetched_is_whole_and_sends_nothing_twice(
    repo: Repository, tmp_path: Path
) -> None:
    rng = random.Random(1)
    files = {f"d{i % 7}/f{i}": rng.randbytes(rng.randrange(10, 3000)) for i in range(300)}
    files["big.bin"] = rng.randbytes(3 << 20)  # chunked
    with _project(tmp_path, "a", files) as src:
        digest = src.snapshot("one").digest
        with src.store.reader() as reader:
            data, meta = missing_objects(reader, [digest], [], repo.index().__contains__)
            sent = send(repo, reader, data, meta)
            assert sent.packs >= 2
            again = missing_objects(reader, [digest], [], repo.index().__contains__)
            assert again == ([], [])
    with _project(tmp_path, "b", {}) as dst:
        with dst.store.writer() as writer:
            Fetcher(repo, writer).fetch([digest], [])
        restored = dst.restore(digest)
        assert restored.plan.writes
        for rel, content in files.items():
            assert (dst.root / rel).read_bytes() == content


def test_a_key_holder_writing_a_wrong_object_is_still_refused(
    repo: Repository, tmp_path: Path
) -> None:
    """An object sealed as one digest with another content (a writer's bug, a
    forged push with the key) is caught by its digest, not only by the seal."""
    claimed = blob_digest(b"what the tree names")
    builder = PackBuilder(repo.key)
    builder.add(claimed, ObjectType.BLOB, Codec.RAW, b"something else entirely", 23)
    name = repo.put_pack(bytes(builder.data))
    repo.put_index(builder.entries(name))
    with _project(tmp_path, "b", {}) as dst:
        with pytest.raises(Tampered), dst.store.writer() as writer:
            Fetcher(repo, writer).fetch([], [claimed])
        with dst.store.reader() as reader:
            assert not reader.has(claimed)


# -- locks ------------------------------------------------------------------------------


def test_a_push_waits_for_gc_and_gc_refuses_beside_a_push(repo: Repository) -> None:
    with locks.exclusive(repo), pytest.raises(locks.RemoteBusy), locks.shared(repo, wait_s=0):
        pass
    with locks.shared(repo), pytest.raises(locks.RemoteBusy), locks.exclusive(repo):
        pass
    # Two pushes share the remote.
    with locks.shared(repo), locks.shared(repo):
        pass
    assert list(repo.storage.listing("locks")) == []


def test_a_lock_past_its_lease_is_passed_over(repo: Repository) -> None:
    stale = locks.Lock(repo, "exclusive")
    stale.write()
    data = repo.key.open(repo.storage.get(stale.path) or b"", b"earshot lock", "l")
    doc = json.loads(data)
    doc["time"] -= locks.LEASE_S + 1
    repo.storage.put(stale.path, repo.key.seal(json.dumps(doc).encode(), b"earshot lock"))
    with locks.shared(repo, wait_s=0):
        pass


def test_a_reference_moved_to_another_name_is_refused(repo: Repository) -> None:
    ref = repo.put_ref("session-a", {"meta": {"session": "session-a"}})
    sealed = repo.storage.get(ref.path)
    assert sealed is not None
    other = repo.session_key("session-b")
    repo.storage.put(f"refs/{other}/{ref.push}", sealed)
    moved = next(r for r in repo.refs() if r.session_key == other)
    with pytest.raises(Tampered):
        repo.read_ref(moved)
    assert Digest(b"\0" * 32) not in repo.index()
