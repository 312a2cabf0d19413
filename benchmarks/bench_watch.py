"""The watcher's costs: daemon start-up and memory, and the answer to "what changed?".

On generated trees (gen_tree.py, cached under ``--work-dir`` and reused), for
each size:

- **start**: ``start_daemon`` until the daemon answers (every watch placed),
  as a fresh process each time; its RSS (VmRSS) and peak (VmHWM) after 40
  calls; the inotify watches it holds against fs.inotify.max_user_watches.
- **call (daemon)**: a call that changed 10 files: ``token`` before,
  ``mutate(10)``, then ``advance(token)`` over the socket (the cookie sync
  point included), checked to name all 10.
- **burst**: the same for a call that edited 1,000 files (the consumer's
  throughput: the answer waits for every event before the cookie).
- **call (fresh client)**: the same question asked by a new Python process
  (import of ``watch_client`` + one round trip), which is what a CLI call
  pays on top of Python's own start-up.
- **call (in-process)**: the same with a ``Watcher`` in this process (the
  library API), and its start-up.
- **full restage (no change)**: the cost the watcher replaces, to place the
  ``auto`` threshold (the restage budget, 200 ms).

    python benchmarks/bench_watch.py --files 10000 100000 --repeat 5 --calls 40

Plain Python, subprocess and time.perf_counter; medians with min-max.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import gen_tree

from earshot.agent.watch import client as wc

WORK = Path("/tmp/earshot-watch-bench")


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def summary(values: list[float], unit: str = "ms", scale: float = 1e3) -> dict[str, Any]:
    xs = sorted(v * scale for v in values)
    p95 = xs[-(-len(xs) * 95 // 100) - 1]
    return {
        "n": len(xs),
        "median": round(statistics.median(xs), 3),
        "p95": round(p95, 3),
        "min": round(xs[0], 3),
        "max": round(xs[-1], 3),
        "unit": unit,
    }


def show(label: str, s: dict[str, Any]) -> str:
    return (
        f"  {label:<34} median {s['median']:>9.2f} {s['unit']}  p95 {s['p95']:>9.2f}"
        f"  (min {s['min']:.2f} - max {s['max']:.2f}, n={s['n']})"
    )


def tree_for(files: int, seed: int, work: Path) -> Path:
    base = work / f"files-{files}-seed-{seed}"
    if not (base / ".complete").exists():
        shutil.rmtree(base, ignore_errors=True)
        log(f"generating {files:,} files in {base}")
        gen_tree.generate(base / "tree", files, seed)
        (base / ".complete").write_text("ok\n")
    return base / "tree"


def count_dirs(root: Path) -> int:
    return sum(1 for _ in os.walk(root))


def memory_kib(pid: int) -> dict[str, int]:
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                out[key] = int(value.split()[0])
    return out


def one_call(tracker: Any, root: Path, seed: int) -> float:
    """A call that edits 10 files; the time to learn exactly which."""
    token = tracker.token()
    changed = set(gen_tree.mutate(root, 10, seed))
    start = time.perf_counter()
    seen, _ = tracker.advance(token)
    elapsed = time.perf_counter() - start
    assert seen is not None and changed <= seen, (changed, seen)
    return elapsed


CLIENT = """
import sys, time
t0 = time.perf_counter()
from earshot.agent.watch.client import DaemonTracker
t1 = time.perf_counter()
tracker = DaemonTracker(sys.argv[1], __import__("pathlib").Path(sys.argv[2]))
token = tracker.token()
seen = tracker.changed_since(token)
t2 = time.perf_counter()
assert seen == set(), seen
print(t1 - t0, t2 - t1)
"""


def bench_size(files: int, args: argparse.Namespace) -> dict[str, Any]:
    root = tree_for(files, args.seed, args.work_dir)
    home = args.work_dir / f"home-{files}"
    paths = wc.daemon_paths(root, home)
    wc.stop_daemon(paths)
    result: dict[str, Any] = {"files": files, "dirs": count_dirs(root)}

    starts, mem = [], {}
    for i in range(args.repeat):
        t0 = time.perf_counter()
        pid, ready = wc.start_daemon(paths, idle_timeout=600, wait=300)
        starts.append(time.perf_counter() - t0)
        assert pid and ready, paths.log.read_text()
        if i < args.repeat - 1:
            wc.stop_daemon(paths)
    status = wc.daemon_status(paths) or {}
    result["watches"] = status.get("watches")
    result["max_user_watches"] = status.get("max_user_watches")
    result["start"] = summary(starts)

    tracker = wc.DaemonTracker(root, home)
    seed = args.seed * 1000
    for _ in range(3):  # warm the page cache for the edited files
        seed += 1
        one_call(tracker, root, seed)
    calls = []
    for _ in range(args.calls):
        seed += 1
        calls.append(one_call(tracker, root, seed))
    tokens = []
    for _ in range(args.calls):
        t0 = time.perf_counter()
        tracker.token()
        tokens.append(time.perf_counter() - t0)
    bursts = []
    for _ in range(max(3, args.repeat)):
        seed += 1
        token = tracker.token()
        changed = set(gen_tree.mutate(root, 1000, seed))
        start = time.perf_counter()
        seen, _ = tracker.advance(token)
        bursts.append(time.perf_counter() - start)
        assert seen is not None and changed <= seen
    result["burst_daemon"] = summary(bursts)
    result["call_daemon"] = summary(calls)
    result["token_daemon"] = summary(tokens)
    mem = memory_kib(wc.daemon_pid(paths) or 0)
    result["daemon_rss_mib"] = round(mem["VmRSS"] / 1024, 1)
    result["daemon_peak_rss_mib"] = round(mem["VmHWM"] / 1024, 1)
    tracker.close()

    imports, asks, procs = [], [], []
    for _ in range(args.repeat * 2):
        t0 = time.perf_counter()
        run = subprocess.run(
            [sys.executable, "-c", CLIENT, str(root), str(home)],
            capture_output=True,
            text=True,
            check=True,
        )
        procs.append(time.perf_counter() - t0)
        imp, rt = (float(x) for x in run.stdout.split())
        imports.append(imp)
        asks.append(rt)
    result["client_process"] = summary(procs)
    result["client_import"] = summary(imports)
    result["client_token_and_changed_since"] = summary(asks)
    wc.stop_daemon(paths)

    from earshot.agent.watch.watcher import Watcher

    in_starts, in_calls = [], []
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        watcher = Watcher(root, paths.store).start()
        in_starts.append(time.perf_counter() - t0)
        watcher.stop()
    with Watcher(root, paths.store) as watcher:
        for _ in range(args.calls):
            seed += 1
            token = watcher.token()
            changed = set(gen_tree.mutate(root, 10, seed))
            t0 = time.perf_counter()
            seen, _ = watcher.advance(token)
            in_calls.append(time.perf_counter() - t0)
            assert seen is not None and changed <= seen
    result["start_in_process"] = summary(in_starts)
    result["call_in_process"] = summary(in_calls)

    from earshot.cas.project import Project

    restages = []
    with Project(root, home=home) as project:
        project.record(None, listed=False)  # first: fills the stat cache
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            project.record(None, listed=False)
            restages.append(time.perf_counter() - t0)
    result["full_restage_no_change"] = summary(restages)
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--calls", type=int, default=40)
    parser.add_argument("--work-dir", type=Path, default=WORK)
    parser.add_argument("--out", type=Path, default=None, help="also write the results as JSON")
    args = parser.parse_args(argv)
    results = []
    for files in args.files:
        log(f"{files:,} files")
        r = bench_size(files, args)
        results.append(r)
        print(
            f"\n{files:,} files, {r['dirs']:,} directories: daemon holds {r['watches']:,} "
            f"inotify watches (limit {r['max_user_watches']:,}); "
            f"RSS {r['daemon_rss_mib']} MiB (peak {r['daemon_peak_rss_mib']} MiB)"
        )
        for key, label in (
            ("start", "daemon start until it answers"),
            ("call_daemon", "10-file call: advance() via socket"),
            ("token_daemon", "token() via socket"),
            ("burst_daemon", "1,000-file call: advance() via socket"),
            ("client_process", "fresh client process, total"),
            ("client_import", "  import watch_client"),
            ("client_token_and_changed_since", "  connect + token + changed_since"),
            ("start_in_process", "Watcher.start() in process"),
            ("call_in_process", "10-file call: advance() in process"),
            ("full_restage_no_change", "full restage, no change (replaced)"),
        ):
            print(show(label, r[key]))
        sys.stdout.flush()
        if args.out:
            args.out.write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
