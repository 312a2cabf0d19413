"""The Backend contract, run against MemoryBackend and LmdbBackend alike, then LMDB's own duties."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Iterator
from contextlib import nullcontext
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from earshot.cas import lmdb_backend
from earshot.cas.backend import CORE_TABLES, Backend, MemoryBackend
from earshot.cas.lmdb_backend import LmdbBackend, StoreBusy, StoreError

TABLES = (*CORE_TABLES, "extra")


def make_backend(kind: str, directory: Path) -> Backend:
    if kind == "memory":
        return MemoryBackend(TABLES)
    return LmdbBackend(directory / "store", TABLES)


@pytest.fixture(params=["memory", "lmdb"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    b = make_backend(request.param, tmp_path)
    yield b
    b.close()


def put_all(b: Backend, table: str, pairs: dict[bytes, bytes]) -> None:
    with b.write() as batch:
        for key, value in pairs.items():
            batch.put(table, key, value)


def committed(b: Backend, table: str = "meta") -> dict[bytes, bytes]:
    with b.read() as view:
        return dict(view.items(table))


class Boom(Exception):
    pass


class TestBackendContract:
    """What every backend promises (dulwich ObjectStoreTests style: one suite, many stores)."""

    def test_get_of_an_absent_key_is_none(self, backend: Backend) -> None:
        with backend.read() as view:
            assert view.get("meta", b"nothing") is None
            assert view.get_slice("meta", b"nothing", 0, 4) is None

    def test_put_is_visible_to_readers_after_the_write_block(self, backend: Backend) -> None:
        put_all(backend, "meta", {b"k": b"value", b"empty": b""})
        with backend.read() as view:
            got = view.get("meta", b"k")
            assert got == b"value"
            assert type(got) is bytes
            assert view.get("meta", b"empty") == b""

    def test_put_overwrites_an_existing_value(self, backend: Backend) -> None:
        put_all(backend, "meta", {b"k": b"one"})
        put_all(backend, "meta", {b"k": b"two"})
        assert committed(backend) == {b"k": b"two"}

    def test_delete_removes_a_committed_key(self, backend: Backend) -> None:
        put_all(backend, "meta", {b"a": b"1", b"b": b"2"})
        with backend.write() as batch:
            batch.delete("meta", b"a")
            batch.delete("meta", b"never-there")
        assert committed(backend) == {b"b": b"2"}

    def test_tables_are_separate_namespaces(self, backend: Backend) -> None:
        put_all(backend, "meta", {b"k": b"meta"})
        put_all(backend, "extra", {b"k": b"extra"})
        assert committed(backend, "meta") == {b"k": b"meta"}
        assert committed(backend, "extra") == {b"k": b"extra"}
        assert committed(backend, "packs") == {}

    def test_batch_reads_see_its_pending_puts_and_deletes(self, backend: Backend) -> None:
        put_all(backend, "meta", {b"a": b"old", b"gone": b"x", b"kept": b"k"})
        with backend.write() as batch:
            batch.put("meta", b"a", b"new-value")
            batch.put("meta", b"fresh", b"f")
            batch.delete("meta", b"gone")
            assert batch.get("meta", b"a") == b"new-value"
            assert batch.get("meta", b"fresh") == b"f"
            assert batch.get("meta", b"gone") is None
            assert batch.get("meta", b"kept") == b"k"
            assert batch.get_slice("meta", b"a", 4, 3) == b"val"
            assert batch.get_slice("meta", b"gone", 0, 1) is None
            assert batch.get_slice("meta", b"kept", 0, 10) == b"k"
            assert list(batch.items("meta")) == [
                (b"a", b"new-value"),
                (b"fresh", b"f"),
                (b"kept", b"k"),
            ]

    def test_pending_writes_are_invisible_to_readers_until_committed(
        self, backend: Backend
    ) -> None:
        with backend.write() as batch:
            batch.put("meta", b"k", b"v")
            with backend.read() as view:
                assert view.get("meta", b"k") is None
        assert committed(backend) == {b"k": b"v"}

    def test_flush_commits_what_is_buffered_and_the_batch_goes_on(self, backend: Backend) -> None:
        with backend.write() as batch:
            batch.put("meta", b"first", b"1")
            assert batch.pending_bytes > 0
            batch.flush()
            assert batch.pending_bytes == 0
            assert committed(backend) == {b"first": b"1"}
            batch.put("meta", b"second", b"2")
            assert batch.get("meta", b"first") == b"1"
            assert list(batch.items("meta")) == [(b"first", b"1"), (b"second", b"2")]
        assert committed(backend) == {b"first": b"1", b"second": b"2"}

    def test_pending_bytes_counts_keys_and_values(self, backend: Backend) -> None:
        with backend.write() as batch:
            assert batch.pending_bytes == 0
            batch.put("meta", b"key", b"12345")
            batch.delete("meta", b"xy")
            assert batch.pending_bytes == len(b"key") + 5 + len(b"xy")

    def test_failing_write_block_commits_nothing(self, backend: Backend) -> None:
        put_all(backend, "meta", {b"a": b"1"})
        with pytest.raises(Boom), backend.write() as batch:
            batch.put("meta", b"b", b"2")
            batch.put("extra", b"c", b"3")
            batch.delete("meta", b"a")
            raise Boom
        assert committed(backend) == {b"a": b"1"}
        assert committed(backend, "extra") == {}

    def test_failing_write_block_keeps_what_was_flushed_before_the_failure(
        self, backend: Backend
    ) -> None:
        with pytest.raises(Boom), backend.write() as batch:
            batch.put("meta", b"flushed", b"1")
            batch.flush()
            batch.put("meta", b"lost", b"2")
            raise Boom
        assert committed(backend) == {b"flushed": b"1"}

    def test_keys_yields_a_tables_keys_in_order_with_a_batchs_pending_changes(
        self, backend: Backend
    ) -> None:
        put_all(backend, "packs", {b"b": b"x" * 10, b"a": b"y", b"c": b"z"})
        with backend.read() as view:
            assert list(view.keys("packs")) == [b"a", b"b", b"c"]
            assert list(view.keys("index")) == []
        with backend.write() as batch:
            batch.delete("packs", b"b")
            batch.put("packs", b"0", b"new")
            assert list(batch.keys("packs")) == [b"0", b"a", b"c"]

    def test_a_flush_of_named_tables_commits_only_those_and_keeps_the_rest_pending(
        self, backend: Backend
    ) -> None:
        with backend.write() as batch:
            batch.put("packs", b"p", b"pack")
            batch.put("index", b"i", b"loc")
            batch.put("statcache", b"s", b"names p")
            batch.flush(("packs", "index"))
            assert committed(backend, "packs") == {b"p": b"pack"}
            assert committed(backend, "index") == {b"i": b"loc"}
            assert committed(backend, "statcache") == {}
            assert batch.get("statcache", b"s") == b"names p"
        assert committed(backend, "statcache") == {b"s": b"names p"}

    def test_a_failure_after_a_partial_flush_commits_none_of_what_stayed_pending(
        self, backend: Backend
    ) -> None:
        with pytest.raises(Boom), backend.write() as batch:
            batch.put("packs", b"p", b"pack")
            batch.put("statcache", b"s", b"names p")
            batch.flush(("packs",))
            raise Boom()
        assert committed(backend, "packs") == {b"p": b"pack"}
        assert committed(backend, "statcache") == {}

    def test_items_yields_keys_in_byte_order_under_a_prefix(self, backend: Backend) -> None:
        keys = [b"b", b"\xff", b"a\x00", b"ab", b"a", b"abc", b"\x00", b"aa"]
        put_all(backend, "meta", {k: b"v" + k for k in keys})
        with backend.read() as view:
            assert [k for k, _ in view.items("meta")] == sorted(keys)
            assert list(view.items("meta", b"a")) == [
                (k, b"v" + k) for k in sorted(keys) if k.startswith(b"a")
            ]
            assert [k for k, _ in view.items("meta", b"ab")] == [b"ab", b"abc"]
            assert list(view.items("meta", b"c")) == []
            assert list(view.items("meta", b"\xff\xff")) == []
            assert list(view.items("packs")) == []

    def test_batch_items_merge_pending_over_committed_in_key_order_under_a_prefix(
        self, backend: Backend
    ) -> None:
        put_all(backend, "meta", {b"p1": b"a", b"p3": b"c", b"q": b"z"})
        with backend.write() as batch:
            batch.put("meta", b"p2", b"b")
            batch.put("meta", b"p0", b"0")
            batch.delete("meta", b"p3")
            batch.put("meta", b"r", b"r")
            assert list(batch.items("meta", b"p")) == [(b"p0", b"0"), (b"p1", b"a"), (b"p2", b"b")]
            assert [k for k, _ in batch.items("meta")] == [b"p0", b"p1", b"p2", b"q", b"r"]

    def test_get_slice_returns_a_part_of_the_value(self, backend: Backend) -> None:
        value = bytes(range(256)) * 64
        put_all(backend, "packs", {b"pack": value})
        with backend.read() as view:
            assert view.get_slice("packs", b"pack", 0, 10) == value[:10]
            assert view.get_slice("packs", b"pack", 1000, 5000) == value[1000:6000]
            assert view.get_slice("packs", b"pack", len(value) - 3, 10) == value[-3:]
            assert view.get_slice("packs", b"pack", len(value) + 5, 10) == b""

    def test_large_values_round_trip(self, backend: Backend) -> None:
        value = os.urandom(3 << 20)
        put_all(backend, "packs", {b"big": value})
        with backend.read() as view:
            assert view.get("packs", b"big") == value

    @pytest.mark.parametrize(
        "operation",
        [
            lambda v: v.get("nope", b"k"),
            lambda v: v.get_slice("nope", b"k", 0, 1),
            lambda v: list(v.items("nope")),
        ],
        ids=["get", "get_slice", "items"],
    )
    def test_read_of_an_unknown_table_raises_key_error(
        self, backend: Backend, operation: object
    ) -> None:
        with backend.read() as view, pytest.raises(KeyError):
            operation(view)  # type: ignore[operator]
        with backend.write() as batch, pytest.raises(KeyError):
            operation(batch)  # type: ignore[operator]

    def test_put_to_an_unknown_table_raises_key_error_at_the_call(self, backend: Backend) -> None:
        with backend.write() as batch, pytest.raises(KeyError):
            batch.put("nope", b"k", b"v")

    def test_delete_in_an_unknown_table_raises_key_error_at_the_call(
        self, backend: Backend
    ) -> None:
        with backend.write() as batch, pytest.raises(KeyError):
            batch.delete("nope", b"k")

    def test_commit_that_fails_on_an_unknown_table_commits_nothing(self, backend: Backend) -> None:
        with pytest.raises(KeyError), backend.write() as batch:
            batch.put("meta", b"k", b"v")
            batch.delete("nope", b"k")
        assert committed(backend) == {}

    def test_compact_keeps_every_value(self, backend: Backend) -> None:
        put_all(backend, "meta", {b"a": b"1", b"b": b"2"})
        backend.compact()
        assert committed(backend) == {b"a": b"1", b"b": b"2"}
        put_all(backend, "meta", {b"c": b"3"})
        assert committed(backend) == {b"a": b"1", b"b": b"2", b"c": b"3"}

    def test_disk_bytes_grows_with_the_data(self, backend: Backend) -> None:
        before = backend.disk_bytes()
        put_all(backend, "packs", {bytes([i]): os.urandom(256 << 10) for i in range(8)})
        assert backend.disk_bytes() >= before + (2 << 20)


# -- both backends agree on any sequence of operations -------------------------

keys = st.binary(min_size=1, max_size=3)
operations = st.lists(
    st.one_of(
        st.tuples(st.just("put"), st.sampled_from(["meta", "extra"]), keys, st.binary(max_size=8)),
        st.tuples(st.just("delete"), st.sampled_from(["meta", "extra"]), keys, st.just(b"")),
        st.tuples(st.just("flush"), st.just(""), st.just(b""), st.just(b"")),
    ),
    max_size=25,
)


@settings(max_examples=30)
@given(operations, st.booleans())
@example(
    [("put", "meta", b"a", b"1"), ("delete", "meta", b"a", b""), ("put", "meta", b"a", b"2")], False
)
@example(
    [("put", "meta", b"a", b"1"), ("flush", "", b"", b""), ("delete", "meta", b"a", b"")], True
)
def test_memory_and_lmdb_backends_agree_with_a_model_on_any_sequence_of_writes(
    ops: list[tuple[str, str, bytes, bytes]], fail_at_end: bool
) -> None:
    # The model: a dict per table; a flush (and a successful end) commits it.
    model: dict[str, dict[bytes, bytes]] = {"meta": {}, "extra": {}}
    saved = {t: dict(v) for t, v in model.items()}
    for op, table, key, value in ops:
        if op == "put":
            model[table][key] = value
        elif op == "delete":
            model[table].pop(key, None)
        else:
            saved = {t: dict(v) for t, v in model.items()}
    expected = saved if fail_at_end else model
    with tempfile.TemporaryDirectory() as tmp:
        backends = [MemoryBackend(TABLES), LmdbBackend(Path(tmp) / "store", TABLES)]
        try:
            for b in backends:
                with pytest.raises(Boom) if fail_at_end else nullcontext(), b.write() as batch:
                    for op, table, key, value in ops:
                        if op == "put":
                            batch.put(table, key, value)
                        elif op == "delete":
                            batch.delete(table, key)
                        else:
                            batch.flush()
                    for table, content in model.items():
                        assert list(batch.items(table)) == sorted(content.items())
                        for key in content:
                            assert batch.get(table, key) == content[key]
                    if fail_at_end:
                        raise Boom
                for table in model:
                    assert committed(b, table) == expected[table]
        finally:
            for b in backends:
                b.close()


# -- LMDB's own duties ------------------------------------------------------------


class TestLmdbBackend:
    def test_map_grows_on_demand_from_a_tiny_initial_map(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setattr(lmdb_backend, "_INITIAL_MAP", 64 << 10)
        b = LmdbBackend(tmp_path / "store")
        try:
            assert b._env.info()["map_size"] == 64 << 10
            values = {i.to_bytes(2, "big"): os.urandom(1 << 20) for i in range(20)}
            put_all(b, "packs", values)  # 20 MiB in one transaction
            with b.write() as batch:  # and many small values in another
                for i in range(2000):
                    batch.put("index", i.to_bytes(4, "big"), os.urandom(100))
            with b.read() as view:
                assert dict(view.items("packs")) == values
                assert len(list(view.items("index"))) == 2000
            assert b._env.info()["map_size"] > 20 << 20
        finally:
            b.close()

    def test_reopened_store_sees_committed_data_even_with_a_tiny_initial_map(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        b = LmdbBackend(tmp_path / "store")
        values = {i.to_bytes(2, "big"): os.urandom(1 << 20) for i in range(4)}
        put_all(b, "packs", values)
        b.close()
        monkeypatch.setattr(lmdb_backend, "_INITIAL_MAP", 64 << 10)
        b = LmdbBackend(tmp_path / "store")
        try:
            assert committed(b, "packs") == values
            put_all(b, "packs", {b"more": os.urandom(2 << 20)})
            assert len(committed(b, "packs")) == 5
        finally:
            b.close()

    def test_compact_shrinks_the_file_after_most_data_is_deleted(self, tmp_path: Path) -> None:
        b = LmdbBackend(tmp_path / "store")
        try:
            put_all(b, "packs", {i.to_bytes(2, "big"): os.urandom(1 << 20) for i in range(16)})
            with b.write() as batch:
                for i in range(1, 16):
                    batch.delete("packs", i.to_bytes(2, "big"))
            data = tmp_path / "store" / "data.mdb"
            before_size, before_disk = data.stat().st_size, b.disk_bytes()
            assert before_size > 16 << 20
            b.compact()
            assert data.stat().st_size < before_size // 4
            assert b.disk_bytes() < before_disk // 4
            assert list(committed(b, "packs")) == [(0).to_bytes(2, "big")]
            put_all(b, "meta", {b"after": b"compact"})
            assert committed(b) == {b"after": b"compact"}
        finally:
            b.close()

    def test_open_on_a_path_that_is_a_file_raises_store_error(self, tmp_path: Path) -> None:
        (tmp_path / "store").write_text("not a directory")
        with pytest.raises(StoreError):
            LmdbBackend(tmp_path / "store")

    def test_compact_raises_store_busy_while_another_process_has_the_store_open(
        self, tmp_path: Path
    ) -> None:
        path = tmp_path / "store"
        b = LmdbBackend(path)
        put_all(b, "meta", {b"k": b"v"})
        holder = hold_open_in_subprocess(path)
        try:
            with pytest.raises(StoreBusy):
                b.compact()
            assert committed(b) == {b"k": b"v"}
        finally:
            release(holder)
            b.close()

    def test_compact_succeeds_once_the_other_process_has_closed_the_store(
        self, tmp_path: Path
    ) -> None:
        path = tmp_path / "store"
        b = LmdbBackend(path)
        try:
            release(hold_open_in_subprocess(path))
            b.compact()
            put_all(b, "meta", {b"k": b"v"})
            assert committed(b) == {b"k": b"v"}
        finally:
            b.close()

    def test_open_store_holds_a_shared_lock_that_excludes_a_compactor(self, tmp_path: Path) -> None:
        # The control for the test below: flock is per open file description,
        # so a second descriptor in this process stands in for another process.
        b = LmdbBackend(tmp_path / "store")
        try:
            assert not can_lock_exclusively(tmp_path / "store")
        finally:
            b.close()
        assert can_lock_exclusively(tmp_path / "store")

    def test_refused_compact_keeps_this_process_shared_lock(self, tmp_path: Path) -> None:
        path = tmp_path / "store"
        b = LmdbBackend(path)
        try:
            other = os.open(path / "open.lock", os.O_RDWR)
            try:
                fcntl.flock(other, fcntl.LOCK_SH)  # another process has the store open
                with pytest.raises(StoreBusy):
                    b.compact()
            finally:
                os.close(other)  # ... and closes it
            assert not can_lock_exclusively(path)
        finally:
            b.close()


def can_lock_exclusively(path: Path) -> bool:
    fd = os.open(path / "open.lock", os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    finally:
        os.close(fd)
    return True


_HOLDER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from earshot.cas.lmdb_backend import LmdbBackend
    b = LmdbBackend(Path(sys.argv[1]))
    print("open", flush=True)
    sys.stdin.readline()
    b.close()
    """
)


def hold_open_in_subprocess(path: Path) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, str(path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "open"
    return proc


def release(proc: subprocess.Popen[str]) -> None:
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write("\n")
    proc.stdin.close()
    assert proc.wait(timeout=30) == 0
    proc.stdout.close()
