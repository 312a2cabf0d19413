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
import stat
from pathlib import Path

from .digest import Digest, blob_digest
from .entrykey import (
    FLAG_BUILD,
    FLAG_DIR_KEPT,
    FLAG_DIR_LISTED,
    FLAG_DIR_NORMAL,
    FLAG_DIR_SPARSE,
    FLAG_IGNORED,
    FLAG_ON_DIR,
    K_DIR,
    K_FILE,
    K_SYMLINK,
    K_UNRECORDED,
    V_GIT,
    V_GIT_TRACKED,
    V_NOT,
    V_OWN,
    V_TRACKED,
    entry_from_key,
    is_dir_key,
    unrecorded_key,
    verdict_of,
)
from .ignore import BY_EARSHOT, KEPT, LISTED, NOT_IGNORED, SPARSE, IgnoreRules
from .keep import (
    MAGIC_BYTES,
    MAX_LISTED,
    Budget,
    Lift,
    OverBudget,
    OverListed,
    is_build_output,
    is_cache,
    measure,
    within_budget,
)
from .mounts import MountTable
from .objects import ObjectWriter
from .progress import QUIET, Progress
from .recording import (
    MAX_DEPTH,
    ScanOptions,
    ScanReport,
    is_temp_name,
    touch_marker,
)
from .statcache import SMUDGED, DirRecord, EntryKey, StoredPaths, load_record, store_record
from .tree import Unrecorded

#: The names whose presence in a listing changes the ignore rules below it
#: (``.git``: a nested repository, judged by its own rules and index).
IGNORE_FILES = (".gitignore", ".earshotignore", ".git")
#: Stored for a directory that depended on a git index too recently written
#: to trust its stat: it never matches, so the next scan judges again.
RACY_INDEX = b"racy"
_S_IFREG = stat.S_IFREG
_OPEN_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_RETRIES = 3


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
        progress: Progress = QUIET,
        use_cache: bool = True,
    ) -> None:
        self.root = str(root)
        self.writer = writer
        self.options = options or ScanOptions()
        self.progress = progress
        self.use_cache = use_cache
        #: What a stat-cache record's verdicts also depend on besides the rules:
        #: the limits (a record taken under other limits is not trusted).
        #: (The NUL: no limits' text ends another's, so ``endswith`` is exact.)
        limits = f"{self.options.max_file_size}:{self.options.keep.describe()}"
        self._limits = f"\0limits={limits}".encode()
        self.report = ScanReport()
        self.trust_before_ns = 0
        #: Root-relative paths recorded whatever the size limit: what an
        #: agent's write or edit names, so undo can bring back what it replaced.
        self.unlimited: frozenset[str] = frozenset()
        #: The budget of the ignored directory being kept, while its walk runs.
        self._budget: Budget | None = None
        #: Entries a listed directory may still list, while its walk runs.
        self._listing: int | None = None
        #: Paths recorded past the limits (for ignored files and the size
        #: limit), with what is below them, within ``lift``: what a
        #: destructive command is about to delete. Caches, build output and
        #: what .earshotignore excludes stay existence only.
        self.lifted: frozenset[str] = frozenset()
        self.lift: Lift | None = None
        self._lifting = False
        self._paid = False  # walking a lifted cache directory, its lift taken whole
        self._seen = 0
        self._bytes_shown = 0
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

        ``parent_rules``: the rules of the directory holding it (the root's
        own for the root), or, below an ignored directory, the rules of that
        mode (``IgnoreRules.below_ignored``), which are its own already.

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
            if self._fingerprint(rules) == record.fingerprint and _same_index(record, rules):
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
        if record is not None and not record.fingerprint.endswith(self._limits):
            # Taken under other limits: a file's content still holds, but not
            # a verdict on what to keep (a directory's, an unrecorded entry's).
            old = {n: k for n, k in old.items() if k[0] not in (K_DIR, K_UNRECORDED)}
        # With unchanged rules (and index), a name the cache holds with the same
        # kind keeps its verdict: only new names pay for pattern matching.
        same_rules = (
            record is not None
            and record.fingerprint == self._fingerprint(rules)
            and _same_index(record, rules)
        )
        # Whether a name here was ignored, so that the index decided: then the
        # record holds only while the index is the same.
        judged = same_rules and bool(record.index_tag) if record is not None else False
        new: dict[str, EntryKey] = {}
        exclude = self.options.exclude_dirs
        for dirent in dirents:
            name = dirent.name
            if name == ".git" or is_temp_name(name):
                continue
            cached = old.get(name)
            try:
                is_dir = dirent.is_dir(follow_symlinks=False)
                if is_dir and dirent.path in exclude:
                    continue
                if same_rules and cached is not None and is_dir_key(cached) == is_dir:
                    verdict = verdict_of(cached)
                else:
                    verdict = self.judge(rules, join(rel, name), is_dir)
                judged |= verdict != V_NOT or rules.mode is not None
                st = dirent.stat(follow_symlinks=False)
            except FileNotFoundError:
                continue  # vanished mid-scan: it is simply not there
            key = self._visit(dirent.path, rel, name, st, cached, rules, verdict)
            if key is not None:
                new[name] = key
        index_tag = self._index_tag(rules) if judged else b""
        return self._finish_dir(
            rel, rules, record, new, dir_mtime, ignore_files, len(dirents), index_tag
        )

    def judge(self, rules: IgnoreRules, rel: str, is_dir: bool) -> int:
        """A name's verdict (``V_NOT``, ``V_GIT``, ``V_OWN``, ``V_GIT_TRACKED``, ``V_TRACKED``).

        git applies no pattern to a path in its index: a tracked file is
        recorded whatever the rules say, and an ignored directory holding
        tracked paths is entered for them.
        """
        verdict = rules.verdict(rel, is_dir)
        if verdict == NOT_IGNORED:
            return V_NOT
        if rules.tracks(rel, is_dir):
            return V_GIT_TRACKED if is_dir else V_TRACKED
        return V_OWN if verdict == BY_EARSHOT else V_GIT

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
        for name, cached in record.entries.items():
            full = f"{path}/{name}"
            try:
                st = lstat(full)
            except FileNotFoundError:
                return None  # the listing changed after all: read it
            key = self._visit(full, rel, name, st, cached, rules, verdict_of(cached))
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
        verdict: int,
    ) -> EntryKey | None:
        # The hot path, inlined: a regular file the stat cache vouches for.
        if (
            cached is not None
            and cached[0] == K_FILE
            and cached[3] == st.st_mtime_ns
            and cached[2] == st.st_size
            and cached[4] == st.st_ctime_ns
            and cached[5] == st.st_ino
            and st.st_mode == _S_IFREG | cached[1]
            and cached[7] == (verdict == V_GIT)
            and self._listing is None  # a listed directory keeps no content
        ):
            # No size check: a file over the limit is cached as a file only
            # when it was recorded past it (an agent's write named it), and
            # while it is unchanged it stays held.
            self.report.files += 1
            self.report.content_bytes += st.st_size
            if st.st_nlink > 1:
                self.report.linked.append(join(rel, name))
            if self._budget is not None:
                self._budget.take(st.st_size)
            return cached
        return self._entry(full, join(rel, name), st, cached, rules, verdict)

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
        if self._listing is not None:
            self._listing -= seen
            if self._listing < 0:
                raise OverListed()
        self.progress.advance(seen, self.report.bytes_read - self._bytes_shown)
        self._bytes_shown = self.report.bytes_read
        fingerprint = self._fingerprint(rules)
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

    def _fingerprint(self, rules: IgnoreRules) -> bytes:
        return rules.fingerprint + self._limits

    def _entry(
        self,
        path: str,
        rel: str,
        st: os.stat_result,
        cached: EntryKey | None,
        rules: IgnoreRules,
        verdict: int = V_NOT,
    ) -> EntryKey | None:
        """The cache key of one entry, read or judged as its verdict says.

        ``rules``: those of the directory holding it. What ``.earshotignore``
        excludes, and what git's rules ignore beyond the limits of
        ``ScanOptions.keep``, is kept as existence only (its identity, never
        its content); a path an agent's write names (``unlimited``) is
        recorded whatever the rules say.
        """
        mode = st.st_mode
        perm = stat.S_IMODE(mode)
        if verdict == V_OWN and rel not in self.unlimited:
            return self._existence(rel, st, Unrecorded.EXCLUDED)
        if self.lift is not None and (self._lifting or rel in self.lifted):
            lifted = self._lifted(path, rel, st, rules, verdict)
            if lifted is not None:
                return lifted
        if st.st_nlink > 1 and stat.S_ISREG(mode):
            self.report.linked.append(rel)
        if stat.S_ISDIR(mode):
            if rel.count("/") >= MAX_DEPTH - 1:
                self.report.warnings.append(
                    f"{rel[:60]}...: more than {MAX_DEPTH} levels deep, not recorded"
                )
                return self._unrecorded(rel, st, 0, Unrecorded.TOO_DEEP)
            outer = self._dev
            if st.st_dev != outer:
                special = self.mounts.special_type(path)
                if special is not None:
                    # Kept in the tree as unrecorded: a restore never writes into it.
                    self.report.skipped.append((rel, f"special file system ({special})"))
                    return unrecorded_key(st, 0, Unrecorded.SPECIAL)
            ignored = verdict in (V_GIT, V_GIT_TRACKED) or rules.mode is not None
            if ignored and rel not in self.unlimited:
                return self._ignored_dir(path, rel, st, cached, rules, verdict)
            # Not ignored, or named by an agent's write or an undo: walked, and
            # what is named below it recorded whatever the rules say.
            return self._dir(path, rel, st, rules, FLAG_DIR_NORMAL)
        kept = verdict == V_GIT
        if kept and rel not in self.unlimited:
            # An ignored file or link, not tracked: its content is kept only
            # within the limits, and never in sparse mode.
            keep = self.options.keep
            size = st.st_size if stat.S_ISREG(mode) else 0
            if not keep.enabled or rules.mode in (SPARSE, LISTED) or size > keep.max_file:
                if self._budget is not None:
                    self._budget.take(0)
                return self._existence(rel, st, Unrecorded.IGNORED)
            if self._budget is not None:
                self._budget.take(size)
        if stat.S_ISLNK(mode):
            return self._symlink(path, rel, st, perm, kept)
        if not stat.S_ISREG(mode):
            self.report.warnings.append(
                f"{rel}: special file (socket, fifo or device), not recorded"
            )
            return self._unrecorded(rel, st, 0, Unrecorded.SPECIAL)
        if (
            kept
            and cached is not None
            and cached[7] == FLAG_BUILD
            and cached[0] == K_UNRECORDED
            and cached[2:6] == (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)
        ):
            self.report.existence_only += 1
            return cached  # the same build output as last time: not read again
        self.report.files += 1
        self.report.content_bytes += st.st_size
        if st.st_size > self.options.max_file_size and rel not in self.unlimited:
            return self._unrecorded(rel, st, st.st_size, Unrecorded.TOO_LARGE)
        flag = FLAG_IGNORED if kept else 0
        if (
            cached is not None
            and cached[0] == K_FILE
            and cached[1] == perm
            and cached[2] == st.st_size
            and cached[3] == st.st_mtime_ns
            and cached[4] == st.st_ctime_ns
            and cached[5] == st.st_ino
            and cached[7] == flag
        ):
            return cached
        return self._hash_file(path, rel, st, flag)

    def _lifted(
        self, path: str, rel: str, st: os.stat_result, rules: IgnoreRules, verdict: int
    ) -> EntryKey | None:
        """An entry under a destructive command's target, recorded past the limits while
        the lift lasts; None: judged as any other (a special file, no lift left).

        Regenerable output comes from the lift's smaller budget for it: an
        ignored build output file by file, a cache directory whole or not at
        all (half a ``node_modules`` brought back is worth less than none)."""
        assert self.lift is not None
        mode = st.st_mode
        ignored = verdict in (V_GIT, V_GIT_TRACKED) or rules.mode is not None
        if stat.S_ISDIR(mode):
            paid = self._paid
            if not paid and ignored and is_cache(path, path.rpartition("/")[2]):
                lift = self.lift
                whole = measure(path, lift.regenerable_files, lift.regenerable_bytes)
                if whole is None or not lift.take(whole[1], regenerable=True, files=whole[0]):
                    return None
                paid = True
            inner = rules.below_ignored(KEPT) if ignored else rules
            lifting, budget, was_paid = self._lifting, self._budget, self._paid
            self._lifting, self._budget, self._paid = True, None, paid
            try:
                return self._dir(path, rel, st, inner, FLAG_DIR_KEPT if ignored else 0)
            finally:
                self._lifting, self._budget, self._paid = lifting, budget, was_paid
        if not stat.S_ISREG(mode):
            return None
        if not ignored and st.st_size <= self.options.max_file_size:
            return None  # recorded anyway, outside the lift
        if not self._paid:  # else its directory's lift is taken: no question left
            build = ignored and _build_output(path)
            if not self.lift.take(st.st_size, regenerable=build):
                # No lift left: what the limits do not hold stays existence only.
                why = Unrecorded.TOO_LARGE
                if ignored:
                    why = Unrecorded.BUILD if build else Unrecorded.IGNORED
                return self._existence(rel, st, why)
        self.report.files += 1
        self.report.content_bytes += st.st_size
        flag = FLAG_IGNORED if verdict == V_GIT else 0
        return self._hash_file(path, rel, st, flag, judged=True)

    def _dir(
        self, path: str, rel: str, st: os.stat_result, inner: IgnoreRules, flag: int
    ) -> EntryKey | None:
        """A directory recorded with its content, its entries judged by ``inner``."""
        perm = stat.S_IMODE(st.st_mode)
        outer = self._dev
        self._dev = st.st_dev
        try:
            digest = self.scan_dir(path, rel, inner, dir_mtime=st.st_mtime_ns)
        except PermissionError:
            return self._unrecorded(rel, st, 0, Unrecorded.UNREADABLE)
        except (FileNotFoundError, NotADirectoryError):
            return None
        finally:
            self._dev = outer
        return (K_DIR, perm, 0, 0, 0, 0, digest, flag)

    def _ignored_dir(
        self,
        path: str,
        rel: str,
        st: os.stat_result,
        cached: EntryKey | None,
        rules: IgnoreRules,
        verdict: int,
    ) -> EntryKey | None:
        """An ignored directory (or one below an ignored one): kept, listed, or one entry.

        A cache is one entry, never walked (what git tracks in one is walked
        *sparse*, for it). Another is *kept* (its content) when it fits the
        budget (``keep.within_budget``, by names and sizes, unless it was
        kept last time; then its walk takes from the budget and gives up
        past it); else *listed*: every entry as existence only, with its
        identity, so what is deleted or moved in it is seen. A listed one is
        measured again only when its own listing changed; one with more
        entries than ``MAX_LISTED`` is one entry (while its identity stays).
        """
        keep = self.options.keep
        tracked = verdict == V_GIT_TRACKED
        cache = is_cache(path, path.rpartition("/")[2])
        if rules.mode == SPARSE or cache:
            if tracked:
                return self._dir(path, rel, st, rules.below_ignored(SPARSE), FLAG_DIR_SPARSE)
            return self._existence(rel, st, Unrecorded.CACHE if cache else Unrecorded.IGNORED)
        if rules.mode == KEPT:  # inside a kept directory: its budget goes on
            return self._dir(path, rel, st, rules.below_ignored(KEPT), FLAG_DIR_KEPT)
        if rules.mode == LISTED:  # inside a listed one: listed too
            return self._dir(path, rel, st, rules.below_ignored(LISTED), FLAG_DIR_LISTED)
        same = cached is not None and cached[3] == st.st_mtime_ns and cached[5] == st.st_ino
        if keep.enabled:
            was_kept = cached is not None and cached[0] == K_DIR and cached[7] == FLAG_DIR_KEPT
            listed_as_before = same and cached is not None and cached[7] == FLAG_DIR_LISTED
            # Measured only when it was not found over the budget with this listing.
            measure = not listed_as_before and not self._one_entry(cached, st)
            if was_kept or (measure and within_budget(path, keep)):
                self._budget = Budget(keep)
                try:
                    return self._dir(path, rel, st, rules.below_ignored(KEPT), FLAG_DIR_KEPT)
                except OverBudget:
                    pass  # listed, below
                finally:
                    self._budget = None
        if self._one_entry(cached, st):
            return self._over_listed(path, rel, st, rules, tracked)
        self._listing = MAX_LISTED
        try:
            key = self._dir(path, rel, st, rules.below_ignored(LISTED), FLAG_DIR_LISTED)
        except OverListed:
            return self._over_listed(path, rel, st, rules, tracked)
        finally:
            self._listing = None
        if key is None or key[0] != K_DIR:
            return key
        # Its mtime, kept in the key: a listing unchanged since is not measured again.
        return (K_DIR, key[1], 0, st.st_mtime_ns, 0, st.st_ino, key[6], FLAG_DIR_LISTED)

    @staticmethod
    def _one_entry(cached: EntryKey | None, st: os.stat_result) -> bool:
        """Whether a directory was one entry last time (too many to list), and is the same."""
        return (
            cached is not None
            and cached[0] == K_UNRECORDED
            and cached[7] & ~FLAG_ON_DIR == Unrecorded.IGNORED
            and cached[3] == st.st_mtime_ns
            and cached[5] == st.st_ino
        )

    def _over_listed(
        self, path: str, rel: str, st: os.stat_result, rules: IgnoreRules, tracked: bool
    ) -> EntryKey | None:
        if tracked:
            return self._dir(path, rel, st, rules.below_ignored(SPARSE), FLAG_DIR_SPARSE)
        return self._existence(rel, st, Unrecorded.IGNORED)

    def _hash_file(
        self, path: str, rel: str, st: os.stat_result, flag: int = 0, judged: bool = False
    ) -> EntryKey | None:
        """The key of a regular file, its content read into the store; an ignored
        one (``flag``) that is build output is existence only, unless ``judged``
        already (a destructive command's target, read before it goes)."""
        for _attempt in range(_RETRIES):
            try:
                fd = os.open(path, _OPEN_FLAGS)
            except FileNotFoundError:
                return None
            except PermissionError:
                return self._unrecorded(rel, st, st.st_size, Unrecorded.UNREADABLE)
            except OSError as exc:  # ELOOP: it became a symlink; treat as changed
                self.report.warnings.append(f"{rel}: {exc.strerror}; skipped")
                return None
            try:
                before = os.fstat(fd)
                if not stat.S_ISREG(before.st_mode):
                    return None
                if (
                    flag == FLAG_IGNORED
                    and not judged
                    and is_build_output(path.rpartition("/")[2], os.pread(fd, MAGIC_BYTES, 0))
                ):
                    self.report.files -= 1  # counted as a file before it was looked at
                    self.report.content_bytes -= st.st_size
                    return self._existence(rel, before, Unrecorded.BUILD)
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
                return self._file_key(before, perm, digest, flag)
            st = after
        self.report.warnings.append(f"{rel}: kept changing while being read; recorded, not cached")
        return (K_FILE, perm, after.st_size, SMUDGED, 0, 0, digest, flag)

    def _file_key(self, st: os.stat_result, perm: int, digest: Digest, flag: int) -> EntryKey:
        mtime = st.st_mtime_ns
        if mtime >= self.trust_before_ns or st.st_ctime_ns >= self.trust_before_ns:
            mtime = SMUDGED  # racy: hash again next time
        return (K_FILE, perm, st.st_size, mtime, st.st_ctime_ns, st.st_ino, digest, flag)

    def _symlink(
        self, path: str, rel: str, st: os.stat_result, perm: int, kept: bool = False
    ) -> EntryKey | None:
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
        return (K_SYMLINK, perm, len(target), 0, 0, 0, digest, FLAG_IGNORED if kept else 0)

    def _unrecorded(self, rel: str, st: os.stat_result, size: int, why: Unrecorded) -> EntryKey:
        self.report.unrecorded.append((rel, why))
        return unrecorded_key(st, size, why)

    def _existence(self, rel: str, st: os.stat_result, why: Unrecorded) -> EntryKey:
        """An ignored entry kept as existence only: its identity, never its content."""
        self.report.existence_only += 1
        size = st.st_size if stat.S_ISREG(st.st_mode) else 0
        return unrecorded_key(st, size, why)


def _same_index(record: DirRecord, rules: IgnoreRules) -> bool:
    """Whether the index a record depended on (if any) is the one on disk now."""
    return not record.index_tag or record.index_tag == rules.index_identity()[0]


def _build_output(path: str) -> bool:
    """Whether the file at ``path`` is compiled output, by its name or first bytes."""
    name = path.rpartition("/")[2]
    if is_build_output(name, b""):
        return True
    try:
        fd = os.open(path, _OPEN_FLAGS)
    except OSError:
        return False
    try:
        return is_build_output(name, os.pread(fd, MAGIC_BYTES, 0))
    except OSError:
        return False
    finally:
        os.close(fd)
