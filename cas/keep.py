"""What of the ignored is kept: ignored files a person would miss, within limits.

git's ignore rules say what git leaves out of commits, not what a person can
afford to lose: ``.env``, a local database, a notebook's data, an agent's
settings. A scan keeps the content of an ignored file when it is small, and
of an ignored directory when it is small as a whole, unless it is a
regenerable cache; of everything else it keeps only that it exists (and its
identity: a moved file or directory is found again). ``.earshotignore``
patterns are earshot's own "do not keep": what they ignore is never kept.

A regenerable cache is a directory that tools rebuild: one marked by
``CACHEDIR.TAG`` (the convention borg, restic and cargo use), a Python venv
(``pyvenv.cfg``), ``node_modules``, ``__pycache__``, a build or coverage
output directory or a tool's cache directory by its name. An ignored file
whose first bytes say it is compiled output (an object file, a library, an
executable) is not kept either: in-tree builds leave hundreds of them beside
the sources. A directory over the budget (files or bytes) is too large to
be anyone's hand-kept data: it is kept as existence only, whole. The limits
are measured in ``docs/IGNORED.md``.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Final

from .errors import EarshotError
from .ignore import BY_EARSHOT, KEPT, LISTED, NOT_IGNORED, SPARSE, IgnoreRules

#: Directory names tools regenerate (their content is never kept when ignored:
#: only a directory git's rules ignore, or one inside it, is judged by its name).
CACHE_NAMES: Final = frozenset(
    {
        "build",
        "dist",
        "target",
        "coverage",
        "htmlcov",
        "node_modules",
        "bower_components",
        "__pycache__",
        ".tox",
        ".nox",
        ".mypy_cache",
        ".pytest_cache",
        ".ruff_cache",
        ".hypothesis",
        ".gradle",
        ".next",
        ".nuxt",
        ".svelte-kit",
        ".parcel-cache",
        ".turbo",
        ".angular",
        ".cache",
        ".eggs",
        ".terraform",
        ".stack-work",
        ".ccache",
        "CMakeFiles",
    }
)
#: A file that marks its directory as a cache: a venv's config, and the cache
#: directory tag (bford.info/cachedir), which must start with this signature.
VENV_MARKER: Final = "pyvenv.cfg"
CACHEDIR_TAG: Final = "CACHEDIR.TAG"
CACHEDIR_SIGNATURE: Final = b"Signature: 8a477f597d28d172789f06886806bc55"

#: The first bytes of compiled output, which a build makes again: ELF objects,
#: libraries and executables; ar archives (static libraries); Mach-O (both
#: byte orders, 32 and 64 bit, and universal binaries, which share their magic
#: with Java class files, also compiled); WebAssembly.
BUILD_MAGIC: Final = (
    b"\x7fELF",
    b"!<arch>\n",
    b"\xfe\xed\xfa\xce",
    b"\xfe\xed\xfa\xcf",
    b"\xce\xfa\xed\xfe",
    b"\xcf\xfa\xed\xfe",
    b"\xca\xfe\xba\xbe",
    b"\x00asm",
)
#: Python's compiled modules, whose magic number changes with every version.
BUILD_SUFFIXES: Final = (".pyc", ".pyo")
#: How many first bytes ``is_build_output`` needs.
MAGIC_BYTES: Final = 8

DEFAULT_MAX_FILE: Final = 4 << 20
DEFAULT_DIR_FILES: Final = 1000
DEFAULT_DIR_BYTES: Final = 64 << 20

DEFAULT_LIFT_BYTES: Final = 1 << 30
DEFAULT_LIFT_FILES: Final = 20_000

ENV_KEEP: Final = "EARSHOT_KEEP_IGNORED"
ENV_TARGET_BUDGET: Final = "EARSHOT_TARGET_BUDGET"
ENV_MAX_FILE: Final = "EARSHOT_IGNORED_MAX_FILE"
ENV_DIR_FILES: Final = "EARSHOT_IGNORED_DIR_FILES"
ENV_DIR_BYTES: Final = "EARSHOT_IGNORED_DIR_BYTES"

_UNITS: Final = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


class BadSetting(EarshotError):
    def __init__(self, name: str, text: str, what: str) -> None:
        super().__init__(f"{name}={text!r} is not {what}")


def parse_size(name: str, given: str) -> int:
    """A size as a person writes it: bytes, or with K/M/G (``64M``, ``1G``, ``500000``)."""
    text = given.strip().upper().removesuffix("B").removesuffix("I")
    number, unit = (text[:-1], text[-1]) if text and text[-1] in "KMG" else (text, "")
    try:
        value = int(float(number) * _UNITS[unit])
    except ValueError:
        raise BadSetting(name, given, "a size (e.g. 64M, 1G, 500000)") from None
    if value < 0:
        raise BadSetting(name, given, "a size (e.g. 64M, 1G, 500000)")
    return value


@dataclass(frozen=True, slots=True)
class KeepIgnored:
    """The limits within which ignored content is kept."""

    enabled: bool = True
    #: The largest ignored file whose content is kept.
    max_file: int = DEFAULT_MAX_FILE
    #: An ignored directory holding more files than this, or more bytes of
    #: files within ``max_file``, is kept as existence only, whole.
    dir_files: int = DEFAULT_DIR_FILES
    dir_bytes: int = DEFAULT_DIR_BYTES

    def describe(self) -> str:
        """The limits in a few characters: a watcher and a scan must agree on them."""
        if not self.enabled:
            return "off"
        return f"{self.max_file}:{self.dir_files}:{self.dir_bytes}"

    @staticmethod
    def from_env() -> KeepIgnored:
        """The limits as the environment sets them ($EARSHOT_KEEP_IGNORED=0 keeps none)."""
        env = os.environ
        keep = env.get(ENV_KEEP, "").strip().lower()
        if keep not in ("", "0", "1", "no", "yes", "false", "true", "off", "on"):
            raise BadSetting(ENV_KEEP, keep, "0 or 1")
        files_text = env.get(ENV_DIR_FILES, "").strip()
        try:
            dir_files = int(files_text) if files_text else DEFAULT_DIR_FILES
        except ValueError:
            raise BadSetting(ENV_DIR_FILES, files_text, "a number of files") from None
        return KeepIgnored(
            enabled=keep not in ("0", "no", "false", "off"),
            max_file=(
                parse_size(ENV_MAX_FILE, env[ENV_MAX_FILE])
                if env.get(ENV_MAX_FILE, "").strip()
                else DEFAULT_MAX_FILE
            ),
            dir_files=max(dir_files, 0),
            dir_bytes=(
                parse_size(ENV_DIR_BYTES, env[ENV_DIR_BYTES])
                if env.get(ENV_DIR_BYTES, "").strip()
                else DEFAULT_DIR_BYTES
            ),
        )


def is_cache(path: str, name: str) -> bool:
    """Whether the directory at ``path`` is a regenerable cache (by name or marker)."""
    if name in CACHE_NAMES:
        return True
    try:
        if stat.S_ISREG(os.lstat(os.path.join(path, VENV_MARKER)).st_mode):
            return True
    except OSError:
        pass
    tag = os.path.join(path, CACHEDIR_TAG)
    try:
        fd = os.open(tag, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return False
        return os.read(fd, len(CACHEDIR_SIGNATURE)) == CACHEDIR_SIGNATURE
    except OSError:
        return False
    finally:
        os.close(fd)


def is_build_output(name: str, head: bytes) -> bool:
    """Whether an ignored file named ``name`` whose content starts with ``head`` is
    compiled output (its first ``MAGIC_BYTES`` bytes are enough)."""
    return head.startswith(BUILD_MAGIC) or name.endswith(BUILD_SUFFIXES)


class Lift:
    """What may still be recorded past every limit for a destructive command's targets.

    Those paths are about to go: their content is worth reading now, within
    this budget (``EARSHOT_TARGET_BUDGET``, default 1 GiB and 20,000 files a
    command); past it, what is left stays existence only and is said.

    Regenerable output under the targets (a small cache directory, ignored
    build output) is read too, but only as much as one kept ignored directory
    may hold (``KeepIgnored.dir_files`` and ``dir_bytes``, 1,000 files and 64
    MiB by default): ``git clean -fdx`` in a small project takes its ``dist/``
    and ``__pycache__`` with it, and an undo brings them back; a built
    kernel's thousands of object files stay existence only, and the batch
    says so.
    """

    __slots__ = ("bytes", "files", "regenerable_bytes", "regenerable_files")

    def __init__(
        self,
        max_bytes: int,
        max_files: int = DEFAULT_LIFT_FILES,
        regenerable_bytes: int = DEFAULT_DIR_BYTES,
        regenerable_files: int = DEFAULT_DIR_FILES,
    ) -> None:
        self.bytes = max_bytes
        self.files = max_files
        self.regenerable_bytes = regenerable_bytes
        self.regenerable_files = regenerable_files

    def take(self, size: int, *, regenerable: bool = False, files: int = 1) -> bool:
        """Whether ``files`` files of ``size`` bytes in all fit; if so, they are taken
        from the budget (and, for ``regenerable`` output, from its smaller budget too)."""
        if files > self.files or size > self.bytes:
            return False
        if regenerable:
            if files > self.regenerable_files or size > self.regenerable_bytes:
                return False
            self.regenerable_files -= files
            self.regenerable_bytes -= size
        self.files -= files
        self.bytes -= size
        return True

    @staticmethod
    def from_env(keep: KeepIgnored) -> Lift:
        """The budget ``EARSHOT_TARGET_BUDGET`` sets; regenerable output as ``keep``
        keeps an ignored directory, none when keeping the ignored is off."""
        given = os.environ.get(ENV_TARGET_BUDGET, "").strip()
        return Lift(
            parse_size(ENV_TARGET_BUDGET, given) if given else DEFAULT_LIFT_BYTES,
            regenerable_bytes=keep.dir_bytes if keep.enabled else 0,
            regenerable_files=keep.dir_files if keep.enabled else 0,
        )


#: Entries a directory kept as existence only is listed with, at most (every
#: entry's identity, no content): past this, the directory is one entry.
MAX_LISTED: Final = 100_000


class OverListed(Exception):
    """An ignored directory holds more entries than a scan lists one by one."""


class OverBudget(Exception):
    """An ignored directory holds more than the budget lets a scan keep."""


class Budget:
    """What is left of the budget of one ignored directory, as its walk goes."""

    __slots__ = ("bytes", "files")

    def __init__(self, keep: KeepIgnored) -> None:
        self.files = keep.dir_files
        self.bytes = keep.dir_bytes

    def take(self, size: int) -> None:
        """One file of ``size`` bytes kept (0: one kept as existence only)."""
        self.files -= 1
        self.bytes -= size
        if self.files < 0 or self.bytes < 0:
            raise OverBudget()


def _file_sizes(path: str, into_caches: bool) -> Iterator[int]:
    """The sizes of the files under the directory at ``path``, by names alone, as
    a walk finds them: never ``.git``, cache directories only ``into_caches``."""
    stack = [path]
    while stack:
        with os.scandir(stack.pop()) as listing:
            for entry in listing:
                if entry.is_dir(follow_symlinks=False):
                    if entry.name != ".git" and (
                        into_caches or not is_cache(entry.path, entry.name)
                    ):
                        stack.append(entry.path)
                    continue
                yield entry.stat(follow_symlinks=False).st_size


def within_budget(path: str, keep: KeepIgnored) -> bool:
    """Whether the ignored directory at ``path`` fits the budget, by names and sizes alone.

    Stops as soon as it is over: at most ``dir_files`` entries are looked at,
    and nothing is read. Cache directories below it cost nothing (never kept).
    """
    budget = Budget(keep)
    try:
        for size in _file_sizes(path, into_caches=False):
            budget.take(size if size <= keep.max_file else 0)
    except OverBudget:
        return False
    except OSError:
        pass  # what cannot be listed is not kept either; the walk says so
    return True


def measure(path: str, max_files: int, max_bytes: int) -> tuple[int, int] | None:
    """The files and bytes under the directory at ``path`` (caches in it too, not
    ``.git``), by names and sizes; None as soon as either is past its limit."""
    files = total = 0
    try:
        for size in _file_sizes(path, into_caches=True):
            files += 1
            total += size
            if files > max_files or total > max_bytes:
                return None
    except OSError:
        return None  # what cannot be listed is not read whole either
    return files, total


def subdir_rules(rules: IgnoreRules, rel: str, path: str, keep: KeepIgnored) -> IgnoreRules | None:
    """How a scan treats the subdirectory ``rel`` (at ``path``) of a directory judged by ``rules``.

    Returns the rules its entries are judged by as a scan walks it (to
    ``descend`` into): its own, kept, listed (every entry's existence) or
    sparse (what git tracks in a cache); None when a scan records it as one
    entry (a cache, or what ``.earshotignore`` excludes). What a watcher
    watches; a scan decides the same way (``Scanner._ignored_dir``), but for
    a directory with more entries than ``MAX_LISTED``, which it records as one
    entry and a watcher still watches.
    """
    verdict = rules.verdict(rel, True)
    if verdict == NOT_IGNORED:
        return rules
    tracked = rules.tracks(rel, True)
    if verdict == BY_EARSHOT and not tracked:
        return None
    if rules.mode == SPARSE or is_cache(path, path.rpartition("/")[2]):
        return rules.below_ignored(SPARSE) if tracked else None
    if rules.mode in (KEPT, LISTED):
        return rules.below_ignored(rules.mode)
    if keep.enabled and within_budget(path, keep):
        return rules.below_ignored(KEPT)
    return rules.below_ignored(LISTED)
