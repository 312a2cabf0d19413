"""Per-batch checkpoint overhead through the library, with an in-process watcher.

One process holds an ``Engine`` whose tracker is a ``Watcher`` on the root, as
an agent embedding earshot would. For each batch kind the overhead is the
batch's time minus the same work done bare (the write, or the command run by
the same shell); the peer's figure is shadow git's add -A + commit on an
identical tree, timed in the same run, alternating. Trees are generated with
gen_tree.py (or reused from ``--work``).

    python benchmarks/bench_engine_watch.py --files 10000 100000 --repeat 15
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import gen_tree
from bench_store import BENCH_DIR, log, machine_info, machine_markdown
from shadow_git import ShadowGit

from earshot.agent.core.calls import Bash, WriteFile
from earshot.agent.core.engine import Engine, shell_argv
from earshot.agent.core.records import TABLES
from earshot.agent.core.sessions import create_session
from earshot.agent.watch.watcher import Watcher
from earshot.cas.paths import checkpoints_dir
from earshot.cas.project import Project

TEN = "mkdir -p b{r} && for i in 0 1 2 3 4 5 6 7 8 9; do echo $i > b{r}/f$i.txt; done"


def stats(values: list[float]) -> dict[str, float]:
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def tree_for(work: Path, name: str, files: int, seed: int) -> Path:
    tree = work / f"engine-{files}" / name
    if not tree.exists():
        log(f"generating {files:,} files into {tree}")
        gen_tree.generate(tree, files, seed)
    return tree


def bench(files: int, args: argparse.Namespace) -> dict[str, Any]:
    work = Path(args.work)
    mine = tree_for(work, "earshot", files, args.seed)
    peer = tree_for(work, "git", files, args.seed)
    home = Path(tempfile.mkdtemp(prefix="earshot-home-"))
    git = ShadowGit(peer, Path(tempfile.mkdtemp(prefix="shadow-")) / "git")
    git.init()
    git.snapshot("start")
    project = Project(mine, home=home, extra_tables=TABLES)
    watcher = Watcher(str(project.root), str(checkpoints_dir(project.root, home)))
    start = time.perf_counter()
    watcher.start()
    start_s = time.perf_counter() - start
    engine = Engine(project, create_session(project).id, tracker=watcher, link_conversation=False)
    engine.run_batch([Bash("true")])  # the first call of the process: one full restage
    time.sleep(2.5)  # files written so far leave the racy window, as in a real session
    kinds: dict[str, list[float]] = {"write_file": [], "bash true": [], "bash 10 files": []}
    peer_times: list[float] = []
    for r in range(args.repeat):
        cases = [
            ("write_file", [WriteFile(f"w{r}.txt", b"x\n" * 40)], None),
            ("bash true", [Bash("true")], "true"),
            ("bash 10 files", [Bash(TEN.format(r=f"e{r}"))], TEN.format(r=f"p{r}")),
        ]
        for kind, calls, bare in cases:
            t0 = time.perf_counter()
            engine.run_batch(calls)
            batch = time.perf_counter() - t0
            t0 = time.perf_counter()
            if bare is None:
                (mine / f"bare{r}.txt").write_bytes(b"x\n" * 40)
            else:
                subprocess.run(shell_argv(bare), cwd=mine, check=True)
            kinds[kind].append(max(batch - (time.perf_counter() - t0), 0.0))
        t0 = time.perf_counter()
        git.snapshot(f"call {r}")
        peer_times.append(time.perf_counter() - t0)
    watcher.stop()
    project.close()
    git_median = statistics.median(peer_times)
    return {
        "files": files,
        "watcher_start_s": round(start_s, 3),
        "git_add_commit": stats(peer_times),
        "overhead": {
            kind: {**stats(v), "ratio_to_git": statistics.median(v) / git_median}
            for kind, v in kinds.items()
        },
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, nargs="+", default=[10_000])
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--work", default=str(BENCH_DIR / "work"))
    parser.add_argument("--out", default=str(BENCH_DIR / "results-engine-watch.json"))
    args = parser.parse_args()
    Path(args.work).mkdir(parents=True, exist_ok=True)
    machine = machine_info(Path(args.work), None)
    sizes = [bench(files, args) for files in args.files]
    Path(args.out).write_text(json.dumps({"machine": machine, "sizes": sizes}, indent=2) + "\n")
    print(machine_markdown(machine))
    for size in sizes:
        print(f"\n### {size['files']:,} files (watcher start {size['watcher_start_s']} s)\n")
        print("| batch | earshot overhead median (min-max) | git add -A + commit | ratio |")
        print("|---|---|---|---|")
        g = size["git_add_commit"]
        for kind, o in size["overhead"].items():
            print(
                f"| {kind} | {o['median'] * 1000:.1f} ms ({o['min'] * 1000:.1f}-"
                f"{o['max'] * 1000:.1f}) | {g['median'] * 1000:.0f} ms | {o['ratio_to_git']:.3f} |"
            )
    if len(sizes) == 2:
        for kind in sizes[0]["overhead"]:
            a, b = (s["overhead"][kind]["median"] for s in sizes)
            print(f"{kind}: {sizes[1]['files']:,} vs {sizes[0]['files']:,} files: {b / a:.2f}x")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("EARSHOT_WATCH", "never")
    raise SystemExit(main())
