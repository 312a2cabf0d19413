"""How a root is recorded: the options, what a scan reports, and what it never records.

A scan's options (the size limit, the racy margin, earshot's own
directories, what of the ignored is kept), its report, the levels below the
root it records, and earshot's own temp file names, which no scan records.
"""

from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path

from .errors import EarshotError
from .keep import KeepIgnored, parse_size
from .tree import Unrecorded

TEMP_PREFIX = ".earshot-tmp-"
#: A temp file earshot writes before a rename: the prefix, a tag (an intent's
#: id, or ``w`` + pid) and a suffix. Only such a name is skipped by a scan: a
#: person's ``.earshot-tmp-notes`` is recorded like any file.
_TEMP_NAME = re.compile(r"\.earshot-tmp-(?:[0-9a-f]+-[0-9a-f]{8}|w[0-9]+)-[0-9a-f]+")


def is_temp_name(name: str) -> bool:
    """Whether ``name`` is one of earshot's own temp files (see ``_TEMP_NAME``)."""
    return name.startswith(TEMP_PREFIX) and _TEMP_NAME.fullmatch(name) is not None


DEFAULT_MAX_FILE_SIZE = 64 << 20
#: Directory levels recorded below the root. A deeper directory is kept as
#: unrecorded (``Unrecorded.TOO_DEEP``): never walked, so never deleted or
#: overwritten by a restore or an undo. Every walk over trees recurses a few
#: frames a level; 128 levels stay far inside Python's recursion limit, and
#: far beyond real trees (the kernel's deepest file is 11 levels down).
MAX_DEPTH = 128
#: Entries modified this close to the scan start are not trusted next time.
DEFAULT_RACY_MARGIN_NS = 2_000_000_000
ENV_MAX_FILE_SIZE = "EARSHOT_MAX_FILE_SIZE"


class BadSize(EarshotError):
    def __init__(self, text: str) -> None:
        super().__init__(f"{ENV_MAX_FILE_SIZE}={text!r} is not a size (e.g. 64M, 1G, 500000)")


def max_file_size_from_env() -> int:
    """The largest file recorded: $EARSHOT_MAX_FILE_SIZE (bytes, or with K/M/G), else 64 MiB."""
    given = os.environ.get(ENV_MAX_FILE_SIZE, "").strip()
    if not given:
        return DEFAULT_MAX_FILE_SIZE
    try:
        return parse_size(ENV_MAX_FILE_SIZE, given)
    except EarshotError:
        raise BadSize(given) from None


@dataclass(frozen=True, slots=True)
class ScanOptions:
    """How to record a root."""

    max_file_size: int = DEFAULT_MAX_FILE_SIZE
    racy_margin_ns: int = DEFAULT_RACY_MARGIN_NS
    #: Directories never recorded (earshot's data, when it lies inside the root).
    exclude_dirs: frozenset[str] = frozenset()
    #: What of the ignored is kept (``cas.keep``).
    keep: KeepIgnored = field(default_factory=KeepIgnored)


@dataclass(slots=True)
class ScanReport:
    """What a scan found besides the tree."""

    files: int = 0
    content_bytes: int = 0
    #: Files whose content was read (the stat cache did not vouch for them).
    files_read: int = 0
    bytes_read: int = 0
    #: Not recorded for a reason a person should hear of (too large, unreadable, ...).
    unrecorded: list[tuple[str, Unrecorded]] = field(default_factory=list)
    #: Ignored entries kept as existence only (``EXISTENCE_ONLY``), counted.
    existence_only: int = 0
    #: (path, reason) of what was not walked at all: special file systems.
    skipped: list[tuple[str, str]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    #: Recorded regular files with other hard links: a write through a link
    #: outside the root, or in a directory nothing watches, changes them
    #: without an event on their own directory.
    linked: list[str] = field(default_factory=list)


def touch_marker(marker: Path) -> int:
    """Write the marker file and return its mtime: the scan's own time stamp.

    The file system's clock, not ``time.time()``: it is the clock file mtimes
    are compared against.
    """
    marker.parent.mkdir(parents=True, exist_ok=True)
    with open(marker, "wb") as handle:
        handle.write(str(time.time_ns()).encode())
    return os.stat(marker).st_mtime_ns
