"""Running a plan: each tree made once, each figure run on it, the JSON kept current.

A figure that fails is recorded as an error with its message and the run
goes on; the run's exit code says so at the end. results.json is written
after every figure, so a run cut short keeps what it measured.
"""

from __future__ import annotations

import os
import resource
import shutil
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Protocol, TypeVar

from benchmarks.suite import bytecode, machine, trees
from benchmarks.suite.plan import Plan
from benchmarks.suite.progress import Progress
from benchmarks.suite.record import RESULTS_FILE, Results, TreeInfo, load
from benchmarks.suite.trees import TreeSpec, TreeUnavailable

T = TypeVar("T")


@dataclass
class Tree:
    """A made tree: its spec, the pristine copy, what it holds."""

    spec: TreeSpec
    pristine: Path
    info: TreeInfo

    @property
    def key(self) -> str:
        return self.spec.key


class Context:
    """What a figure gets: the plan, the results, the progress line, scratch space,
    the earshot to time and, with ``--base``, a second one to time beside it."""

    def __init__(
        self,
        plan: Plan,
        results: Results,
        progress: Progress,
        work: Path,
        earshot: str,
        base: str | None = None,
    ) -> None:
        self.plan = plan
        self.results = results
        self.progress = progress
        self.work = work
        self.earshot = earshot
        self.base = base

    def scratch(self, *parts: str) -> Path:
        """A fresh directory under the run's work directory."""
        path = self.work.joinpath(*parts)
        if path.exists():
            shutil.rmtree(path)
        path.mkdir(parents=True)
        return path

    def copy(self, tree: Tree, name: str) -> Path:
        """A copy of the tree of its own for ``name`` (a peer)."""
        self.progress.step(f"copying the tree for {name}")
        return trees.copy(tree.pristine, self.work / "copies" / name)


class Figure(Protocol):
    """One family of figures: what it measures, on which trees, at what cost."""

    name: str
    title: str

    def applies(self, tree: TreeSpec, plan: Plan) -> bool:
        """Whether this figure runs on this tree in this plan."""
        ...

    def weight(self, tree: TreeSpec, plan: Plan) -> float:
        """Its cost relative to the others, for the progress line's estimate."""
        ...

    def run(self, ctx: Context, tree: Tree) -> None:
        """Measure, recording into ``ctx.results``."""


def timed(action: object, sync: bool = True) -> float:
    """Wall seconds of ``action()``; dirty pages are written first, so what an
    earlier step wrote is not billed to this one."""
    if sync:
        os.sync()
    start = time.perf_counter()
    action()  # type: ignore[operator]
    return time.perf_counter() - start


def children_cpu() -> float:
    """CPU seconds (user + system) of every child process waited for so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def alternate(items: Sequence[T], repeat: int) -> list[T]:
    """A B C on even repeats, C B A on odd ones: no tool always goes first."""
    return list(items) if repeat % 2 == 0 else list(items)[::-1]


def tree_weight(spec: TreeSpec) -> float:
    """The file count a tree is estimated at before it is made."""
    return float(spec.files or {"kernel": 78_000, "node_modules": 46_000}.get(spec.kind, 10_000))


@contextmanager
def _job(progress: Progress, label: str, weight: float) -> Iterator[None]:
    progress.begin(label, weight)
    try:
        yield
    finally:
        progress.end()


def run(
    plan: Plan,
    figures: dict[str, Figure],
    out: Path,
    work: Path,
    cache: Path,
    earshot: str,
    *,
    kernel: Path | None = None,
    base: str | None = None,
    resume: bool = False,
) -> Results:
    """Run every figure of the plan on every tree; results.json in ``out``.

    With ``resume``, the figures ``out``/results.json already holds are kept
    and not run again; the rest are added to it (same machine only).
    """
    work, out = work.resolve(), out.resolve()  # git and tar run with other working dirs
    here = machine.describe(work, earshot)
    here["bytecode"] = "compiled first: " + bytecode.compile_install(earshot)
    if base:
        bytecode.compile_install(base)
    results = Results(plan.profile, here, plan.args)
    if resume and (out / RESULTS_FILE).exists():
        results = load(out / RESULTS_FILE)
        if results.machine.get("hostname") != here.get("hostname"):
            raise ValueError(f"{out}: measured on another machine; resume it there")
    part = {"started": _now(), "args": plan.args, "loadavg_start": here["loadavg_start"]}
    results.parts.append(part)
    jobs = [
        (spec, name)
        for spec in plan.trees
        for name in plan.figures
        if figures[name].applies(spec, plan) and f"{name}:{spec.key}" not in results.figures_done
    ]
    total = sum(figures[n].weight(s, plan) for s, n in jobs)
    progress = Progress(total)
    made: dict[str, Tree | None] = {}
    for spec, name in jobs:
        figure = figures[name]
        with _job(progress, f"{name} · {spec.label}", figure.weight(spec, plan)):
            if spec.key not in made:
                made[spec.key] = _make(spec, cache, kernel, results, progress)
            tree = made[spec.key]
            if tree is None:
                continue
            ctx = Context(plan, results, progress, work / spec.key / name, earshot, base)
            try:
                figure.run(ctx, tree)
            except Exception as exc:  # a figure's failure is reported; the run goes on
                results.error(name, spec.key, f"{type(exc).__name__}: {exc}")
                progress.say(f"failed: {name} on {spec.key}: {exc}")
            finally:
                shutil.rmtree(ctx.work, ignore_errors=True)
                with suppress(OSError):
                    ctx.work.parent.rmdir()  # the tree's scratch, once its last figure ran
            results.figures_done.append(f"{name}:{spec.key}")
            results.save(out)
    results.finished = part["finished"] = _now()
    results.machine["loadavg_end"] = part["loadavg_end"] = list(os.getloadavg())
    results.save(out)
    progress.close()
    return results


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def _make(
    spec: TreeSpec, cache: Path, kernel: Path | None, results: Results, progress: Progress
) -> Tree | None:
    progress.step("making the tree (once; later runs reuse it)")
    try:
        pristine, info = trees.prepare(spec, cache, kernel)
    except TreeUnavailable as exc:
        results.error("trees", spec.key, str(exc))
        progress.say(f"skipped {spec.key}: {exc}")
        return None
    results.trees[spec.key] = info
    return Tree(spec, pristine, info)
