"""Ignore rules with git's semantics (gitignore(5)), for the worktree scanner.

An :class:`IgnoreRules` holds the chain of patterns that apply inside one directory:
``.git/info/exclude`` first (lowest priority), then for each level from the root
down, that level's ``.gitignore`` and then its ``.earshotignore``. The last pattern
in the chain that matches an entry decides whether it is ignored, so a deeper file
overrides a shallower one and ``.earshotignore`` overrides ``.gitignore`` beside it.

git applies no pattern to a path in its index: the rules also carry the
index of the work tree they belong to (:meth:`IgnoreRules.excludes` = ignored
and not tracked). The scanner descends into an ignored directory only for the
tracked paths in it, with rules that ignore everything else
(:meth:`IgnoreRules.below_ignored`: git cannot re-include a file whose parent
directory is excluded). A nested repository (a directory holding ``.git``)
starts its own chain: its ``info/exclude``, its ignore files, its index; only
``.earshotignore`` patterns reach into it. Matching is on bytes, as in git. A ``.gitignore`` that
is a symlink is not followed (git >= 2.32). Left out on purpose:
``core.excludesFile`` (per user: snapshots would depend on who took them),
``core.ignoreCase``, POSIX classes such as ``[[:digit:]]``, a ``[...]`` holding a
``/``, and git's quirk that ``/a**`` matches ``a/b`` (its ``**`` counts as a whole
segment once the literal prefix is cut). ``.git`` itself is the scanner's to skip.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Callable, Collection, Iterable
from typing import Final, NamedTuple

import blake3

from .gitindex import NO_INDEX, GitIndex, PathsCache
from .gitrepo import GIT, GitRepo, enclosing_repo, repo_at

#: The ignore files of one level, in ascending priority.
LEVEL_FILES: Final = (".gitignore", ".earshotignore")
# git also drops ignore files above 100 MiB rather than load them.
_MAX_SIZE: Final = 100 * 1024 * 1024
# Bumped whenever matching changes, so fingerprints taken by older code go stale.
_SALT: Final = b"earshot.ignore/3"

#: What :meth:`IgnoreRules.verdict` answers: not ignored, ignored by git's rules
#: (``.gitignore``, ``info/exclude``), or by an ``.earshotignore`` pattern.
NOT_IGNORED: Final = 0
BY_GIT: Final = 1
BY_EARSHOT: Final = 2

#: How a scan treats the entries of a directory below an ignored one (see
#: :meth:`IgnoreRules.below_ignored`): kept within the budget for ignored
#: files; listed (every entry as existence only, a directory over the
#: budget); or sparse (in a cache: only the paths git tracks).
KEPT: Final = "kept"
LISTED: Final = "listed"
SPARSE: Final = "sparse"

_ESCAPE: Final = re.compile(r"\\(.)", re.DOTALL)
_STAR: Final = "[^/]*"  # a "*" as pathspec translates it
_Match = Callable[[str], "re.Match[str] | None"]


class _Pattern(NamedTuple):
    regex: str
    negated: bool
    dir_only: bool
    on_name: bool  # matched against the entry's name, else its root-relative path
    own: bool = False  # from an .earshotignore: it also reaches into nested repositories


def _glob(segment: str) -> str:
    # pathspec's wildmatch for one path segment: *, ?, [...], backslash escapes.
    # An unclosed "[" raises: in git it makes the whole pattern match nothing.
    from pathspec.patterns.gitignore.basic import GitIgnoreBasicPattern

    return GitIgnoreBasicPattern._translate_segment_glob(segment, "raise")


def _trim(line: str) -> str:
    """Drop trailing spaces that no backslash escapes, as git's trim_trailing_spaces."""
    kept = line.rstrip(" ")
    if len(kept) < len(line) and (len(kept) - len(kept.rstrip("\\"))) % 2:
        kept += " "  # an odd run of backslashes escapes the first space
    return kept


def _compile(line: str, prefix: str, own: bool = False) -> _Pattern | None:
    """One gitignore line as a regex; None for blanks, comments and invalid patterns."""
    if line.endswith("\r"):
        line = line[:-1]  # git reads CRLF files too
    if not line or line.startswith("#"):
        return None
    line = _trim(line)
    negated = line.startswith("!")
    if negated:
        line = line[1:]
    dir_only = line.endswith("/")
    if dir_only:
        line = line[:-1]
    body = line[1:] if line.startswith("/") else line
    if "\\/" in body:  # git reads an escaped "/" as a separator
        body = _ESCAPE.sub(lambda m: "/" if m[1] == "/" else m[0], body)
    segments = body.split("/")
    # "**/**" means what one "**" means.
    segments = [s for i, s in enumerate(segments) if s != "**" or segments[i - 1 : i] != ["**"]]
    if len(segments) == 2 and segments[0] == "**" and segments[1]:
        line = segments.pop()  # "**/name" is just "name", and matching a name is cheaper
    try:
        if not line:
            return None  # "", "!" and "/" match nothing in git either
        if "/" not in line:
            regex = _glob(line)
            on_name = True
        else:
            parts = [re.escape(prefix)]
            for i, seg in enumerate(segments):
                last = i == len(segments) - 1
                if seg != "**":
                    parts.append(_glob(seg) if last else _glob(seg) + "/")
                else:
                    parts.append(".*" if last else "(?:.*/)?")
            regex = "".join(parts)
            on_name = False
    except (ValueError, re.error):
        return None  # a dangling "\", an unclosed "[": git matches nothing
    # A regex that does not compile (a bad range, say) is dropped when its
    # level is compiled (``_Level``): compiling each pattern alone here too
    # cost as much again.
    return _Pattern(regex, negated, dir_only, on_name, own)


def _valid(pattern: _Pattern) -> bool:
    try:
        re.compile(pattern.regex)
    except re.error:
        return False
    return True


def _bytewise(name: str) -> str:
    """A name as one char per byte: git's wildmatch works on bytes ("?" on "é" fails)."""
    if name.isascii():
        return name
    try:
        raw = os.fsencode(name)
    except UnicodeEncodeError:  # a lone surrogate that did not come from os
        raw = name.encode("utf-8", "surrogatepass")
    return raw.decode("latin-1")


def _parse(data: bytes, prefix: str, own: bool = False) -> list[_Pattern]:
    # Patterns stay bytes, as latin-1 chars (see _bytewise); git skips a UTF-8 BOM.
    text = data.removeprefix(b"\xef\xbb\xbf").decode("latin-1")
    return [p for line in text.split("\n") if (p := _compile(line, prefix, own)) is not None]


def _read(path: str, follow: bool) -> bytes | None:
    """The file's bytes; None if there is no regular file, b"" if it cannot be read."""
    try:
        st = os.stat(path) if follow else os.lstat(path)
    except OSError:
        return None
    if not stat.S_ISREG(st.st_mode):
        return None
    if st.st_size > _MAX_SIZE:
        return b""
    try:
        with open(path, "rb") as f:
            return f.read(_MAX_SIZE)
    except OSError:
        return b""


def _frame(data: bytes) -> bytes:
    return len(data).to_bytes(8, "little") + data


class _Alternation:
    """Some patterns as two regexes: "does any match?" and "which one decides?"."""

    __slots__ = ("check", "decide", "ranks")

    def __init__(self, ranked: list[tuple[int, _Pattern]]) -> None:
        # The check has no groups, which lets re skip a branch on its first char,
        # and matches all the "*..." patterns with one leading star.
        starred = [p.regex[len(_STAR) :] for _, p in ranked if p.regex.startswith(_STAR)]
        rest = [f"(?:{p.regex})" for _, p in ranked if not p.regex.startswith(_STAR)]
        if starred:
            rest.append(f"{_STAR}(?:{'|'.join(starred)})")
        self.check: _Match = re.compile("|".join(rest), re.DOTALL).fullmatch
        # Highest rank first, one group each: fullmatch takes the first alternative
        # that matches, which is the deciding pattern, and lastindex names it.
        ranked = sorted(ranked, reverse=True)
        self.decide: _Match = re.compile(
            "|".join(f"({p.regex})" for _, p in ranked), re.DOTALL
        ).fullmatch
        self.ranks = (0, *(r for r, _ in ranked))

    def rank(self, text: str) -> int:
        m = self.decide(text)
        return 0 if m is None else self.ranks[m.lastindex or 0]


def _never(text: str) -> int:
    return 0


# (name check, name rank, path check, path rank); see _Level.rank.
_Kind = tuple[_Match | None, Callable[[str], int], _Match | None, Callable[[str], int]]


class _Level:
    """The patterns of one level (one directory's ignore files, or an exclude file),
    shared by the rules of every directory below it, and compiled on first use:
    a scan the stat cache vouches for matches no name at all."""

    __slots__ = ("_kinds", "_own", "_patterns", "_prefix", "_present")

    def __init__(
        self,
        prefix: str,
        present: tuple[tuple[str, bytes], ...],
        patterns: tuple[_Pattern, ...] | None = None,
    ) -> None:
        self._prefix = prefix
        self._present = present
        self._patterns = patterns
        self._kinds: tuple[_Kind, _Kind] | None = None
        self._own: _Level | bool | None = False  # False: not built yet

    @property
    def patterns(self) -> tuple[_Pattern, ...]:
        """The level's patterns, parsed on first use (parsing imports pathspec: ~12 ms)."""
        if self._patterns is None:
            self._patterns = tuple(
                pattern
                for name, data in self._present
                for pattern in _parse(data, self._prefix, own=name == ".earshotignore")
            )
        return self._patterns

    def _compiled(self) -> tuple[_Kind, _Kind]:
        if self._kinds is None:
            try:
                self._kinds = _compile_level(self.patterns)
            except re.error:  # a pattern git matches nothing with (a bad range): dropped
                # (from the patterns too: a rank names a pattern by its position)
                self._patterns = tuple(p for p in self.patterns if _valid(p))
                self._kinds = _compile_level(self._patterns)
        return self._kinds

    def own(self) -> _Level | None:
        """This level's ``.earshotignore`` patterns alone (None: it has none)."""
        if self._own is False:
            own = tuple(p for p in self.patterns if p.own)
            self._own = _Level(self._prefix, (), own) if own else None
        assert self._own is not True
        return self._own

    def pattern(self, rank: int) -> _Pattern:
        """The pattern a rank (from :meth:`rank`) names."""
        return self.patterns[rank // 2 - 1]

    def rank(self, rel_path: str, name: str, is_dir: bool) -> int:
        """The rank of the last pattern of this level that matches (0: none does)."""
        name_check, name_rank, path_check, path_rank = (self._kinds or self._compiled())[is_dir]
        rank = 0
        if name_check is not None and name_check(name) is not None:
            rank = name_rank(name)
        if path_check is not None and path_check(rel_path) is not None:
            rank = max(rank, path_rank(rel_path))
        return rank


def _compile_level(patterns: tuple[_Pattern, ...]) -> tuple[_Kind, _Kind]:
    # A pattern's rank is 2 * (its position + 1), plus 1 if it ignores: the
    # highest rank that matches decides, and rank & 1 is the verdict.
    ranked = [(2 * i + 2 + (not p.negated), p) for i, p in enumerate(patterns)]
    kinds: list[_Kind] = []
    for is_dir in (False, True):
        usable = [(r, p) for r, p in ranked if is_dir or not p.dir_only]
        by_name = [(r, p) for r, p in usable if p.on_name]
        by_path = [(r, p) for r, p in usable if not p.on_name]
        names = _Alternation(by_name) if by_name else None
        paths = _Alternation(by_path) if by_path else None
        kinds.append(
            (
                names.check if names else None,
                names.rank if names else _never,
                paths.check if paths else None,
                paths.rank if paths else _never,
            )
        )
    return kinds[0], kinds[1]


#: Compiled levels by (directory prefix, ignore files' bytes): a directory's
#: rules are built again by every scan and restage of a process, and compiling
#: them (not matching) was nine tenths of a no-change snapshot of a tree with
#: hundreds of .gitignore files.
_LEVELS: dict[tuple[str, tuple[tuple[str, bytes], ...]], _Level] = {}
_LEVELS_KEPT = 4096


def _level(prefix: str, present: tuple[tuple[str, bytes], ...]) -> _Level | None:
    """The compiled level of ignore files ``present`` in the directory ``prefix``."""
    if not any(data.strip() for _, data in present):
        return None
    key = (prefix, present)
    level = _LEVELS.get(key)
    if level is None:
        if len(_LEVELS) >= _LEVELS_KEPT:
            _LEVELS.clear()  # a bound, not an LRU
        level = _LEVELS[key] = _Level(prefix, present)
    return level


class IgnoreRules:
    """Immutable: the ignore patterns that apply inside one directory of the root.

    Also the git index of the work tree that directory belongs to (``index``):
    git applies no pattern to a path in its index, so neither does
    :meth:`excludes`. The patterns are kept as levels, shallowest first: the
    deepest level with a matching pattern decides, and in it the last one.
    """

    __slots__ = ("_below", "_everything", "_fingerprint", "_levels", "index", "mode")

    def __init__(
        self,
        levels: tuple[_Level, ...],
        fingerprint: bytes,
        index: GitIndex | None = None,
        everything: bool = False,
        mode: str | None = None,
    ) -> None:
        self._levels = levels
        self._fingerprint = fingerprint
        self.index = index
        self._everything = everything
        #: None: a directory judged by its patterns; ``KEPT`` or ``SPARSE``:
        #: one below an ignored directory, where everything is ignored.
        self.mode = mode
        self._below: dict[str, IgnoreRules] = {}

    @classmethod
    def for_root(
        cls, root: str, cache: PathsCache | None = None, live: bool = False
    ) -> IgnoreRules:
        """The root's rules: .git/info/exclude, .gitignore, .earshotignore, and its index.

        The index is that of the work tree holding the root, which may be the
        root or a parent of it (then only the paths below the root count);
        ``cache`` keeps what is read of it, and of nested repositories' indexes.
        ``live``: rules kept for long (a watcher's) follow index changes.
        """
        repo = enclosing_repo(root)
        sources: list[tuple[str, bytes | None]] = []
        inside = ""
        if repo is not None:
            inside = "" if repo.top == root else os.path.relpath(root, repo.top)
            if not inside:  # the exclude file's patterns are relative to the top
                sources.append(("info/exclude", _read(repo.exclude_path, follow=True)))
        index = GitIndex(repo, inside=inside.replace(os.sep, "/"), cache=cache, live=live)
        base = cls((), blake3.blake3(_SALT).digest(), index)
        sources += [(n, _read(os.path.join(root, n), follow=False)) for n in LEVEL_FILES]
        return base._extend("", sources)

    @classmethod
    def for_recorded_root(
        cls, root: str | None, sources: Iterable[tuple[str, bytes | None]]
    ) -> IgnoreRules:
        """The rules of a recorded root: its ignore files' bytes as recorded.

        ``.git`` is never recorded, so ``root`` (when given) is where its
        ``info/exclude`` is read, as it is on disk now, and its index: a path
        git tracks is not ignored (:meth:`excludes`), as a scan judged it.
        """
        exclude: list[tuple[str, bytes | None]] = []
        repo = enclosing_repo(root) if root is not None else None
        index = None
        if repo is not None and root is not None:
            inside = "" if repo.top == root else os.path.relpath(root, repo.top)
            index = GitIndex(repo, inside=inside.replace(os.sep, "/"))
            if not inside:
                exclude.append(("info/exclude", _read(repo.exclude_path, follow=True)))
        base = cls((), blake3.blake3(_SALT).digest(), index)
        return base._extend("", [*exclude, *sources])

    @classmethod
    def for_path(cls, root: str, rel_path: str) -> IgnoreRules:
        """The rules for the directory holding rel_path, reading only its ancestors.

        An ancestor the rules ignore gives rules that ignore everything below
        it (only what the index tracks is kept), as a scan would.
        """
        rules = cls.for_root(root)
        parts = rel_path.strip("/").split("/")[:-1]
        for i in range(1, len(parts) + 1):
            rel = "/".join(parts[:i])
            if rules.is_ignored(rel, True):
                rules = rules.below_ignored()
            rules = rules.descend(rel, os.path.join(root, *parts[:i]))
        return rules

    def descend(
        self, rel_dir: str, abs_dir: str, names: Collection[str] | None = None
    ) -> IgnoreRules:
        """The rules for subdirectory rel_dir; self when it has no ignore file.

        With ``names`` (the directory's listing) nothing is read unless an ignore
        file, or a ``.git`` (a nested repository), is listed.
        """
        nested = GIT in names if names is not None else os.path.lexists(os.path.join(abs_dir, GIT))
        if nested:
            repo = repo_at(abs_dir)
            if repo is not None:
                return self._nested(rel_dir, abs_dir, repo)
        if self._everything or (names is not None and not any(n in names for n in LEVEL_FILES)):
            return self  # below an ignored directory git reads no ignore file either
        return self._extend(
            rel_dir, [(n, _read(os.path.join(abs_dir, n), follow=False)) for n in LEVEL_FILES]
        )

    def descend_with(
        self, rel_dir: str, sources: Iterable[tuple[str, bytes | None]], abs_dir: str | None = None
    ) -> IgnoreRules:
        """The rules for subdirectory rel_dir, given its ignore files' bytes (None: absent).

        For rules read from a recorded tree rather than the disk; ``abs_dir``,
        when given, is where to look for a ``.git`` (never recorded).
        """
        if abs_dir is not None and os.path.lexists(os.path.join(abs_dir, GIT)):
            repo = repo_at(abs_dir)
            if repo is not None:
                return self._nested(rel_dir, abs_dir, repo, sources)
        return self if self._everything else self._extend(rel_dir, sources)

    def _nested(
        self,
        rel_dir: str,
        abs_dir: str,
        repo: GitRepo,
        sources: Iterable[tuple[str, bytes | None]] | None = None,
    ) -> IgnoreRules:
        """A nested repository: its own exclude file, ignore files and index from here down.

        git shows a nested repository as one entry and judges nothing inside
        it; the repository itself judges its files. Only .earshotignore
        patterns, earshot's own, reach across.
        """
        own = tuple(
            _Level("", (), patterns)
            for level in self._levels
            if (patterns := tuple(p for p in level.patterns if p.own))
        )
        digest = blake3.blake3(self._fingerprint)
        digest.update(_frame(b"repository:" + os.fsencode(rel_dir)))
        cache, live = (self.index.cache, self.index.live) if self.index else (None, False)
        index = GitIndex(repo, at=rel_dir, cache=cache, live=live)
        base = IgnoreRules(own, digest.digest(), index)
        if sources is None:
            sources = [(n, _read(os.path.join(abs_dir, n), follow=False)) for n in LEVEL_FILES]
        return base._extend(
            rel_dir, [("info/exclude", _read(repo.exclude_path, follow=True)), *sources]
        )

    def below_ignored(self, mode: str = SPARSE) -> IgnoreRules:
        """The rules inside an ignored directory: everything there is ignored.

        git cannot re-include a file whose parent directory is excluded.
        ``mode`` says what a scan keeps there: ``KEPT``, the ignored files
        within the budget; ``LISTED``, every entry as existence only;
        ``SPARSE``, what the index tracks (the rest as existence only, not
        listed). Each has its own fingerprint, so a stat-cache record of one
        never stands for another.
        """
        if self._everything and self.mode == mode:
            return self
        below = self._below.get(mode)
        if below is None:
            salt = b"below an ignored directory" + (b"" if mode == SPARSE else f", {mode}".encode())
            digest = blake3.blake3(self._fingerprint + salt).digest()
            below = IgnoreRules(self._levels, digest, self.index, everything=True, mode=mode)
            self._below[mode] = below
        return below

    def _extend(self, rel_dir: str, sources: Iterable[tuple[str, bytes | None]]) -> IgnoreRules:
        present = [(name, data) for name, data in sources if data is not None]
        if not present:
            return self
        prefix = f"{_bytewise(rel_dir)}/" if rel_dir else ""
        digest = blake3.blake3(self._fingerprint)
        digest.update(_frame(prefix.encode("latin-1")))
        for name, data in present:
            digest.update(_frame(name.encode()) + _frame(data))
        level = _level(prefix, tuple(present))
        levels = self._levels if level is None else (*self._levels, level)
        return IgnoreRules(levels, digest.digest(), self.index)

    def is_ignored(self, rel_path: str, is_dir: bool) -> bool:
        """Whether an entry of this directory (path relative to the root) is ignored.

        Pass ``is_dir=False`` for a symlink, even to a directory, as git does.
        The index is not consulted: see :meth:`excludes`.
        """
        if self._everything:
            return True
        if not rel_path.isascii():
            rel_path = _bytewise(rel_path)
        name = rel_path[rel_path.rfind("/") + 1 :]
        for level in reversed(self._levels):
            rank = level.rank(rel_path, name, is_dir)
            if rank:
                return bool(rank & 1)
        return False

    def verdict(self, rel_path: str, is_dir: bool) -> int:
        """Who ignores an entry of this directory: ``NOT_IGNORED``, ``BY_GIT`` or ``BY_EARSHOT``.

        ``BY_EARSHOT`` when the deciding pattern comes from an ``.earshotignore``;
        below an ignored directory (everything ignored, by git), when the last
        ``.earshotignore`` pattern that matches ignores it. The index is not
        consulted (see :meth:`excludes`).
        """
        if not rel_path.isascii():
            rel_path = _bytewise(rel_path)
        name = rel_path[rel_path.rfind("/") + 1 :]
        if self._everything:
            for level in reversed(self._levels):
                own = level.own()
                rank = own.rank(rel_path, name, is_dir) if own is not None else 0
                if rank:
                    return BY_EARSHOT if rank & 1 else BY_GIT
            return BY_GIT
        for level in reversed(self._levels):
            rank = level.rank(rel_path, name, is_dir)
            if rank:
                if not rank & 1:
                    return NOT_IGNORED
                return BY_EARSHOT if level.pattern(rank).own else BY_GIT
        return NOT_IGNORED

    def tracks(self, rel_path: str, is_dir: bool) -> bool:
        """Whether the index holds the entry (a directory: holds something below it)."""
        return self.index is not None and self.index.tracks(rel_path, is_dir)

    def excludes(self, rel_path: str, is_dir: bool) -> bool:
        """Whether a scan leaves the entry out: ignored, and not in the index."""
        return self.is_ignored(rel_path, is_dir) and not self.tracks(rel_path, is_dir)

    def index_identity(self) -> tuple[bytes, int]:
        """The index's identity and newest time stamp (ns), as :class:`GitIndex` gives."""
        return self.index.identity() if self.index is not None else (NO_INDEX, 0)

    @property
    def fingerprint(self) -> bytes:
        """32 bytes naming every pattern source in the chain, with its location."""
        return self._fingerprint
