"""Long results told short: past 50 paths, totals and counts per folder.

A result that names every path it touched (a restore, an undo, their dry
runs) lists them one a line up to ``LIST_LIMIT`` paths, as always. Past
that, each kind of line (``would restore``, ``delete``, ``kept: <why>``)
becomes one line with its count and how many fall in each folder, and a
last line says how many paths there were and how to see every one
(``--list``; ``--json`` always holds them all)::

    would delete 11,008 paths in src2/: internal/ 4,120, packages/ 3,900, src/ 2,988
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from .quoting import quote_path

#: Up to this many paths a result lists each one.
LIST_LIMIT = 50
#: Folders named on a summary line; the rest are counted together.
_FOLDERS_SHOWN = 6


@dataclass(frozen=True, slots=True)
class Group:
    """One kind of line in a result: its lines as listed, and the paths they name."""

    #: What it says of them in short ("would restore", "kept (not recorded)").
    label: str
    paths: Sequence[str]
    lines: Sequence[str]


def summed_up(groups: Sequence[Group], every: bool) -> list[str]:
    """The groups' lines; past ``LIST_LIMIT`` paths (and not ``every``) their summary."""
    total = sum(len(g.paths) for g in groups)
    if every or total <= LIST_LIMIT:
        return [line for g in groups for line in g.lines]
    lines = [f"  {g.label} {_count(len(g.paths))}{folders(g.paths)}" for g in groups if g.paths]
    lines.append(f"  ({total:,} paths in all; --list lists each one, and so does --json)")
    return lines


def _count(n: int) -> str:
    return f"{n:,} path" if n == 1 else f"{n:,} paths"


def folders(paths: Sequence[str]) -> str:
    """`` in src/: a/ 3, b/ 1, 2 files``: counts per folder under the paths' common one."""
    common = os.path.commonpath(paths) if len(paths) > 1 else paths[0].rpartition("/")[0]
    if common in paths:  # one of them is that folder itself (an rmdir): go one up
        common = common.rpartition("/")[0]
    base = common + "/" if common else ""
    counts: Counter[str] = Counter()
    for path in paths:
        rest = path[len(base) :]
        head, slash, _ = rest.partition("/")
        counts[head + "/" if slash else ""] += 1
    files = counts.pop("", 0)
    parts = [f"{quote_path(name)} {n:,}" for name, n in counts.most_common(_FOLDERS_SHOWN)]
    others = counts.most_common()[_FOLDERS_SHOWN:]
    if others:
        parts.append(f"{len(others):,} more folders {sum(n for _, n in others):,}")
    if files:
        parts.append(f"{files:,} directly in it" if base else f"{files:,} at the top")
    where = f" in {quote_path(base)}" if base else ""
    return f"{where}: {', '.join(parts)}"
