"""Two runs side by side: every figure that moved more than its noise.

A figure moved when its two runs' min-max ranges do not overlap and the
medians differ by more than 5% (a run of one repeat has a range of one
point, so the 5% floor alone decides there). Figures in one run only are
listed too. The exit code is 0; 1 when a file cannot be read.
"""

from __future__ import annotations

import sys
from pathlib import Path

from benchmarks.report import catalog
from benchmarks.report.markdown import fmt
from benchmarks.suite.record import Measurement, load

FLOOR = 0.05

Key = tuple[str, str, str, str, str]


def _key(m: Measurement) -> Key:
    return (m.figure, m.metric, m.tree, m.peer, m.cache)


def moved(old: Measurement, new: Measurement) -> bool:
    apart = min(new.samples) > max(old.samples) or max(new.samples) < min(old.samples)
    change = abs(new.median - old.median) / old.median if old.median else float(new.median != 0)
    return apart and change > FLOOR


def compare(old_path: Path, new_path: Path, show_all: bool = False) -> int:
    try:
        old_run, new_run = load(old_path), load(new_path)
    except (OSError, ValueError, KeyError) as exc:
        print(f"benchmarks: cannot read a run: {exc}", file=sys.stderr)
        return 1
    old = {_key(m): m for m in old_run.measurements}
    new = {_key(m): m for m in new_run.measurements}
    print(
        f"old: {old_run.started} ({old_run.profile}) · new: {new_run.started} ({new_run.profile})"
    )
    print(f"{'figure':44} {'tree':18} {'peer':14} {'old':>24} {'new':>24} {'change':>8}")
    count = 0
    for key in sorted(
        old.keys() & new.keys(), key=lambda k: (k[0], catalog.metric_rank(k[1]), k[2:])
    ):
        a, b = old[key], new[key]
        if not (show_all or moved(a, b)):
            continue
        count += moved(a, b)
        change = (b.median / a.median - 1) * 100 if a.median else float("inf")
        name = catalog.title(key[1]) + (" (cold cache)" if key[4] == "cold" else "")
        print(
            f"{name[:44]:44} {key[2][:18]:18} {key[3][:14]:14} {_range(a):>24} {_range(b):>24} "
            f"{change:+7.1f}%{'' if moved(a, b) else ' ='}"
        )
    for key in sorted(old.keys() ^ new.keys()):
        where = "old" if key in old else "new"
        print(f"only in the {where} run: {catalog.title(key[1])} · {key[2]} · {key[3]}")
    print(f"{count} figures moved past their noise")
    return 0


def _range(m: Measurement) -> str:
    return f"{fmt(m.median, m.unit)} [{fmt(min(m.samples), m.unit)}-{fmt(max(m.samples), m.unit)}]"
