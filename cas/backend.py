"""The key-value interface under the object store, and its in-memory twin.

Everything earshot keeps lives in a few named tables of byte keys and byte
values. Writes are buffered in a ``WriteBatch`` and applied atomically when it
is committed (``flush`` commits what is buffered so far and goes on), so the
real database transaction is short and holds no file I/O of the tree.
One contract test suite runs against every backend.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Protocol

from .errors import EarshotError
from .schema import CORE_TABLES


class StoreError(EarshotError):
    """The database under a backend failed (disk full, permissions, corruption)."""

    def __init__(self, path: Path, why: str, no_space: bool = False, damaged: bool = False) -> None:
        super().__init__(why if no_space else f"store {path}: {why}")
        self.path = path
        #: The disk holding the store is full.
        self.no_space = no_space
        #: The store's pages cannot be read (not one record: the file).
        self.damaged = damaged


#: Tables every store has. Higher layers may ask for more by name at open.


class ReadView(Protocol):
    """A consistent read-only view of the tables."""

    def get(self, table: str, key: bytes) -> bytes | None: ...

    def get_slice(self, table: str, key: bytes, offset: int, length: int) -> bytes | None:
        """``value[offset:offset+length]`` without copying the whole value."""
        ...

    def items(self, table: str, prefix: bytes = b"") -> Iterator[tuple[bytes, bytes]]:
        """Key/value pairs of a table in key order, optionally under a prefix."""
        ...

    def keys(self, table: str) -> Iterator[bytes]:
        """A table's keys in order, without reading its values (packs are MiBs each)."""
        ...


class WriteBatch(ReadView, Protocol):
    """Buffered writes; reads see them. Committed atomically on success."""

    def put(self, table: str, key: bytes, value: bytes) -> None: ...

    def delete(self, table: str, key: bytes) -> None: ...

    @property
    def pending_bytes(self) -> int: ...

    def flush(self, tables: tuple[str, ...] | None = None) -> None:
        """Commit what is buffered so far, as one transaction, and go on.

        With ``tables``, only what is buffered for those tables commits; the
        rest stays buffered for a later flush or the end of the block. The
        object writer commits objects early this way, and everything that
        names an object (the stat cache, snapshots, records) only at the end,
        so no committed record ever names an object that is not committed.
        """
        ...


class Backend(Protocol):
    """A store of named tables: the LMDB one, or the in-memory twin."""

    def read(self) -> AbstractContextManager[ReadView]: ...

    def write(self) -> AbstractContextManager[WriteBatch]: ...

    def disk_bytes(self) -> int: ...

    def compact(self) -> None: ...

    def exclusive(self, what: str) -> AbstractContextManager[None]:
        """Hold the store alone (gc, compact): fails if another process has it open."""
        ...

    def use_reserve(self) -> bool:
        """Give the space set aside for a full disk back to the file system, for a
        small write that must happen; False when there was none."""
        ...

    def close(self) -> None: ...


class Buffer:
    """Pending puts and deletes per table; ``None`` marks a delete."""

    def __init__(self) -> None:
        self.tables: dict[str, dict[bytes, bytes | None]] = {}
        self.size = 0

    def put(self, table: str, key: bytes, value: bytes) -> None:
        self.tables.setdefault(table, {})[key] = value
        self.size += len(key) + len(value)

    def delete(self, table: str, key: bytes) -> None:
        self.tables.setdefault(table, {})[key] = None
        self.size += len(key)

    def lookup(self, table: str, key: bytes) -> tuple[bool, bytes | None]:
        """(found in buffer, value or None for a buffered delete)."""
        pending = self.tables.get(table)
        if pending is not None and key in pending:
            return True, pending[key]
        return False, None

    def overlay(
        self, table: str, prefix: bytes, base: Iterator[tuple[bytes, bytes]]
    ) -> Iterator[tuple[bytes, bytes]]:
        """Merge buffered changes over a base iteration, in key order."""
        pending = {k: v for k, v in self.tables.get(table, {}).items() if k.startswith(prefix)}
        if not pending:
            yield from base
            return
        merged = dict(base)
        for key, value in pending.items():
            if value is None:
                merged.pop(key, None)
            else:
                merged[key] = value
        for key in sorted(merged):
            yield key, merged[key]

    def overlay_keys(self, table: str, base: Iterator[bytes]) -> Iterator[bytes]:
        """Merge buffered puts and deletes over a base iteration of keys, in order."""
        pending = self.tables.get(table)
        if not pending:
            yield from base
            return
        merged = set(base)
        for key, value in pending.items():
            if value is None:
                merged.discard(key)
            else:
                merged.add(key)
        yield from sorted(merged)

    def clear(self) -> None:
        self.tables.clear()
        self.size = 0

    def take(self, tables: tuple[str, ...] | None) -> Buffer:
        """Move the named tables' changes (all, for None) into a new buffer."""
        taken = Buffer()
        if tables is None:
            taken.tables, taken.size = self.tables, self.size
            self.tables, self.size = {}, 0
            return taken
        for name in tables:
            changes = self.tables.pop(name, None)
            if changes is None:
                continue
            taken.tables[name] = changes
            moved = sum(len(k) + (len(v) if v is not None else 0) for k, v in changes.items())
            taken.size += moved
            self.size -= moved
        return taken


class MemoryBackend:
    """Tables in dictionaries: the twin the contract tests run beside LMDB."""

    def __init__(self, tables: tuple[str, ...] = CORE_TABLES) -> None:
        self._tables: dict[str, dict[bytes, bytes]] = {name: {} for name in tables}

    def _table(self, name: str) -> dict[bytes, bytes]:
        try:
            return self._tables[name]
        except KeyError:
            raise KeyError(f"no table {name!r}") from None

    @contextmanager
    def read(self) -> Iterator[ReadView]:
        yield _MemoryView(self)

    @contextmanager
    def write(self) -> Iterator[WriteBatch]:
        batch = _MemoryBatch(self)
        yield batch
        batch.flush()

    def disk_bytes(self) -> int:
        return sum(len(k) + len(v) for t in self._tables.values() for k, v in t.items())

    def compact(self) -> None:
        return None

    @contextmanager
    def exclusive(self, what: str) -> Iterator[None]:
        yield

    def use_reserve(self) -> bool:
        return False

    def close(self) -> None:
        return None

    def apply(self, buffer: Buffer) -> None:
        for table in buffer.tables:
            self._table(table)  # all or nothing, as a transaction
        for table, changes in buffer.tables.items():
            target = self._table(table)
            for key, value in changes.items():
                if value is None:
                    target.pop(key, None)
                else:
                    target[key] = value


class _MemoryView:
    def __init__(self, backend: MemoryBackend) -> None:
        self._backend = backend

    def get(self, table: str, key: bytes) -> bytes | None:
        return self._backend._table(table).get(key)

    def get_slice(self, table: str, key: bytes, offset: int, length: int) -> bytes | None:
        value = self.get(table, key)
        return None if value is None else value[offset : offset + length]

    def items(self, table: str, prefix: bytes = b"") -> Iterator[tuple[bytes, bytes]]:
        data = self._backend._table(table)
        for key in sorted(k for k in data if k.startswith(prefix)):
            yield key, data[key]

    def keys(self, table: str) -> Iterator[bytes]:
        return (k for k, _ in self.items(table))


class _MemoryBatch(_MemoryView):
    def __init__(self, backend: MemoryBackend) -> None:
        super().__init__(backend)
        self._buffer = Buffer()

    def get(self, table: str, key: bytes) -> bytes | None:
        found, value = self._buffer.lookup(table, key)
        return value if found else super().get(table, key)

    def items(self, table: str, prefix: bytes = b"") -> Iterator[tuple[bytes, bytes]]:
        return self._buffer.overlay(table, prefix, super().items(table, prefix))

    def keys(self, table: str) -> Iterator[bytes]:
        return self._buffer.overlay_keys(table, super().keys(table))

    def put(self, table: str, key: bytes, value: bytes) -> None:
        self._backend._table(table)  # unknown tables fail at the call, as in LMDB
        self._buffer.put(table, key, value)

    def delete(self, table: str, key: bytes) -> None:
        self._backend._table(table)
        self._buffer.delete(table, key)

    @property
    def pending_bytes(self) -> int:
        return self._buffer.size

    def flush(self, tables: tuple[str, ...] | None = None) -> None:
        self._backend.apply(self._buffer.take(tables))
