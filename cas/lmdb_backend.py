"""The LMDB backend: the only module that imports ``lmdb``.

Facts it is built on (docs/FACTS.md, "LMDB"): one writer at a time across
processes, lock-free readers; a write transaction keeps every dirtied page in
private memory until commit, so writes are buffered in Python and applied in
one short transaction (the object writer flushes every ~64 MiB); the map size
is a maximum that grows on demand here, never surfacing MDB_MAP_FULL; the file
never shrinks, ``compact`` rewrites it to its live size.
"""

from __future__ import annotations

import errno
import fcntl
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import lmdb

from . import faults
from .backend import Buffer, ReadView, StoreError, WriteBatch
from .errors import EarshotError
from .schema import CORE_TABLES

_INITIAL_MAP = 1 << 30
_MAX_MAP = 1 << 44
#: Space set aside beside the store, given back when a small transaction (an
#: intent, a batch record, gc's deletions) finds the disk full: the way out of
#: a full disk must not itself need space.
RESERVE_BYTES = 4 << 20
_RESERVE = "reserve"
#: A failed write with less than this free (or than twice what was being
#: written) is a full disk: LMDB reports a short write as EIO.
_LOW_SPACE = 16 << 20


def free_bytes(path: Path) -> int | None:
    """Bytes free to this user on the file system holding ``path``."""
    try:
        st = os.statvfs(path)
    except OSError:
        return None
    return st.f_bavail * st.f_frsize


def _human(n: int) -> str:
    if n < 1024:
        return f"{n} bytes"
    size = float(n)
    for unit in ("KiB", "MiB", "GiB"):
        size /= 1024
        if size < 1024 or unit == "GiB":
            break
    return f"{size:.1f} {unit}"


def store_failure(path: Path, exc: BaseException, writing: int = 0) -> StoreError:
    """A one-line error for a failed store operation; a full disk is said in words."""
    code = getattr(exc, "errno", None)
    text = getattr(exc, "strerror", None) or str(exc)
    free = free_bytes(path)
    full = code == errno.ENOSPC or "No space" in text
    if not full and (code == errno.EIO or "Input/output error" in text) and free is not None:
        full = free < max(_LOW_SPACE, 2 * writing)
    if full:
        left = f" ({_human(free)} free)" if free is not None else ""
        return StoreError(
            path,
            f"no space left on the device holding the store at {path}{left}; free some "
            "space ('earshot gc' drops what only old sessions need)",
            no_space=True,
        )
    if _damaged(exc):
        return StoreError(
            path,
            f"damaged ({text}): this part of the store cannot be read; nothing was changed. "
            "'earshot fsck' says what is damaged",
            damaged=True,
        )
    if code == errno.EIO or "Input/output error" in text:
        # A failing disk, or LMDB writing through a page a flipped byte made
        # wrong (a leaf flagged an overflow page: its page count is garbage).
        return StoreError(
            path, f"{text} (a failing disk, or a damaged page): 'earshot fsck' checks the store"
        )
    return StoreError(path, text)


#: What LMDB says of pages it cannot read: a flipped byte, a torn write, another
#: file put in the store's place. A transaction that met one is invalid after it
#: (MDB_BAD_TXN on every later call).
_DAMAGE = (
    lmdb.CorruptedError,
    lmdb.PageNotFoundError,
    lmdb.BadTxnError,
    lmdb.InvalidError,
    lmdb.PanicError,
    lmdb.BadDbiError,
    lmdb.IncompatibleError,
    lmdb.BadChecksumError,
    lmdb.VersionMismatchError,
    # MDB_CURSOR_FULL: a damaged branch page sends a search deeper than any tree.
    lmdb.CursorFullError,
)


def _damaged(exc: BaseException) -> bool:
    if isinstance(exc, _DAMAGE):
        return True
    # py-lmdb picks its engine by the format version in the meta page before
    # LMDB reads it: a flipped byte there is a bare lmdb.Error, "LMDB data
    # format v15991297 is not supported by this build".
    return type(exc) is lmdb.Error and "data format" in str(exc)


def damaged_pages(path: Path) -> list[str] | None:
    """What is wrong with the pages of the store at ``path``, found without LMDB:
    py-lmdb's offline verifier walks the file as bytes. A page LMDB trusts can
    make it abort the process (an assertion in ``mdb_cursor_next`` on a branch
    page whose bounds were flipped), so ``fsck`` asks this before opening it.
    Empty: nothing wrong; None: this py-lmdb has no verifier.

    Cost: about 0.4 s for 220 MiB of packs and 200,000 index entries. The walk
    takes no lock: a commit during it can make a page look wrong, so only what
    a second walk finds again is reported.
    """
    try:
        from lmdb.verify import VerifyError, verify
    except ImportError:
        return None
    if not (path / "data.mdb").exists():
        return []
    found: list[str] = []
    for _ in range(2):
        try:
            now = verify(str(path))  # type: ignore[no-untyped-call]  # py-lmdb ships no types for it
        except VerifyError as exc:
            now = [str(exc)]
        found = [problem for problem in now if problem in found] if found else now
        if not found:
            break
    return found


class StoreBusy(EarshotError):
    """An operation needs the store to itself and another process has it open."""

    def __init__(self, path: Path, what: str) -> None:
        super().__init__(
            f"{what} needs the store to itself; another earshot process has {path} open"
        )


#: The size of the record LMDB's main database keeps for each named table (MDB_db).
_TABLE_RECORD = 48


def _check_catalogue(txn: Any) -> None:
    """Read every entry of LMDB's main database, the list of named tables, first.

    Opening a table looks its name up there and creates it when it is not
    found: a damaged entry would make a table the store holds look new and
    empty (its sessions and batches gone from every listing, with nothing
    said). Read whole (a few dozen bytes a table), a damaged entry is an
    ``lmdb.Error``, and the store says it is damaged instead.
    """
    for name, record in txn.cursor():
        if len(record) != _TABLE_RECORD or not name or not bytes(name).isascii():
            raise lmdb.CorruptedError(f"the list of tables holds a damaged entry {bytes(name)!r}")


class LmdbBackend:
    """Named tables in one LMDB environment (a directory)."""

    def __init__(self, path: Path, tables: tuple[str, ...] = CORE_TABLES) -> None:
        self.path = path
        self._table_names = tables
        try:
            path.mkdir(parents=True, exist_ok=True, mode=0o700)
            # Held shared by every process with the store open; compact takes it
            # exclusively, so it never swaps the file under a reader.
            self._lock_fd = os.open(
                path / "open.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600
            )
            fcntl.flock(self._lock_fd, fcntl.LOCK_SH)
        except OSError as exc:
            raise store_failure(path, exc) from None
        self._open_env()
        self._keep_reserve()

    def _keep_reserve(self) -> None:
        """Set the space reserve aside, if it is not and the disk has room to spare."""
        reserve = self.path / _RESERVE
        if reserve.exists():
            return
        free = free_bytes(self.path)
        if free is None or free < 4 * RESERVE_BYTES:
            return
        try:
            fd = os.open(reserve, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        except OSError:
            return
        try:
            os.posix_fallocate(fd, 0, RESERVE_BYTES)
        except OSError:
            reserve.unlink(missing_ok=True)
        finally:
            os.close(fd)

    def use_reserve(self) -> bool:
        """Give the reserve back to the file system; False if there was none."""
        try:
            (self.path / _RESERVE).unlink()
        except FileNotFoundError:
            return False
        return True

    def _open_env(self) -> None:
        data = self.path / "data.mdb"
        current = data.stat().st_size if data.exists() else 0
        map_size = max(_INITIAL_MAP, 2 * current)
        try:
            self._env = lmdb.open(
                str(self.path),
                map_size=map_size,
                max_dbs=32,
                readahead=False,  # random reads over a store that may exceed RAM
                meminit=False,
                # Durable commits (LMDB's defaults, said here because they
                # are relied on): data pages fdatasync'ed, then the meta page
                # written through an O_DSYNC descriptor. writemap stays off,
                # so a stray write through a pointer cannot reach the file.
                sync=True,
                metasync=True,
                max_readers=256,
            )
            self._env.reader_check()  # clear readers left by killed processes
            self._dbs: dict[str, Any] = {}  # handle per table
            with self._env.begin(write=True) as txn:
                _check_catalogue(txn)
                for name in self._table_names:
                    self._dbs[name] = self._env.open_db(name.encode(), txn=txn)
        except lmdb.Error as exc:
            raise store_failure(self.path, exc) from None

    def _db(self, table: str) -> Any:
        try:
            return self._dbs[table]
        except KeyError:
            raise KeyError(f"no table {table!r}") from None

    def _begin(self, write: bool) -> Any:
        for attempt in (1, 2):
            try:
                if write:
                    return self._env.begin(write=True)
                return self._env.begin(buffers=True)
            except lmdb.MapResizedError:
                if attempt == 2:
                    raise
                # Another process grew the map: adopt its size and go on.
                self._env.set_mapsize(0)
        raise AssertionError("unreachable")

    @contextmanager
    def read(self) -> Iterator[ReadView]:
        try:
            txn = self._begin(write=False)
        except lmdb.Error as exc:
            raise store_failure(self.path, exc) from None
        try:
            yield _LmdbView(self, txn)
        except lmdb.Error as exc:  # a damaged page met while reading: one line, no traceback
            raise store_failure(self.path, exc) from None
        finally:
            txn.abort()

    @contextmanager
    def write(self) -> Iterator[WriteBatch]:
        batch = _LmdbBatch(self)
        try:
            yield batch
            batch.flush()
        except lmdb.Error as exc:
            raise store_failure(self.path, exc) from None
        finally:
            batch.close()

    def apply(self, buffer: Buffer) -> None:
        """Apply buffered changes in one transaction, growing the map if full.

        A full disk fails the transaction as a whole (nothing of it is
        visible); a small one is retried once with the space reserve given
        back, so records and gc still work on a full disk.
        """
        if not buffer.tables:
            return
        reserve_tried = False
        while True:
            try:
                with self._begin(write=True) as txn:
                    for table, changes in buffer.tables.items():
                        db = self._db(table)
                        for key in sorted(changes):
                            value = changes[key]
                            if value is None:
                                txn.delete(key, db=db)
                            else:
                                txn.put(key, value, db=db)
                    faults.point("store-commit")
                return
            except lmdb.MapFullError:
                self._grow(buffer.size)
            except (lmdb.Error, OSError) as exc:
                failure = store_failure(self.path, exc, buffer.size)
                small = buffer.size <= RESERVE_BYTES // 4
                if failure.no_space and small and not reserve_tried and self.use_reserve():
                    reserve_tried = True
                    continue
                raise failure from None

    def _grow(self, needed: int) -> None:
        size = self._env.info()["map_size"]
        new = max(size * 2, size + 4 * needed)
        if new > _MAX_MAP:
            raise StoreError(self.path, "the store would exceed 16 TiB")
        self._env.set_mapsize(new)

    def disk_bytes(self) -> int:
        total = 0
        for name in ("data.mdb", "lock.mdb"):
            with suppress(FileNotFoundError):
                total += (self.path / name).stat().st_blocks * 512
        return total

    @contextmanager
    def exclusive(self, what: str) -> Iterator[None]:
        """Hold the store alone: every other process keeps a shared lock while open."""
        try:
            fcntl.flock(self._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            # Converting a lock drops the shared one first: take it back, or
            # another process could gc or compact under this one.
            fcntl.flock(self._lock_fd, fcntl.LOCK_SH)
            raise StoreBusy(self.path, what) from None
        try:
            yield
        finally:
            fcntl.flock(self._lock_fd, fcntl.LOCK_SH)

    def compact(self) -> None:
        """Rewrite the file to its live size (LMDB files never shrink)."""
        with self.exclusive("compacting"):
            tmp = self.path / "compact.tmp"
            shutil.rmtree(tmp, ignore_errors=True)
            tmp.mkdir()
            try:
                self._env.copy(str(tmp), compact=True)
            except lmdb.Error as exc:
                shutil.rmtree(tmp, ignore_errors=True)
                failure = store_failure(self.path, exc)
                if failure.no_space:
                    raise StoreError(
                        self.path,
                        f"{failure}; compacting copies the live data, so it needs about "
                        "that much free space: run 'earshot gc' without --compact, which "
                        "frees room inside the store for new checkpoints",
                        no_space=True,
                    ) from None
                raise StoreError(self.path, f"compact failed: {exc}") from None
            self._env.close()
            os.replace(tmp / "data.mdb", self.path / "data.mdb")
            shutil.rmtree(tmp, ignore_errors=True)
            self._open_env()

    def close(self) -> None:
        env: Any = getattr(self, "_env", None)
        if env is not None:
            env.close()
            del self._env
        if getattr(self, "_lock_fd", -1) >= 0:
            os.close(self._lock_fd)
            self._lock_fd = -1


class _LmdbView:
    def __init__(self, backend: LmdbBackend, txn: Any) -> None:
        self._backend = backend
        self._txn = txn

    def get(self, table: str, key: bytes) -> bytes | None:
        value = self._txn.get(key, db=self._backend._db(table))
        return None if value is None else bytes(value)

    def get_slice(self, table: str, key: bytes, offset: int, length: int) -> bytes | None:
        # buffers=True: the value is a view of the map, so only the slice is copied.
        value = self._txn.get(key, db=self._backend._db(table))
        return None if value is None else bytes(value[offset : offset + length])

    def items(self, table: str, prefix: bytes = b"") -> Iterator[tuple[bytes, bytes]]:
        with self._txn.cursor(db=self._backend._db(table)) as cursor:
            if not cursor.set_range(prefix):
                return
            for key, value in cursor:
                key = bytes(key)
                if not key.startswith(prefix):
                    break
                yield key, bytes(value)

    def keys(self, table: str) -> Iterator[bytes]:
        with self._txn.cursor(db=self._backend._db(table)) as cursor:
            for key in cursor.iternext(keys=True, values=False):
                yield bytes(key)


class _LmdbBatch:
    """Writes buffered in Python; reads go to the buffer, then a short read txn."""

    def __init__(self, backend: LmdbBackend) -> None:
        self._backend = backend
        self._buffer = Buffer()
        self._txn: Any = None

    def _view(self) -> _LmdbView:
        if self._txn is None:
            self._txn = self._backend._begin(write=False)
        return _LmdbView(self._backend, self._txn)

    def get(self, table: str, key: bytes) -> bytes | None:
        found, value = self._buffer.lookup(table, key)
        return value if found else self._view().get(table, key)

    def get_slice(self, table: str, key: bytes, offset: int, length: int) -> bytes | None:
        found, value = self._buffer.lookup(table, key)
        if found:
            return None if value is None else value[offset : offset + length]
        return self._view().get_slice(table, key, offset, length)

    def items(self, table: str, prefix: bytes = b"") -> Iterator[tuple[bytes, bytes]]:
        return self._buffer.overlay(table, prefix, self._view().items(table, prefix))

    def keys(self, table: str) -> Iterator[bytes]:
        return self._buffer.overlay_keys(table, self._view().keys(table))

    def put(self, table: str, key: bytes, value: bytes) -> None:
        self._backend._db(table)
        self._buffer.put(table, key, value)

    def delete(self, table: str, key: bytes) -> None:
        self._backend._db(table)
        self._buffer.delete(table, key)

    @property
    def pending_bytes(self) -> int:
        return self._buffer.size

    def flush(self, tables: tuple[str, ...] | None = None) -> None:
        self._end_read()
        self._backend.apply(self._buffer.take(tables))

    def _end_read(self) -> None:
        # A read txn open in this process would pin pages and block set_mapsize.
        if self._txn is not None:
            self._txn.abort()
            self._txn = None

    def close(self) -> None:
        self._end_read()
        self._buffer.clear()
