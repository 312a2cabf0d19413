"""Recording a root: walk it, hash what changed, build per-directory trees.

A full restage lists every directory (``os.scandir``) and lstats every entry,
but reads a file only when its stat key differs from the stat cache, and
re-encodes a directory's tree only when something in it changed; so the cost
of an unchanged tree is one walk with lstat, and unchanged subtrees keep their
digests. Never followed: symlinks (recorded as links). Always skipped: any
``.git`` entry, the data directory if it lies inside the root, earshot's own
restore temp files, and whatever the ignore rules exclude.

Hashing is safe against files changing underneath: open with O_NOFOLLOW,
fstat, read and hash, fstat again; if anything moved, the content is recorded
but not cached. Parallel hashing is deliberately absent: a thread pool over
small files was slower than a plain loop here (docs/FACTS.md).
"""

from __future__ import annotations

import os
import re
import stat
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from .digest import Digest, blob_digest
from .errors import EarshotError
from .gitindex import NO_INDEX
from .ignore import IgnoreRules
from .mounts import MountTable
from .objects import ObjectWriter
from .statcache import SMUDGED, DirRecord, EntryKey, StoredPaths, load_record, store_record
from .tree import Kind, TreeEntry, Unrecorded

TEMP_PREFIX = ".earshot-tmp-"
#: A temp file earshot writes before a rename: the prefix, a tag (an intent's
#: id, or ``w`` + pid) and a suffix. Only such a name is skipped by a scan: a
#: person's ``.earshot-tmp-notes`` is recorded like any file.
_TEMP_NAME = re.compile(r"\.earshot-tmp-(?:[0-9a-f]+-[0-9a-f]{8}|w[0-9]+)-[0-9a-f]+")


def is_temp_name(name: str) -> bool:
    """Whether ``name`` is one of earshot's own temp files (see ``_TEMP_NAME``)."""
    return name.startswith(TEMP_PREFIX) and _TEMP_NAME.fullmatch(name) is not None


#: The names whose presence in a listing changes the ignore rules below it
#: (``.git``: a nested repository, judged by its own rules and index).
IGNORE_FILES = (".gitignore", ".earshotignore", ".git")
#: Stored for a directory that depended on a git index too recently written
#: to trust its stat: it never matches, so the next scan judges again.
RACY_INDEX = b"racy"
DEFAULT_MAX_FILE_SIZE = 64 << 20
#: Directory levels recorded below the root. A deeper directory is kept as
#: unrecorded (``Unrecorded.TOO_DEEP``): never walked, so never deleted or
#: overwritten by a restore or an undo. Every walk over trees recurses a few
#: frames a level; 128 levels stay far inside Python's recursion limit, and
#: far beyond real trees (the kernel's deepest file is 11 levels down).
MAX_DEPTH = 128
#: Entries modified this close to the scan start are not trusted next time.
DEFAULT_RACY_MARGIN_NS = 2_000_000_000
_S_IFREG = stat.S_IFREG
_OPEN_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_RETRIES = 3

ProgressFn = Callable[[int], None]

# Plain ints in cache keys: marshal stores no enum members.
_FILE, _SYMLINK, _DIR, _UNRECORDED = (
    int(k) for k in (Kind.FILE, Kind.SYMLINK, Kind.DIR, Kind.UNRECORDED)
)


ENV_MAX_FILE_SIZE = "EARSHOT_MAX_FILE_SIZE"
_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


class BadSize(EarshotError):
    def __init__(self, text: str) -> None:
        super().__init__(f"{ENV_MAX_FILE_SIZE}={text!r} is not a size (e.g. 64M, 1G, 500000)")


def max_file_size_from_env() -> int:
    """The largest file recorded: $EARSHOT_MAX_FILE_SIZE (bytes, or with K/M/G), else 64 MiB."""
    given = os.environ.get(ENV_MAX_FILE_SIZE, "").strip()
    if not given:
        return DEFAULT_MAX_FILE_SIZE
    text = given.upper().removesuffix("B").removesuffix("I")
    number, unit = (text[:-1], text[-1]) if text and text[-1] in "KMG" else (text, "")
    try:
        value = int(float(number) * _UNITS[unit])
    except ValueError:
        raise BadSize(given) from None
    if value < 0:
        raise BadSize(given)
    return value


@dataclass(frozen=True, slots=True)
class ScanOptions:
    """How to record a root."""

    max_file_size: int = DEFAULT_MAX_FILE_SIZE
    racy_margin_ns: int = DEFAULT_RACY_MARGIN_NS
    #: Directories never recorded (earshot's data, when it lies inside the root).
    exclude_dirs: frozenset[str] = frozenset()


@dataclass(slots=True)
class ScanReport:
    """What a scan found besides the tree."""

    files: int = 0
    content_bytes: int = 0
    #: Files whose content was read (the stat cache did not vouch for them).
    files_read: int = 0
    bytes_read: int = 0
    unrecorded: list[tuple[str, Unrecorded]] = field(default_factory=list)
    #: (path, reason) of what was not walked at all: special file systems.
    skipped: list[tuple[str, str]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    #: Recorded regular files with other hard links: a write through a link
    #: outside the root, or in a directory nothing watches, changes them
    #: without an event on their own directory.
    linked: list[str] = field(default_factory=list)


def join(rel: str, name: str) -> str:
    return f"{rel}/{name}" if rel else name


def fsencode(name: str) -> bytes:
    return name.encode("utf-8", "surrogateescape")


class Scanner:
    """Turns directories on disk into stored trees, through one object writer."""

    def __init__(
        self,
        root: Path,
        writer: ObjectWriter,
        options: ScanOptions | None = None,
        progress: ProgressFn | None = None,
        use_cache: bool = True,
    ) -> None:
        self.root = str(root)
        self.writer = writer
        self.options = options or ScanOptions()
        self.progress = progress
        self.use_cache = use_cache
        self.report = ScanReport()
        self.trust_before_ns = 0
        #: Root-relative paths recorded whatever the size limit: what an
        #: agent's write or edit names, so undo can bring back what it replaced.
        self.unlimited: frozenset[str] = frozenset()
        self._seen = 0
        self.mounts = MountTable()
        #: The device of the directory being listed: a subdirectory on another
        #: one is a mount point, and only then is its file system looked up.
        try:
            self._dev: int | None = os.lstat(self.root).st_dev
        except OSError:
            self._dev = None

    # -- the whole root -------------------------------------------------

    def scan_root(self, marker: Path) -> Digest:
        """Record the whole root; ``marker`` is touched to time-stamp the scan."""
        self.trust_before_ns = touch_marker(marker) - self.options.racy_margin_ns
        rules = self.root_rules()
        mtime = os.lstat(self.root).st_mtime_ns
        return self.scan_dir(self.root, "", rules, is_root=True, dir_mtime=mtime)

    def root_rules(self) -> IgnoreRules:
        """The root's ignore rules, with what is read of git indexes kept in the store."""
        if not self.use_cache:
            return IgnoreRules.for_root(self.root)
        cache = StoredPaths(self.writer.view, self.writer.batch, self.trust_before_ns)
        return IgnoreRules.for_root(self.root, cache)

    # -- one directory ------------------------------------------------------

    def scan_dir(
        self,
        path: str,
        rel: str,
        parent_rules: IgnoreRules,
        is_root: bool = False,
        dir_mtime: int | None = None,
    ) -> Digest:
        """Record the directory at ``path`` (``rel`` from the root) and below.

        A directory whose mtime equals the cached one (and was safely old
        then) has the same names as last time: they are lstat'ed by name and
        the listing is not read again, as git's untracked cache does (~35% of
        a no-change walk here). Any doubt falls back to reading the listing.
        """
        record = load_record(self.writer.view, rel) if self.use_cache else None
        rules = None
        if record is not None and dir_mtime is not None and record.dir_mtime == dir_mtime:
            rules = (
                parent_rules if is_root else parent_rules.descend(rel, path, record.ignore_files)
            )
            if rules.fingerprint == record.fingerprint and _same_index(record, rules):
                known = self._visit_known(path, rel, rules, record)
                if known is not None:
                    return known
        with os.scandir(path) as listing:
            dirents = list(listing)
        names = [d.name for d in dirents]
        ignore_files = tuple(n for n in IGNORE_FILES if n in names)
        if is_root:
            rules = parent_rules
        elif rules is None or record is None or ignore_files != record.ignore_files:
            # Built above from the same ignore files, they need not be built
            # again: compiling the rules of a kernel tree's 305 .gitignore files
            # takes 1.25-1.3 s here, most of a no-change snapshot of it.
            rules = parent_rules.descend(rel, path, names)
        old = record.entries if record is not None else {}
        # With unchanged rules (and index), a name the cache holds with the same
        # kind is known to be recorded: only new names pay for pattern matching.
        same_rules = (
            record is not None
            and record.fingerprint == rules.fingerprint
            and _same_index(record, rules)
        )
        # Whether a name here was ignored, so that the index decided: then the
        # record holds only while the index is the same.
        judged = same_rules and bool(record.index_tag) if record is not None else False
        new: dict[str, EntryKey] = {}
        for dirent in dirents:
            name = dirent.name
            if name == ".git" or is_temp_name(name):
                continue
            cached = old.get(name)
            inner = rules  # the rules its own entries are judged by, for a directory
            try:
                is_dir = dirent.is_dir(follow_symlinks=False)
                if not (same_rules and cached is not None and (cached[0] == _DIR) == is_dir):
                    if rules.is_ignored(join(rel, name), is_dir):
                        judged = True
                        if not rules.tracks(join(rel, name), is_dir):
                            continue
                        if is_dir:
                            inner = rules.below_ignored()
                    if is_dir and dirent.path in self.options.exclude_dirs:
                        continue
                elif judged and is_dir and rules.is_ignored(join(rel, name), True):
                    inner = rules.below_ignored()  # kept last time for what it tracks
                st = dirent.stat(follow_symlinks=False)
            except FileNotFoundError:
                continue  # vanished mid-scan: it is simply not there
            key = self._visit(dirent.path, rel, name, st, cached, inner)
            if key is not None:
                new[name] = key
        index_tag = self._index_tag(rules) if judged else b""
        return self._finish_dir(
            rel, rules, record, new, dir_mtime, ignore_files, len(dirents), index_tag
        )

    def _index_tag(self, rules: IgnoreRules) -> bytes:
        """The index identity to store: never one written too close to the scan to trust."""
        tag, newest_ns = rules.index_identity()
        return tag if newest_ns < self.trust_before_ns else RACY_INDEX

    def _visit_known(
        self, path: str, rel: str, rules: IgnoreRules, record: DirRecord
    ) -> Digest | None:
        """Revisit the names a directory held last time; None if one has gone."""
        new: dict[str, EntryKey] = {}
        lstat = os.lstat
        # A directory kept although ignored (the index tracks something in it)
        # passes its rules on as "below ignored". With no index nothing is
        # kept so: no pattern is matched, and no level compiled (95 of the
        # kernel tree's, ~0.2 s of a no-change snapshot).
        judged = bool(record.index_tag) and record.index_tag != NO_INDEX
        for name, cached in record.entries.items():
            full = f"{path}/{name}"
            try:
                st = lstat(full)
            except FileNotFoundError:
                return None  # the listing changed after all: read it
            inner = rules
            if judged and cached[0] == _DIR and rules.is_ignored(join(rel, name), True):
                inner = rules.below_ignored()  # kept for what the index tracks in it
            key = self._visit(full, rel, name, st, cached, inner)
            if key is not None:
                new[name] = key
        return self._finish_dir(
            rel,
            rules,
            record,
            new,
            record.dir_mtime,
            record.ignore_files,
            len(new),
            record.index_tag,
        )

    def _visit(
        self,
        full: str,
        rel: str,
        name: str,
        st: os.stat_result,
        cached: EntryKey | None,
        rules: IgnoreRules,
    ) -> EntryKey | None:
        # The hot path, inlined: a regular file the stat cache vouches for.
        if (
            cached is not None
            and cached[0] == _FILE
            and cached[3] == st.st_mtime_ns
            and cached[2] == st.st_size
            and cached[4] == st.st_ctime_ns
            and cached[5] == st.st_ino
            and st.st_mode == _S_IFREG | cached[1]
        ):
            # No size check: a file over the limit is cached as a file only
            # when it was recorded past it (an agent's write named it), and
            # while it is unchanged it stays held.
            self.report.files += 1
            self.report.content_bytes += st.st_size
            if st.st_nlink > 1:
                self.report.linked.append(join(rel, name))
            return cached
        return self._entry(full, join(rel, name), st, cached, rules)

    def _finish_dir(
        self,
        rel: str,
        rules: IgnoreRules,
        record: DirRecord | None,
        new: dict[str, EntryKey],
        dir_mtime: int | None,
        ignore_files: tuple[str, ...],
        seen: int,
        index_tag: bytes = b"",
    ) -> Digest:
        """The directory's tree: reused when nothing changed, else encoded and cached."""
        self._seen += seen
        if self.progress is not None:
            self.progress(self._seen)
        fingerprint = rules.fingerprint
        # A directory changed this close to the scan start may change again
        # within one mtime tick: never trust its listing next time.
        mtime = SMUDGED if dir_mtime is None or dir_mtime >= self.trust_before_ns else dir_mtime
        if (
            record is not None
            and record.fingerprint == fingerprint
            and record.entries == new
            and record.dir_mtime == mtime
            and record.ignore_files == ignore_files
            and record.index_tag == index_tag
        ):
            return Digest(record.tree)
        if record is not None and record.fingerprint == fingerprint and record.entries == new:
            digest = Digest(record.tree)
        else:
            digest = self.writer.put_tree([entry_from_key(fsencode(n), k) for n, k in new.items()])
        if self.use_cache:
            store_record(
                self.writer.batch,
                DirRecord(rel, fingerprint, digest, new, mtime, ignore_files, index_tag),
            )
        return digest

    def _entry(
        self, path: str, rel: str, st: os.stat_result, cached: EntryKey | None, rules: IgnoreRules
    ) -> EntryKey | None:
        mode = st.st_mode
        perm = stat.S_IMODE(mode)
        if st.st_nlink > 1 and stat.S_ISREG(mode):
            self.report.linked.append(rel)
        if stat.S_ISDIR(mode):
            if rel.count("/") >= MAX_DEPTH - 1:
                self.report.warnings.append(
                    f"{rel[:60]}...: more than {MAX_DEPTH} levels deep, not recorded"
                )
                return self._unrecorded(rel, perm, 0, Unrecorded.TOO_DEEP)
            outer = self._dev
            if st.st_dev != outer:
                special = self.mounts.special_type(path)
                if special is not None:
                    # Kept in the tree as unrecorded: a restore never writes into it.
                    self.report.skipped.append((rel, f"special file system ({special})"))
                    return (_UNRECORDED, perm, 0, 0, 0, 0, None, int(Unrecorded.SPECIAL))
            self._dev = st.st_dev
            try:
                digest = self.scan_dir(path, rel, rules, dir_mtime=st.st_mtime_ns)
            except PermissionError:
                return self._unrecorded(rel, perm, 0, Unrecorded.UNREADABLE)
            except (FileNotFoundError, NotADirectoryError):
                return None
            finally:
                self._dev = outer
            return (_DIR, perm, 0, 0, 0, 0, digest, 0)
        if stat.S_ISLNK(mode):
            return self._symlink(path, rel, st, perm)
        if not stat.S_ISREG(mode):
            self.report.warnings.append(
                f"{rel}: special file (socket, fifo or device), not recorded"
            )
            return self._unrecorded(rel, perm, 0, Unrecorded.SPECIAL)
        self.report.files += 1
        self.report.content_bytes += st.st_size
        if st.st_size > self.options.max_file_size and rel not in self.unlimited:
            return self._unrecorded(rel, perm, st.st_size, Unrecorded.TOO_LARGE)
        if (
            cached is not None
            and cached[0] == _FILE
            and cached[1] == perm
            and cached[2] == st.st_size
            and cached[3] == st.st_mtime_ns
            and cached[4] == st.st_ctime_ns
            and cached[5] == st.st_ino
        ):
            return cached
        return self._hash_file(path, rel, st)

    def _hash_file(self, path: str, rel: str, st: os.stat_result) -> EntryKey | None:
        for _attempt in range(_RETRIES):
            try:
                fd = os.open(path, _OPEN_FLAGS)
            except FileNotFoundError:
                return None
            except PermissionError:
                return self._unrecorded(
                    rel, stat.S_IMODE(st.st_mode), st.st_size, Unrecorded.UNREADABLE
                )
            except OSError as exc:  # ELOOP: it became a symlink; treat as changed
                self.report.warnings.append(f"{rel}: {exc.strerror}; skipped")
                return None
            try:
                before = os.fstat(fd)
                if not stat.S_ISREG(before.st_mode):
                    return None
                digest = self.writer.put_file(fd, before.st_size)
                after = os.fstat(fd)
            finally:
                os.close(fd)
            self.report.files_read += 1
            self.report.bytes_read += before.st_size
            perm = stat.S_IMODE(before.st_mode)
            if (before.st_size, before.st_mtime_ns, before.st_ctime_ns) == (
                after.st_size,
                after.st_mtime_ns,
                after.st_ctime_ns,
            ):
                return self._file_key(before, perm, digest)
            st = after
        self.report.warnings.append(f"{rel}: kept changing while being read; recorded, not cached")
        return (_FILE, perm, after.st_size, SMUDGED, 0, 0, digest, 0)

    def _file_key(self, st: os.stat_result, perm: int, digest: Digest) -> EntryKey:
        mtime = st.st_mtime_ns
        if mtime >= self.trust_before_ns or st.st_ctime_ns >= self.trust_before_ns:
            mtime = SMUDGED  # racy: hash again next time
        return (_FILE, perm, st.st_size, mtime, st.st_ctime_ns, st.st_ino, digest, 0)

    def _symlink(self, path: str, rel: str, st: os.stat_result, perm: int) -> EntryKey | None:
        try:
            target = os.readlink(os.fsencode(path))
        except FileNotFoundError:
            return None
        except OSError as exc:
            self.report.warnings.append(f"{rel}: {exc.strerror}; skipped")
            return None
        digest = blob_digest(target)
        if not self.writer.has(digest):
            self.writer.put_blob(target)
        return (_SYMLINK, perm, len(target), 0, 0, 0, digest, 0)

    def _unrecorded(self, rel: str, perm: int, size: int, why: Unrecorded) -> EntryKey:
        self.report.unrecorded.append((rel, why))
        return (_UNRECORDED, perm, size, 0, 0, 0, None, int(why))


def _same_index(record: DirRecord, rules: IgnoreRules) -> bool:
    """Whether the index a record depended on (if any) is the one on disk now."""
    return not record.index_tag or record.index_tag == rules.index_identity()[0]


def entry_from_key(name: bytes, key: EntryKey) -> TreeEntry:
    kind = Kind(key[0])
    if kind is Kind.UNRECORDED:
        return TreeEntry(name, kind, key[1], key[2], None, Unrecorded(key[7]))
    assert key[6] is not None
    return TreeEntry(name, kind, key[1], key[2], Digest(key[6]))


def touch_marker(marker: Path) -> int:
    """Write the marker file and return its mtime: the scan's own time stamp.

    The file system's clock, not ``time.time()``: it is the clock file mtimes
    are compared against.
    """
    marker.parent.mkdir(parents=True, exist_ok=True)
    with open(marker, "wb") as handle:
        handle.write(str(time.time_ns()).encode())
    return os.stat(marker).st_mtime_ns
