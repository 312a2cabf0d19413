"""Side-by-side benchmark: earshot's checkpoint store against "shadow git".

For each tree size it generates a seeded, realistic source tree (gen_tree.py)
twice, byte-identical: one copy per tool, so that one tool's restores (which
rewrite files and their timestamps) never disturb the other's stat cache. Each
scenario then times earshot and git alternately (A B, then B A, ...), each
operation as whole commands run with ``subprocess`` and timed with
``time.perf_counter``. Edits are applied to both trees with the same seed, so
both tools always see the same change.

    python benchmarks/bench_store.py --files 10000 100000 --repeat 5 \\
        --cold-repeat 3 --out benchmarks/results-store.json

``--peer-only`` times git alone (for when earshot's CLI is not available);
``--base EXE`` times another earshot (the code before a change) too, on a
third copy. The cold snapshot is also measured in CPU seconds (user + sys of
the command and its children), which a busy machine inflates far less than
wall time. See benchmarks/README.md for what each scenario means.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any, Protocol

sys.path.insert(0, str(Path(__file__).resolve().parent))

import gen_tree
from shadow_git import ShadowGit, disk_usage

BENCH_DIR = Path(__file__).resolve().parent
EXIT_SKIPPED = 3  # earshot: done, but some paths were skipped


def log(message: str) -> None:
    """A progress line on stderr, with the time of day."""
    print(f"[{datetime.now():%H:%M:%S}] {message}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------
# The two tools behind one interface


class Tool(Protocol):
    """One checkpointing tool working on its own copy of the tree."""

    name: str
    tree: Path

    def reset_store(self) -> None: ...
    def snapshot(self, message: str) -> str: ...
    def restore(self, ref: str) -> None: ...
    def restore_variant(self, ref: str) -> None: ...
    def disk_bytes(self) -> int: ...
    def entries(self) -> int: ...


class EarshotTool:
    """The ``earshot`` console script, with ``EARSHOT_HOME`` a fresh directory per store."""

    name = "earshot"

    def __init__(self, exe: str, tree: Path, stores: Path, name: str = "earshot") -> None:
        self.name = name  # "base": the code before a change, timed beside it
        self.exe = exe
        self.tree = tree
        self.stores = stores
        self.home = stores / f"{name}-home-0"
        self.generation = 0
        self.last_snapshot: dict[str, Any] = {}
        self.last_seconds: float | None = None  # the command's own "seconds", if it says

    def _run(self, *args: str, ok: Sequence[int] = (0,)) -> dict[str, Any]:
        # No watch daemon: these are the store's own figures (a walk per
        # snapshot); bench_checkpoints.py times the same commands with one.
        env = {**os.environ, "EARSHOT_HOME": str(self.home), "EARSHOT_WATCH": "never"}
        argv = [self.exe, *args, "--root", str(self.tree), "--json"]
        proc = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
        if proc.returncode not in ok:
            raise RuntimeError(f"{' '.join(argv)} exited {proc.returncode}: {proc.stderr.strip()}")
        doc: dict[str, Any] = json.loads(proc.stdout)
        seconds = doc.get("seconds")
        self.last_seconds = float(seconds) if isinstance(seconds, int | float) else None
        return doc

    def reset_store(self) -> None:
        """Point at a new, empty EARSHOT_HOME (earshot creates its store on first use)."""
        self.generation += 1
        self.home = self.stores / f"{self.name}-home-{self.generation}"
        self.home.mkdir(parents=True)

    def snapshot(self, message: str) -> str:
        doc = self._run("snapshot", "-m", message)
        self.last_snapshot = doc
        return str(doc["id"])

    def restore(self, ref: str) -> None:
        self._run("restore", ref, "--force", ok=(0, EXIT_SKIPPED))

    restore_variant = restore

    def disk_bytes(self) -> int:
        """du of EARSHOT_HOME."""
        return disk_usage(self.home)

    def stats_disk_bytes(self) -> int:
        """``earshot stats --json``'s own ``disk_bytes``."""
        return int(self._run("stats")["disk_bytes"])

    def entries(self) -> int:
        """Entries recorded by the last snapshot (its JSON ``files``)."""
        return int(self.last_snapshot.get("files", -1))


class GitTool:
    """Shadow git: a GIT_DIR outside the tree, a fresh one per store."""

    name = "git"

    def __init__(self, tree: Path, stores: Path) -> None:
        self.tree = tree
        self.stores = stores
        self.home = stores / "git-home"
        self.home.mkdir(parents=True, exist_ok=True)
        self.generation = 0
        self.repo = ShadowGit(tree, stores / "git-dir-0", home=self.home)

    def reset_store(self) -> None:
        """A new repository (``git init`` and config are not timed)."""
        self.generation += 1
        self.repo = ShadowGit(self.tree, self.stores / f"git-dir-{self.generation}", self.home)
        self.repo.init()

    def snapshot(self, message: str) -> str:
        return self.repo.snapshot(message)

    def restore(self, ref: str) -> None:
        """read-tree + checkout-index -a -f."""
        self.repo.restore(ref)

    def restore_variant(self, ref: str) -> None:
        """reset --hard + clean -fdq."""
        self.repo.restore_reset_clean(ref)

    def disk_bytes(self) -> int:
        return self.repo.disk_bytes()

    def entries(self) -> int:
        return self.repo.git("ls-files", "-z").count("\0")


# --------------------------------------------------------------------------
# Results


@dataclass
class Scenario:
    """The samples of one scenario, per tool."""

    key: str
    title: str
    unit: str  # "s" or "bytes"
    samples: dict[str, list[float]] = field(default_factory=dict)
    note: str = ""
    #: Each earshot's own "seconds" (its --json), by tool name.
    reported: dict[str, list[float]] = field(default_factory=dict)

    def add(self, tool: Tool, value: float) -> None:
        self.samples.setdefault(tool.name, []).append(value)
        if self.unit == "s" and isinstance(tool, EarshotTool) and tool.last_seconds is not None:
            self.reported.setdefault(tool.name, []).append(tool.last_seconds)

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"key": self.key, "title": self.title, "unit": self.unit}
        for tool in ("earshot", "git"):
            doc[tool] = summarize(self.samples[tool]) if tool in self.samples else None
        e, g = doc["earshot"], doc["git"]
        doc["ratio"] = round(e["median"] / g["median"], 4) if e and g and g["median"] else None
        if "base" in self.samples:  # the code before a change, timed in the same run
            b = doc["base"] = summarize(self.samples["base"])
            doc["vs_base"] = round(e["median"] / b["median"], 4) if e and b["median"] else None
        if self.note:
            doc["note"] = self.note
        for name, reported in self.reported.items():
            doc[f"{name}_reported_seconds"] = summarize(reported)
        return doc


def summarize(values: list[float]) -> dict[str, Any]:
    """Median, min, max and the raw samples."""
    return {
        "median": statistics.median(values),
        "min": min(values),
        "max": max(values),
        "n": len(values),
        "samples": [round(v, 6) for v in values],
    }


def fmt_value(value: float, unit: str) -> str:
    """Seconds as ms or s; bytes as MiB."""
    if unit == "bytes":
        return f"{value / 2**20:,.1f} MiB"
    return f"{value * 1000:.0f} ms" if value < 1 else f"{value:.2f} s"


def markdown_table(size: dict[str, Any]) -> str:
    """One size's scenarios as a Markdown table."""
    base = any("base" in sc for sc in size["scenarios"])
    tools = ("earshot", "base", "git") if base else ("earshot", "git")
    rows = [
        f"### {size['files']:,} files ({size['tree']['bytes'] / 2**20:,.0f} MiB)",
        "",
        "| scenario | "
        + " | ".join(f"{t} median (min-max)" for t in tools)
        + " | earshot/git |"
        + (" earshot/base |" if base else ""),
        "|---|" + "---|" * (len(tools) + 1 + base),
    ]
    for sc in size["scenarios"]:
        cells = []
        for tool in tools:
            s = sc.get(tool)
            cells.append(
                "-"
                if s is None
                else f"{fmt_value(s['median'], sc['unit'])} "
                f"({fmt_value(s['min'], sc['unit'])}-{fmt_value(s['max'], sc['unit'])})"
            )
        ratio = f"{sc['ratio']:.2f}" if sc["ratio"] is not None else "-"
        vs_base = ""
        if base:
            vs_base = f" {sc['vs_base']:.2f} |" if sc.get("vs_base") is not None else " - |"
        rows.append(f"| {sc['title']} | {' | '.join(cells)} | {ratio} |{vs_base}")
    return "\n".join(rows)


# --------------------------------------------------------------------------
# Machine description


def _cmd(*argv: str) -> str:
    try:
        out = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"unavailable ({exc})"
    return (out.stdout or out.stderr).strip()


def _proc_field(path: str, key: str) -> str:
    try:
        for line in Path(path).read_text().splitlines():
            if line.startswith(key):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown"


def _mount_type(path: Path) -> str:
    """The filesystem type of the mount holding ``path``, from /proc/mounts."""
    best, kind = "", "unknown"
    real = os.path.realpath(path)
    try:
        lines = Path("/proc/mounts").read_text().splitlines()
    except OSError:
        return kind
    for line in lines:
        parts = line.split()
        if len(parts) < 3 or len(parts[1]) < len(best):
            continue
        if real == parts[1] or real.startswith(parts[1].rstrip("/") + "/"):
            best, kind = parts[1], parts[2]
    return kind


def machine_info(work_dir: Path, earshot_exe: str | None) -> dict[str, Any]:
    """nproc, CPU, RAM, the work dir's filesystem, and the tools' versions."""
    return {
        "nproc": len(os.sched_getaffinity(0)),
        "cpu_model": _proc_field("/proc/cpuinfo", "model name"),
        "ram": _proc_field("/proc/meminfo", "MemTotal"),
        "kernel": platform.release(),
        "work_dir": str(work_dir),
        "work_dir_fs": _cmd("stat", "-f", "-c", "%T", str(work_dir)),
        "work_dir_mount_type": _mount_type(work_dir),
        "python": platform.python_version(),
        "git": _cmd("git", "--version"),
        "earshot": _cmd(earshot_exe, "--version") if earshot_exe else None,
        "loadavg_start": os.getloadavg(),
    }


# --------------------------------------------------------------------------
# Running the scenarios


def timed(action: Callable[[], object], sync: bool) -> float:
    """Wall seconds of ``action()``; first flush dirty pages so earlier writes don't bill it."""
    return timed_cpu(action, sync)[0]


def timed_cpu(action: Callable[[], object], sync: bool) -> tuple[float, float]:
    """Wall seconds of ``action()`` and the CPU seconds (user + sys) of the processes it
    ran and waited for: on a busy machine the second grows far less than the first."""
    if sync:
        os.sync()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    action()
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    return wall, cpu


def _restore(snaps: dict[str, str], tool: Tool) -> None:
    tool.restore(snaps[tool.name])


def _restore_variant(snaps: dict[str, str], tool: Tool) -> None:
    tool.restore_variant(snaps[tool.name])


def alternate(tools: Sequence[Tool], repeat: int) -> Sequence[Tool]:
    """A B on even repeats, B A on odd ones: neither tool always goes first."""
    return tools if repeat % 2 == 0 else tools[::-1]


@dataclass
class SizeRun:
    """All scenarios of one tree size."""

    files: int
    args: argparse.Namespace
    tools: list[Tool]
    trees: list[Path]
    scenarios: list[Scenario] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)
    on_progress: Callable[[], None] = lambda: None

    def seed(self, scenario: int, repeat: int) -> int:
        return int(self.args.seed) * 1_000_003 + scenario * 1009 + repeat

    def scenario(self, key: str, title: str, unit: str = "s", note: str = "") -> Scenario:
        sc = Scenario(key, title, unit, note=note)
        self.scenarios.append(sc)
        return sc

    def mutate_all(self, count: int, seed: int) -> tuple[list[str], dict[str, bytes]]:
        """Apply the same edits to every tree; return the paths and their previous content."""
        paths: list[str] | None = None
        before: dict[str, bytes] = {}
        for tree in self.trees:
            targets = gen_tree.choose_mutation_targets(tree, count, seed)
            if paths is not None and targets != paths:
                raise RuntimeError(f"trees diverged: {tree} would mutate other files")
            if paths is None:
                before = {p: (tree / p).read_bytes() for p in targets}
            paths = gen_tree.mutate(tree, count, seed)
        return paths or [], before

    def check_restored(self, tool: Tool, before: dict[str, bytes]) -> None:
        """The edited files hold their pre-edit content again, else stop: a timing is void."""
        bad = [p for p, data in before.items() if (tool.tree / p).read_bytes() != data]
        if bad:
            raise RuntimeError(f"{tool.name} restore left {len(bad)} files wrong, e.g. {bad[:3]}")

    def time_each(self, sc: Scenario, repeat: int, action: Callable[[Tool], object]) -> None:
        for tool in alternate(self.tools, repeat):
            seconds = timed(partial(action, tool), self.args.sync)
            sc.add(tool, seconds)
            log(f"{self.files} files: {sc.key} #{repeat + 1} {tool.name} {seconds:.3f} s")
        self.on_progress()

    # -- scenarios --------------------------------------------------------

    def cold(self) -> None:
        sc = self.scenario("cold_snapshot", "snapshot, cold (fresh store)")
        cpu = self.scenario(
            "cold_snapshot_cpu",
            "snapshot, cold: CPU (user + sys)",
            "cpu s",
            note="user + sys of the command and its children (git: add and commit)",
        )
        size = self.scenario("store_size_cold", "store size after cold snapshot (du)", "bytes")
        own = self.scenario(
            "store_size_cold_stats",
            "store size after cold snapshot (earshot: stats disk_bytes; git: du)",
            "bytes",
        )
        for r in range(self.args.cold_repeat):
            for tool in alternate(self.tools, r):
                tool.reset_store()
                load = os.getloadavg()[0]
                seconds, cpu_seconds = timed_cpu(partial(tool.snapshot, "cold"), self.args.sync)
                sc.add(tool, seconds)
                cpu.add(tool, cpu_seconds)
                self.extra.setdefault("cold_load1", {}).setdefault(tool.name, []).append(load)
                size.add(tool, tool.disk_bytes())
                own.add(tool, size.samples[tool.name][-1])
                if isinstance(tool, EarshotTool):
                    own.samples[tool.name][-1] = tool.stats_disk_bytes()
                log(
                    f"{self.files} files: cold #{r + 1} {tool.name} {seconds:.3f} s "
                    f"(cpu {cpu_seconds:.3f} s, load {load:.2f})"
                )
            self.on_progress()
        self.extra["entries_recorded"] = {t.name: t.entries() for t in self.tools}

    def no_change(self) -> None:
        sc = self.scenario("nochange_snapshot", "snapshot, no change")
        for r in range(self.args.repeat):
            self.time_each(sc, r, lambda t: t.snapshot("no change"))
        self.on_progress()

    def changed(self, number: int, count: int) -> None:
        sc = self.scenario(f"snapshot_{count}_changed", f"snapshot after {count:,} changed files")
        for r in range(self.args.repeat):
            self.mutate_all(count, self.seed(number, r))
            self.time_each(sc, r, lambda t: t.snapshot(f"{count} changed"))
        self.on_progress()

    def restore(self, number: int, count: int) -> None:
        """Restore to S after S -> edit ``count`` files -> snapshot T; git both ways."""
        first = self.scenario(
            f"restore_{count}_checkout_index",
            f"restore, {count} files differ (git: read-tree + checkout-index -a -f)",
            note="git rewrites every tracked file and leaves the index without stat data",
        )
        second = self.scenario(
            f"restore_{count}_reset_clean",
            f"restore, {count} files differ (git: reset --hard + clean -fdq)",
            note="earshot runs the same restore again (from T to S)",
        )
        for r in range(self.args.repeat):
            snaps = {t.name: t.snapshot("S") for t in self.tools}
            _, before = self.mutate_all(count, self.seed(number, r))
            later = {t.name: t.snapshot("T") for t in self.tools}
            self.time_each(first, r, partial(_restore, snaps))
            for tool in self.tools:
                self.check_restored(tool, before)
                tool.restore_variant(later[tool.name])  # back to T, untimed
            self.time_each(second, r, partial(_restore_variant, snaps))
            for tool in self.tools:
                self.check_restored(tool, before)
        self.on_progress()

    def final_size(self) -> None:
        size = self.scenario("store_size_end", "store size at the end (du)", "bytes")
        for tool in self.tools:
            size.add(tool, tool.disk_bytes())

    def run_all(self) -> None:
        self.cold()
        self.no_change()
        for i, count in enumerate(self.args.changes, start=1):
            self.changed(i, min(count, self.files // 2))
        self.restore(100, min(self.args.restore_changes, self.files // 2))
        self.final_size()


# --------------------------------------------------------------------------
# Orchestration


def make_trees(
    work: Path, files: int, seed: int, names: Sequence[str], source: Path | None = None
) -> tuple[list[Path], float]:
    """One identical tree per name (generated, or a copy of ``source``); the mean seconds."""
    trees, seconds = [], []
    for name in names:
        tree = work / f"tree-{name}"
        start = time.perf_counter()
        if source is not None:
            subprocess.run(["cp", "-a", str(source), str(tree)], check=True)
        else:
            gen_tree.generate(tree, files, seed)
        seconds.append(time.perf_counter() - start)
        trees.append(tree)
        log(f"{files} files: generated {tree} in {seconds[-1]:.1f} s")
    return trees, statistics.mean(seconds)


def bench_size(
    files: int, args: argparse.Namespace, on_progress: Callable[[dict[str, Any]], None]
) -> dict[str, Any]:
    """Generate the trees for ``files``, run every scenario, return this size's results."""
    work = args.work_dir / f"files-{files}-seed-{args.seed}"
    if work.exists():
        log(f"removing the previous {work}")
        shutil.rmtree(work)
    work.mkdir(parents=True)
    names = ["git"] if args.peer_only else ["earshot", "git"]
    if args.base and not args.peer_only:
        names.insert(1, "base")
    trees, gen_seconds = make_trees(work, files, args.seed, names, args.tree)
    tree_doc: dict[str, Any] = {
        **gen_tree.describe(trees[0], compression=args.compression),
        "seed": args.seed,
        "generate_seconds": round(gen_seconds, 2),
    }
    stores = work / "stores"
    tools: list[Tool] = [GitTool(trees[-1], stores)]
    if not args.peer_only:
        tools.insert(0, EarshotTool(args.earshot, trees[0], stores))
    if args.base and not args.peer_only:
        tools.insert(1, EarshotTool(args.base, trees[1], stores, name="base"))
    result: dict[str, Any] = {"files": files, "tree": tree_doc, "scenarios": []}
    run = SizeRun(files, args, tools, trees)

    def progress() -> None:
        result["scenarios"] = [sc.to_json() for sc in run.scenarios]
        result["extra"] = run.extra
        on_progress(result)

    run.on_progress = progress
    run.run_all()
    progress()
    if not args.keep_work:
        log(f"removing {work}")
        shutil.rmtree(work, ignore_errors=True)
    return result


def default_earshot() -> str | None:
    """The venv's console script next to this interpreter, else the one on PATH."""
    beside = Path(sys.executable).parent / "earshot"
    return str(beside) if beside.exists() else shutil.which("earshot")


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--files", type=int, nargs="+", default=[10_000], help="tree sizes")
    p.add_argument("--seed", type=int, default=1, help="tree and edit seed")
    p.add_argument("--repeat", type=int, default=5, help="repeats of the warm scenarios")
    p.add_argument(
        "--cold-repeat", type=int, help="repeats of the cold snapshot (default: --repeat)"
    )
    p.add_argument("--changes", type=int, nargs="+", default=[10, 1000], help="edits per snapshot")
    p.add_argument("--restore-changes", type=int, default=10, help="files the restore undoes")
    p.add_argument("--out", type=Path, default=BENCH_DIR / "results-store.json")
    p.add_argument("--work-dir", type=Path, default=BENCH_DIR / "work")
    p.add_argument("--peer-only", action="store_true", help="time git only")
    p.add_argument("--earshot", default=default_earshot(), help="the earshot executable")
    p.add_argument(
        "--base", default=None, help="another earshot (the code before a change), timed too"
    )
    p.add_argument(
        "--tree", type=Path, default=None, help="a real tree to copy, instead of generating one"
    )
    p.add_argument("--keep-work", action="store_true", help="keep trees and stores afterwards")
    p.add_argument(
        "--no-sync", dest="sync", action="store_false", help="no os.sync() before each timing"
    )
    p.add_argument(
        "--compression", action="store_true", help="measure the tree's text compression (slow)"
    )
    args = p.parse_args(argv)
    if args.cold_repeat is None:
        args.cold_repeat = args.repeat
    if not args.peer_only and not args.earshot:
        p.error("no earshot executable found; pass --earshot or --peer-only")
    args.work_dir = args.work_dir.absolute()
    if args.tree is not None:  # one size: the real tree's
        args.files = [sum(len(f) for _, _, f in os.walk(args.tree))]
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    args.work_dir.mkdir(parents=True, exist_ok=True)
    doc: dict[str, Any] = {
        "benchmark": "bench_store",
        "started": datetime.now(UTC).isoformat(timespec="seconds"),
        "config": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
        "machine": machine_info(args.work_dir, None if args.peer_only else args.earshot),
        "sizes": [],
    }

    def save(partial: dict[str, Any] | None = None) -> None:
        sizes = doc["sizes"] + ([partial] if partial else [])
        args.out.write_text(json.dumps({**doc, "sizes": sizes}, indent=2) + "\n")

    for files in args.files:
        log(f"=== {files} files ===")
        doc["sizes"].append(bench_size(files, args, save))
        print(markdown_table(doc["sizes"][-1]) + "\n", flush=True)
    doc["finished"] = datetime.now(UTC).isoformat(timespec="seconds")
    doc["machine"]["loadavg_end"] = os.getloadavg()
    save()
    print(machine_markdown(doc["machine"]))
    log(f"wrote {args.out}")
    return 0


def machine_markdown(machine: dict[str, Any]) -> str:
    """The machine block as a Markdown list."""
    return "\n".join(f"- {key}: {value}" for key, value in machine.items())


if __name__ == "__main__":
    sys.exit(main())
