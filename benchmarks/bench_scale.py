"""How a daemon-backed call scales with the tree: 10,000 files against 1,000,000.

The tree is many small source-like files (64-1,024 bytes, 50 per directory,
directories three deep), so a million files fit in a few GB and a first
snapshot takes minutes, not hours; the per-call cost this measures does
not depend on file sizes. For each size: a first snapshot, the daemon's
start (until it answers) and its memory, then ``--repeat`` rounds of the
calls an agent makes, each a whole ``earshot`` process through the daemon:
``bash 'true'``, a one-file ``write``, an ``exec`` batch of 10 writes, and
the undo of a 10-file batch. The ratio is the large tree's median over the
small tree's.

    python benchmarks/bench_scale.py --files 10000 1000000 --repeat 10 \\
        --out benchmarks/results-scale.json
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_store import (
    BENCH_DIR,
    default_earshot,
    log,
    machine_info,
    machine_markdown,
    summarize,
)

PER_DIR = 50
FANOUT = 40


def make_tree(root: Path, files: int, seed: int = 1) -> None:
    """``files`` small files, ``PER_DIR`` to a directory, three levels of ``FANOUT``."""
    rng = random.Random(seed)
    words = [f"w{i}" for i in range(500)]
    for i in range(files):
        d, n = divmod(i, PER_DIR)
        a, b = divmod(d, FANOUT)
        a, c = divmod(a, FANOUT)
        where = root / f"p{a}" / f"q{c}" / f"r{b}"
        if n == 0:
            where.mkdir(parents=True, exist_ok=True)
        size = rng.randrange(64, 1024)
        text = " ".join(rng.choice(words) for _ in range(size // 4))[:size]
        (where / f"f{n}.txt").write_text(text + "\n")


class Calls:
    """One session of the earshot CLI on one tree, through its daemon."""

    def __init__(self, exe: str, tree: Path, home: Path) -> None:
        self.exe, self.tree = exe, tree
        self.env = dict(os.environ, EARSHOT_HOME=str(home), EARSHOT_WATCH="always")

    def run(self, *argv: str, stdin: bytes = b"", ok: tuple[int, ...] = (0,)) -> float:
        start = time.perf_counter()
        out = subprocess.run(
            [self.exe, *argv], cwd=self.tree, env=self.env, input=stdin, capture_output=True
        )
        elapsed = time.perf_counter() - start
        if out.returncode not in ok:
            raise RuntimeError(f"earshot {' '.join(argv)}: {out.stderr.decode()}")
        return elapsed

    def status(self) -> dict[str, Any]:
        out = subprocess.run(
            [self.exe, "watch", "--status", "--json"],
            cwd=self.tree,
            env=self.env,
            capture_output=True,
            check=True,
        )
        doc: dict[str, Any] = json.loads(out.stdout)
        return doc


def rss_mib(pid: int) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


SCENARIOS = (
    ("bash_true", "`bash 'true'`"),
    ("write_one", "one-file `write`"),
    ("exec_ten", "`exec` of 10 write_file calls"),
    ("undo_ten", "undo of a 10-file batch"),
)


def bench_size(files: int, args: argparse.Namespace, exe: str) -> dict[str, Any]:
    work = Path(args.work) / f"scale-{files}"
    tree, home = work / "tree", work / "home"
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    log(f"making {files:,} files")
    start = time.perf_counter()
    make_tree(tree, files)
    made_s = time.perf_counter() - start
    calls = Calls(exe, tree, home)
    calls.env["EARSHOT_SESSION"] = (
        subprocess.run(
            [exe, "session", "new"], cwd=tree, env=calls.env, capture_output=True, check=True
        )
        .stdout.decode()
        .strip()
    )
    log("first snapshot (no daemon)")
    calls.env["EARSHOT_WATCH"] = "never"  # else the snapshot itself starts the daemon
    cold_s = calls.run("snapshot", "-m", "first")
    calls.env["EARSHOT_WATCH"] = "always"
    log("starting the daemon")
    start = time.perf_counter()
    calls.run("watch")
    daemon_start_s = time.perf_counter() - start
    calls.run("bash", "true")  # the first batch leaves the watch mark
    time.sleep(2.5)  # past the racy-entry margin, as real trees are
    samples: dict[str, list[float]] = {key: [] for key, _ in SCENARIOS}
    targets = [f"p0/q0/r{i}/f3.txt" for i in range(10)]
    for r in range(args.repeat):
        log(f"{files:,} files, round {r + 1}/{args.repeat}")
        samples["bash_true"].append(calls.run("bash", "true"))
        samples["write_one"].append(calls.run("write", f"note-{r}.txt", stdin=b"x\n" * 40))
        batch = [
            {"tool": "write_file", "path": f"batch-{r}-{i}.txt", "content": "y\n" * 30}
            for i in range(10)
        ]
        samples["exec_ten"].append(calls.run("exec", stdin=json.dumps(batch).encode()))
        edit = " ".join(f"'{t}'" for t in targets)
        calls.run("bash", f"for f in {edit}; do echo 'edit {r}' >> \"$f\"; done")
        samples["undo_ten"].append(calls.run("undo", ok=(0, 3)))
    status = calls.status()
    doc = {
        "files": files,
        "make_s": round(made_s, 2),
        "first_snapshot_s": round(cold_s, 2),
        "daemon_start_s": round(daemon_start_s, 3),
        "daemon_rss_mib": rss_mib(int(status["pid"])),
        "watches": status.get("watches"),
        "hosted_calls": status.get("hosted_calls"),
        "scenarios": {key: summarize(v) for key, v in samples.items()},
    }
    calls.run("watch", "--stop", ok=(0, 1))
    if not args.keep:
        shutil.rmtree(work)
    return doc


def markdown(sizes: list[dict[str, Any]]) -> str:
    small, large = sizes[0], sizes[-1]

    def cell(s: dict[str, Any]) -> str:
        return f"{s['median'] * 1000:.0f} ms ({s['min'] * 1000:.0f}-{s['max'] * 1000:.0f})"

    rows = [
        f"| call, through the daemon | {small['files']:,} files | {large['files']:,} files "
        "| ratio |",
        "|---|---|---|---|",
    ]
    for key, title in SCENARIOS:
        a, b = small["scenarios"][key], large["scenarios"][key]
        rows.append(f"| {title} | {cell(a)} | {cell(b)} | {b['median'] / a['median']:.2f} |")
    for label, key in (
        ("first snapshot", "first_snapshot_s"),
        ("daemon start (`earshot watch`: every watch placed)", "daemon_start_s"),
    ):
        rows.append(f"| {label} | {small[key]:.2f} s | {large[key]:.2f} s | |")
    rows.append(
        f"| daemon RSS, watches | {small['daemon_rss_mib']:.0f} MiB, {small['watches']:,} "
        f"| {large['daemon_rss_mib']:.0f} MiB, {large['watches']:,} | |"
    )
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, nargs="+", default=[10_000, 1_000_000])
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("--work", default=str(BENCH_DIR / "work"))
    parser.add_argument("--out", default=str(BENCH_DIR / "results-scale.json"))
    parser.add_argument("--earshot", default=default_earshot())
    parser.add_argument("--keep", action="store_true", help="keep the trees afterwards")
    args = parser.parse_args(argv)
    if args.earshot is None:
        print("earshot is not installed beside this python", file=sys.stderr)
        return 2
    Path(args.work).mkdir(parents=True, exist_ok=True)
    machine = machine_info(Path(args.work), args.earshot)
    sizes = [bench_size(files, args, args.earshot) for files in args.files]
    Path(args.out).write_text(json.dumps({"machine": machine, "sizes": sizes}, indent=2) + "\n")
    print(machine_markdown(machine))
    print()
    print(markdown(sizes))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
