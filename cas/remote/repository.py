"""A remote repository: its files, its keys, its index and its references.

Files under the remote's prefix::

    config             plain JSON: the format and the repository's random id
    keys/<id>          the master key, wrapped under a passphrase or key file
    data/<name>        packs of sealed objects (``packs``), named by BLAKE3 of
                       their bytes: immutable, and their names tell nothing
    index/<name>       sealed lists of what packs hold, one per upload step
    refs/<S>/<push>    sealed references: ``S`` is a keyed name of the session
                       id, ``push`` a time-ordered id of the push that wrote it
    locks/<id>         sealed lock files (``locks``)

Everything is immutable but locks: a push adds packs, then the index files
naming them, then its reference last, so the remote never names a missing
object, and two pushes never write the same name (no lost update, with no
conditional write needed). Index files are kept in a local cache by name
(``$EARSHOT_HOME/remote-cache/<repository id>/``): being immutable, a name
read once is never fetched again.
"""

from __future__ import annotations

import json
import os
import secrets
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from earshot.cas.digest import Digest
from earshot.cas.errors import EarshotError

from .crypto import MasterKey, Tampered, WrongKey, content_name, unwrap, wrap
from .packs import INDEX_AAD, Entry, decode_index, encode_index
from .storage import SAFE_NAME, RemoteError, Storage

FORMAT = 1
REF_AAD = b"earshot ref "


class NotARepository(EarshotError):
    def __init__(self, url: str) -> None:
        super().__init__(
            f"{url}: not an earshot remote (no config there; 'earshot remote add' makes one)"
        )


@dataclass(frozen=True, slots=True)
class RefName:
    """``refs/<session key>/<push id>``."""

    session_key: str
    push: str

    @property
    def path(self) -> str:
        return f"refs/{self.session_key}/{self.push}"


def new_push_id() -> str:
    """Sorts by time: the newest reference of a session is the last name."""
    return f"{time.time_ns():020d}-{secrets.token_hex(4)}"


class Repository:
    """An opened remote: storage, the master key, and the cache of its index."""

    def __init__(self, storage: Storage, key: MasterKey, repo_id: str, cache: Path) -> None:
        self.storage = storage
        self.key = key
        self.id = repo_id
        self.cache = cache / repo_id
        self._index: dict[Digest, Entry] | None = None
        self._index_files: set[str] = set()

    # -- opening ------------------------------------------------------------

    @staticmethod
    def open(storage: Storage, secret: bytes, cache: Path, create: bool = False) -> Repository:
        """Open the remote with ``secret``; with ``create``, make it if it is empty."""
        raw = storage.get("config")
        if raw is None:
            if not create:
                raise NotARepository(storage.url)
            return Repository._init(storage, secret, cache)
        repo_id = _read_config(storage.url, raw)
        for listed in storage.listing("keys"):
            doc = storage.get(listed.name)
            key = unwrap(doc, secret) if doc is not None else None
            if key is not None:
                return Repository(storage, key, repo_id, cache)
        raise WrongKey(storage.url)

    @staticmethod
    def _init(storage: Storage, secret: bytes, cache: Path) -> Repository:
        storage.check_bucket()
        key = MasterKey.new()
        repo_id = secrets.token_hex(16)
        # The key first: a config with no key would be a remote nobody opens.
        storage.put(f"keys/{secrets.token_hex(16)}", wrap(key, secret))
        storage.put("config", json.dumps({"earshot-remote": FORMAT, "id": repo_id}).encode())
        return Repository(storage, key, repo_id, cache)

    # -- the index ------------------------------------------------------------

    def index(self, refresh: bool = False) -> dict[Digest, Entry]:
        """Every object the remote's index files name (read once per process)."""
        if self._index is not None and not refresh:
            return self._index
        names = {listed.name for listed in self.storage.listing("index")}
        if self._index is None or refresh:
            self._index, self._index_files = {}, set()
        for name in sorted(names - self._index_files):
            self._index.update(self.read_index_file(name))
            self._index_files.add(name)
        return self._index

    def index_files(self) -> set[str]:
        self.index()
        return set(self._index_files)

    def read_index_file(self, path: str) -> dict[Digest, Entry]:
        sealed = self._cached(path)
        plain = self.key.open(sealed, INDEX_AAD, path)
        return decode_index(plain, path)

    def _cached(self, path: str) -> bytes:
        """An immutable file's bytes, from the cache when it was read before;
        checked against its name either way."""
        if not SAFE_NAME.match(path):
            raise Tampered(path)
        local = self.cache / path
        try:
            data = local.read_bytes()
            if content_name(data) == path.rsplit("/", 1)[-1]:
                return data
        except OSError:
            pass
        fetched = self.storage.get(path)
        if fetched is None:
            raise RemoteError(self.storage.url, f"{path} is gone (removed meanwhile by a gc?)")
        data = fetched
        if content_name(data) != path.rsplit("/", 1)[-1]:
            raise Tampered(path)
        _write_cache(local, data)
        return data

    def put_index(self, entries: dict[Digest, Entry]) -> str:
        sealed = self.key.seal(encode_index(entries), INDEX_AAD)
        path = f"index/{content_name(sealed)}"
        self.storage.put(path, sealed)
        _write_cache(self.cache / path, sealed)
        if self._index is not None:
            self._index.update(entries)
            self._index_files.add(path)
        return path

    def put_pack(self, data: bytes) -> str:
        name = content_name(data)
        self.storage.put(f"data/{name}", data)
        return name

    # -- references -----------------------------------------------------------

    def session_key(self, session: str) -> str:
        return self.key.keyed_name("session:" + session)

    def refs(self) -> list[RefName]:
        out = []
        for listed in self.storage.listing("refs"):
            parts = listed.name.split("/")
            if len(parts) == 3:
                out.append(RefName(parts[1], parts[2]))
        return sorted(out, key=lambda r: r.push)

    def read_ref(self, ref: RefName) -> dict[str, Any]:
        sealed = self.storage.get(ref.path)
        if sealed is None:
            raise RemoteError(self.storage.url, f"{ref.path} is gone (removed meanwhile?)")
        plain = self.key.open(sealed, REF_AAD + ref.path.encode(), ref.path)
        try:
            doc = json.loads(plain)
        except ValueError:
            raise Tampered(ref.path) from None
        if not isinstance(doc, dict):
            raise Tampered(ref.path)
        return doc

    def put_ref(self, session: str, doc: dict[str, Any]) -> RefName:
        ref = RefName(self.session_key(session), new_push_id())
        plain = json.dumps(doc, sort_keys=True).encode()
        self.storage.put(ref.path, self.key.seal(plain, REF_AAD + ref.path.encode()))
        return ref

    def iter_refs(self) -> Iterator[tuple[RefName, dict[str, Any]]]:
        for ref in self.refs():
            yield ref, self.read_ref(ref)


def _read_config(url: str, raw: bytes) -> str:
    try:
        doc = json.loads(raw)
        version = int(doc["earshot-remote"])
        repo_id = str(doc["id"])
    except (ValueError, KeyError, TypeError, OverflowError):
        raise NotARepository(url) from None
    if version > FORMAT:
        raise RemoteError(url, f"format {version} is newer than this earshot reads ({FORMAT})")
    if not repo_id.isalnum():
        raise NotARepository(url)
    return repo_id


def _write_cache(path: Path, data: bytes) -> None:
    """A cache file, written whole or not at all (it is checked when read)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        temp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        temp.write_bytes(data)
        os.replace(temp, path)
    except OSError:
        pass  # a cache: the next read fetches it again
