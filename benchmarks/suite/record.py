"""The results of one suite run: every repeat of every figure, as JSON.

A run writes ``results.json`` in its output directory after every figure, so
a run cut short still leaves what it measured. The report (RESULTS.md and
the plots) is built from this file alone.

Three kinds of record:

* a **measurement**: one figure (``metric``) of one peer on one tree, with
  every sample, the median and the min-max;
* a **series**: a curve a figure traces (the store's size over 100
  checkpoints), x and y;
* a **fidelity row**: what one peer gave back after one bad agent run.
"""

from __future__ import annotations

import json
import os
import statistics
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

FORMAT = 1
RESULTS_FILE = "results.json"


@dataclass
class Measurement:
    """The samples of one metric, for one peer on one tree."""

    figure: str
    metric: str
    tree: str  # a tree's key: "generated-10000", "kernel", ...
    peer: str
    unit: str  # "s", "bytes", "MiB", "count"
    samples: list[float]
    cache: str = "warm"  # the page cache: "warm", or "cold" where it was dropped
    note: str = ""

    @property
    def median(self) -> float:
        return statistics.median(self.samples)

    def to_json(self) -> dict[str, Any]:
        doc = asdict(self)
        doc["samples"] = [round(v, 6) for v in self.samples]
        doc.update(median=round(self.median, 6), min=min(self.samples), max=max(self.samples))
        return doc


@dataclass
class Series:
    """A curve: y against x for one peer on one tree."""

    figure: str
    metric: str
    tree: str
    peer: str
    x_unit: str
    unit: str
    x: list[float] = field(default_factory=list)
    y: list[float] = field(default_factory=list)


@dataclass
class FidelityRow:
    """What one peer's own restore gave back after one scripted bad agent run."""

    tree: str
    scenario: str
    peer: str
    files: int  # files the scenario's tree held before the run
    restored: int  # files brought back exactly
    wrong: int  # files left wrong (content, missing, or left behind)
    persons_lost: int  # files of the person's the restore deleted or overwrote
    bytes_lost: int  # bytes of content gone: in no file of the tree, no object of its repository
    detail: str = ""
    changed: int = 0  # files the run changed, deleted or created


@dataclass
class TreeInfo:
    """What a tree is: where it came from, its size."""

    key: str
    kind: str  # "generated", "kernel", "node_modules", "venv", "binary"
    files: int
    bytes: int
    gitignores: int
    source: str


@dataclass
class Results:
    """Everything one run measured, and where."""

    profile: str
    machine: dict[str, Any]
    args: dict[str, Any]
    started: str = field(default_factory=lambda: datetime.now(UTC).isoformat(timespec="seconds"))
    finished: str = ""
    trees: dict[str, TreeInfo] = field(default_factory=dict)
    measurements: list[Measurement] = field(default_factory=list)
    series: list[Series] = field(default_factory=list)
    fidelity: list[FidelityRow] = field(default_factory=list)
    errors: list[dict[str, str]] = field(default_factory=list)
    figures_done: list[str] = field(default_factory=list)
    # Each sitting of the run (a run resumed with --resume has several): when
    # it started and ended, its options, the load average at each end.
    parts: list[dict[str, Any]] = field(default_factory=list)

    def measure(
        self,
        figure: str,
        metric: str,
        tree: str,
        peer: str,
        value: float,
        unit: str = "s",
        cache: str = "warm",
        note: str = "",
    ) -> None:
        """Add one sample, to the measurement it belongs to."""
        for m in self.measurements:
            if (m.figure, m.metric, m.tree, m.peer, m.cache) == (figure, metric, tree, peer, cache):
                m.samples.append(value)
                return
        self.measurements.append(
            Measurement(figure, metric, tree, peer, unit, [value], cache=cache, note=note)
        )

    def error(self, figure: str, tree: str, message: str) -> None:
        self.errors.append({"figure": figure, "tree": tree, "message": message})

    def to_json(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "profile": self.profile,
            "started": self.started,
            "finished": self.finished,
            "machine": self.machine,
            "args": self.args,
            "trees": {k: asdict(t) for k, t in self.trees.items()},
            "measurements": [m.to_json() for m in self.measurements],
            "series": [asdict(s) for s in self.series],
            "fidelity": [asdict(r) for r in self.fidelity],
            "errors": self.errors,
            "figures_done": self.figures_done,
            "parts": self.parts,
        }

    def save(self, out: Path) -> Path:
        """Write results.json atomically: a reader never sees half a file."""
        out.mkdir(parents=True, exist_ok=True)
        path = out / RESULTS_FILE
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.to_json(), indent=1) + "\n")
        os.replace(tmp, path)
        return path


def load(path: Path) -> Results:
    """Read a results.json (or the directory holding one) back."""
    if path.is_dir():
        path = path / RESULTS_FILE
    doc = json.loads(path.read_text())
    if doc.get("format") != FORMAT:
        raise ValueError(f"{path}: results format {doc.get('format')!r}, expected {FORMAT}")
    res = Results(profile=doc["profile"], machine=doc["machine"], args=doc["args"])
    res.started, res.finished = doc["started"], doc["finished"]
    res.trees = {k: TreeInfo(**t) for k, t in doc["trees"].items()}
    for m in doc["measurements"]:
        for derived in ("median", "min", "max"):
            m.pop(derived)
        res.measurements.append(Measurement(**m))
    res.series = [Series(**s) for s in doc["series"]]
    res.fidelity = [FidelityRow(**r) for r in doc["fidelity"]]
    res.errors = doc["errors"]
    res.figures_done = doc["figures_done"]
    res.parts = doc.get("parts", [])
    return res


def merge(runs: list[Results]) -> Results:
    """One run from several sittings on one machine (parts run side by side or
    one after another); a figure measured on one tree by two of them is refused."""
    first = runs[0]
    merged = Results(first.profile, dict(first.machine), dict(first.args))
    merged.started = min(r.started for r in runs)
    merged.finished = max((r.finished for r in runs if r.finished), default="")
    for run in runs:
        # A VM keeps its name when it moves to other hardware: the CPU tells.
        if any(run.machine.get(k) != first.machine.get(k) for k in ("hostname", "cpu_model")):
            raise ValueError("runs from different machines cannot be merged")
        twice = set(run.figures_done) & set(merged.figures_done)
        if twice:
            raise ValueError(f"measured in two runs: {', '.join(sorted(twice))}")
        merged.trees.update(run.trees)
        merged.measurements += run.measurements
        merged.series += run.series
        merged.fidelity += run.fidelity
        merged.errors += run.errors
        merged.figures_done += run.figures_done
        merged.parts += run.parts
    ends = [r.machine["loadavg_end"] for r in runs if r.machine.get("loadavg_end")]
    merged.machine["loadavg_end"] = ends[-1] if ends else None
    return merged
