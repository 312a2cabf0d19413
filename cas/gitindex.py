"""git's index, read (never written): the paths a work tree tracks.

git applies no ignore pattern to a path in its index, so neither does
earshot: a tracked file is recorded whatever the rules say. The index is
read directly (no git process, none installed needed): versions 2, 3 and 4
(gitformat-index(5)). Each entry is 40 bytes of stat data, an object name
(20 bytes, 32 in a sha256 repository), 16 bits of flags (the low 12 the
path length, 0xFFF for "longer") and in version 3+, when the extended flag
is set, 16 more; then the path. Versions 2 and 3 NUL-terminate the path and
pad the entry to a multiple of 8 bytes; version 4 writes no padding and
prefix-compresses each path against the previous one (a varint: how many
bytes of the previous path to drop; then the rest, NUL-terminated).

A split index (the ``link`` extension: most entries in a
``sharedindex.<hash>`` file) is refused: the scan then counts no path as
tracked, the ignore rules alone decide, and a warning is logged. So is any
index that does not parse.

Reading is lazy (only when an ignore rule matches something) and the
answer is tied to the index file's stat (mtime_ns, ctime_ns, size, inode):
the stat cache keeps that identity in the record of every directory whose
outcome depended on the index, and trusts the record only while the
identity is the same. An unchanged index is never read again.
"""

from __future__ import annotations

import os
import stat
import struct
from bisect import bisect_left
from dataclasses import dataclass
from itertools import pairwise
from typing import Final

from .errors import EarshotError
from .gitrepo import GitRepo
from .logs import get_logger

log = get_logger("earshot.cas")

_HEADER: Final = struct.Struct(">4sII")
_STAT_BYTES: Final = 40
_EXTENDED: Final = 0x4000
_NAME_MASK: Final = 0xFFF
#: The identity of "no index": no repository, or one with nothing added yet.
NO_INDEX: Final = b"-"


class BadIndex(EarshotError):
    """An index file that cannot be read as one."""

    def __init__(self, path: str, why: str) -> None:
        super().__init__(f"{path}: not a readable git index ({why})")
        self.path = path
        self.why = why


class SplitIndex(BadIndex):
    """An index that keeps most entries in a shared index file (core.splitIndex)."""

    def __init__(self, path: str) -> None:
        super().__init__(path, "a split index, which earshot does not read")


@dataclass(frozen=True, slots=True)
class IndexPaths:
    """What an index lists: its version and every path, as bytes (a path per stage)."""

    version: int
    paths: list[bytes]


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    # git's offset varint (varint.c): each continuation byte also adds one.
    byte = data[pos]
    pos += 1
    value = byte & 0x7F
    while byte & 0x80:
        byte = data[pos]
        pos += 1
        value = ((value + 1) << 7) | (byte & 0x7F)
    return value, pos


def parse_index(data: bytes, digest_size: int = 20, where: str = "index") -> IndexPaths:
    """The paths of an index file's bytes; raises BadIndex (SplitIndex for a split one)."""
    if len(data) < _HEADER.size + digest_size:
        raise BadIndex(where, "too short")
    signature, version, count = _HEADER.unpack_from(data)
    if signature != b"DIRC":
        raise BadIndex(where, "no DIRC signature")
    if version not in (2, 3, 4):
        raise BadIndex(where, f"version {version}")
    end = len(data) - digest_size
    flags_at = _STAT_BYTES + digest_size
    paths: list[bytes] = []
    pos = _HEADER.size
    previous = b""
    find = data.find
    try:
        for _ in range(count):
            flags = int.from_bytes(data[pos + flags_at : pos + flags_at + 2], "big")
            name_at = pos + flags_at + (4 if flags & _EXTENDED and version >= 3 else 2)
            if version == 4:
                drop, name_at = _varint(data, name_at)
                stop = find(b"\0", name_at, end)
                if stop < 0 or drop > len(previous):
                    raise BadIndex(where, "an entry runs past the end")
                path = previous[: len(previous) - drop] + data[name_at:stop]
                pos = stop + 1
            else:
                length = flags & _NAME_MASK
                stop = name_at + length if length < _NAME_MASK else find(b"\0", name_at, end)
                if stop < 0 or stop >= end or data[stop] != 0:
                    raise BadIndex(where, "an entry runs past the end")
                path = data[name_at:stop]
                pos += (stop - pos + 8) & ~7  # NUL-padded to a multiple of 8
            paths.append(path)
            previous = path
    except IndexError:
        raise BadIndex(where, "an entry runs past the end") from None
    if pos > end:
        raise BadIndex(where, "entries run past the end")
    if any(a > b for a, b in pairwise(paths)):
        raise BadIndex(where, "entries out of order")  # lookups are binary searches
    while pos + 8 <= end:  # extensions: signature, 32-bit size, data
        if data[pos : pos + 4] == b"link":
            raise SplitIndex(where)
        pos += 8 + int.from_bytes(data[pos + 4 : pos + 8], "big")
    return IndexPaths(version, paths)


def read_index(path: str, digest_size: int = 20) -> IndexPaths:
    """Parse the index file at ``path``; BadIndex for one that is not a regular file.

    Opened without blocking: a FIFO put at ``.git/index`` would otherwise hold
    every scan that asks the index anything, for ever.
    """
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise BadIndex(path, "not a regular file")
        return parse_index(f.read(), digest_size, path)


def _identity(st: os.stat_result) -> bytes:
    return struct.pack(">qqqq", st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_ino)


class PathsCache:
    """Index paths kept by (index file, identity), in memory; a scan keeps them in its store."""

    def __init__(self) -> None:
        self._kept: dict[str, tuple[bytes, list[bytes]]] = {}

    def get(self, index_path: str, identity: bytes) -> list[bytes] | None:
        kept = self._kept.get(index_path)
        return kept[1] if kept is not None and kept[0] == identity else None

    def put(self, index_path: str, identity: bytes, paths: list[bytes], newest_ns: int) -> None:
        """Keep ``paths``, read from the index whose newest time stamp is ``newest_ns``."""
        self._kept[index_path] = (identity, paths)


class GitIndex:
    """The paths one work tree's index tracks, asked about by path relative to the earshot root.

    ``inside``: where the root lies in the work tree ("" when the root is
    its top); ``at``: where the work tree's top lies in the root ("" unless
    it is a repository nested in the root). Read on the first question, from
    ``cache`` when it holds this index's identity, else parsed (and kept
    there). The paths stay the sorted bytes git wrote: a question is a
    binary search, and nothing is built for the paths never asked about.

    The index is taken as it is at the first question: a scan judges every
    directory by one index. ``live`` (a long-lived watcher) looks again at
    every question, one stat, and reads it again when it changed.
    """

    def __init__(
        self,
        repo: GitRepo | None,
        inside: str = "",
        at: str = "",
        cache: PathsCache | None = None,
        live: bool = False,
    ) -> None:
        self.repo = repo  # None: no repository, nothing is tracked
        self.inside = os.fsencode(f"{inside}/") if inside else b""
        self.at = f"{at}/" if at else ""
        self.cache = cache if cache is not None else PathsCache()
        self.live = live
        self._identity: tuple[bytes, int] | None = None
        self._paths: list[bytes] | None = None

    def identity(self) -> tuple[bytes, int]:
        """(the index file's identity, its newest time stamp in ns); taken once unless live."""
        if self._identity is None or self.live:
            try:
                if self.repo is None:
                    raise FileNotFoundError
                st = os.stat(self.repo.index_path)
            except OSError:
                now = (NO_INDEX, 0)
            else:
                now = (_identity(st), max(st.st_mtime_ns, st.st_ctime_ns))
            if now != self._identity:
                self._identity, self._paths = now, None
        return self._identity

    def tracks(self, rel: str, is_dir: bool) -> bool:
        """Whether ``rel`` is in the index: a file, or (``is_dir``) a directory holding one."""
        if self.live:
            self.identity()
        paths = self._paths if self._paths is not None else self._load()
        if self.at:
            if not rel.startswith(self.at):
                return False
            rel = rel[len(self.at) :]
        key = self.inside + os.fsencode(rel)
        i = bisect_left(paths, key)
        if i < len(paths) and paths[i] == key:
            return True
        if not is_dir:
            return False
        key += b"/"
        i = bisect_left(paths, key, i)
        return i < len(paths) and paths[i].startswith(key)

    def _load(self) -> list[bytes]:
        identity, newest_ns = self.identity()
        if identity == NO_INDEX or self.repo is None:
            self._paths = []
            return self._paths
        paths = self.cache.get(self.repo.index_path, identity)
        if paths is None:
            try:
                paths = read_index(self.repo.index_path, self.repo.digest_size()).paths
            except (OSError, BadIndex) as exc:
                log.warning(
                    "git index not read: no path counts as tracked, the ignore rules decide",
                    index=self.repo.index_path,
                    why=exc.why if isinstance(exc, BadIndex) else str(exc),
                )
                paths = []
            self.cache.put(self.repo.index_path, identity, paths, newest_ns)
        self._paths = paths
        return paths
