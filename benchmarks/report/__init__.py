"""The report of a run: RESULTS.md and the plots, from results.json alone;
and the comparison of two runs."""

from __future__ import annotations

import os
from pathlib import Path

from benchmarks.suite.record import RESULTS_FILE, load


def render(out: Path) -> list[Path]:
    """Write ``out``/RESULTS.md and ``out``/plots/*.png from ``out``/results.json."""
    from benchmarks.figures import registry
    from benchmarks.report import markdown, plots

    results = load(out / RESULTS_FILE)
    for old in (out / "plots").glob("*.png"):
        old.unlink()
    written = plots.render(results, out)
    titles = {name: figure.title for name, figure in registry().items()}
    text = markdown.render(results, written, out, titles)
    path = out / "RESULTS.md"
    tmp = path.with_suffix(".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)
    return [path, *written]
