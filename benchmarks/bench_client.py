"""Where a daemon-backed call's time goes, against a bare interpreter's start-up.

On one generated tree with its daemon running, alternating, ``--repeat``
times each, every one a whole process:

- ``python3 -c 'import socket, json, subprocess'``: the floor for any
  Python client (the interpreter the earshot script runs on);
- ``import earshot.cli.entry``: the thin client's own imports;
- ``earshot watch --status``: not hosted (the full CLI in-process);
- ``earshot log``: hosted, reads only (client, hello, a forked worker);
- ``earshot write F``: hosted, one batch (the worker's LMDB commits);
- ``earshot bash 'true'``: hosted, one batch whose command the client runs.

    python benchmarks/bench_client.py --files 10000 --repeat 20
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
from bench_store import BENCH_DIR, default_earshot, log, machine_info, machine_markdown


def interpreter_of(script: str) -> str:
    """The interpreter a console script runs on (its #! line)."""
    with open(script, "rb") as f:
        first = f.readline().decode().strip()
    return first[2:].strip() if first.startswith("#!") else sys.executable


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--work", default=str(BENCH_DIR / "work"))
    parser.add_argument("--out", default=str(BENCH_DIR / "results-client.json"))
    parser.add_argument("--earshot", default=default_earshot())
    args = parser.parse_args(argv)
    exe = args.earshot
    if exe is None:
        print("earshot is not installed beside this python", file=sys.stderr)
        return 2
    python = interpreter_of(exe)
    work = Path(args.work) / f"client-{args.files}"
    if work.exists():
        shutil.rmtree(work)
    tree, home = work / "tree", work / "home"
    log(f"generating {args.files:,} files")
    gen_tree.generate(tree, args.files, 1)
    env = dict(os.environ, EARSHOT_HOME=str(home), EARSHOT_WATCH="always")
    env["EARSHOT_SESSION"] = (
        subprocess.run([exe, "session", "new"], cwd=tree, env=env, capture_output=True, check=True)
        .stdout.decode()
        .strip()
    )

    def run(argv: list[str], stdin: bytes = b"") -> float:
        start = time.perf_counter()
        subprocess.run(argv, cwd=tree, env=env, input=stdin, capture_output=True, check=True)
        return time.perf_counter() - start

    run([exe, "snapshot"])
    run([exe, "watch"])
    run([exe, "bash", "true"])  # leaves the watch mark
    time.sleep(2.5)
    steps: list[tuple[str, list[str], bytes]] = [
        ("python floor", [python, "-c", "import socket, json, subprocess"], b""),
        ("client imports", [python, "-c", "import earshot.cli.entry"], b""),
        ("`watch --status` (in-process)", [exe, "watch", "--status"], b""),
        ("`log` (hosted, reads)", [exe, "log"], b""),
        ("`write` (hosted, a batch)", [exe, "write", "note.txt"], b"x\n"),
        ("`bash 'true'` (hosted, a batch)", [exe, "bash", "true"], b""),
    ]
    samples: dict[str, list[float]] = {name: [] for name, _, _ in steps}
    for r in range(args.repeat):
        order = steps if r % 2 == 0 else steps[::-1]
        for name, argv_, stdin in order:
            samples[name].append(run(argv_, stdin))
    run([exe, "watch", "--stop"])
    summary: dict[str, Any] = {
        name: {
            "median": statistics.median(v),
            "min": min(v),
            "max": max(v),
            "samples": [round(x, 6) for x in v],
        }
        for name, v in samples.items()
    }
    machine = machine_info(Path(args.work), exe)
    doc = {"machine": machine, "files": args.files, "steps": summary}
    Path(args.out).write_text(json.dumps(doc, indent=2) + "\n")
    shutil.rmtree(work)
    print(machine_markdown(machine))
    print()
    floor = summary["python floor"]["median"]
    print(f"| process ({args.files:,} files, daemon running) | median (min-max) | over the floor |")
    print("|---|---|---|")
    for name, s in summary.items():
        print(
            f"| {name} | {s['median'] * 1000:.0f} ms ({s['min'] * 1000:.0f}-"
            f"{s['max'] * 1000:.0f}) | {(s['median'] - floor) * 1000:+.0f} ms |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
