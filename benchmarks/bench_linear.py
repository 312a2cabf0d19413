"""Costs that must grow with the work, not faster: a batch of N writes, an undo of N deletes.

An ``earshot exec`` batch of N write_file calls, and an ``earshot undo`` of a
command that deleted N files, at N, 2N, 4N, ... Each is timed beside
``cp -a`` of the same files (the least any tool must spend writing them), in
one run, alternating, median and min-max of ``--repeat`` runs; ``sync``
before each timed command, so neither pays for the other's writeback. Linear work
shows as a ratio to ``cp -a`` that stays flat as N grows, and a time per
file that stays flat.

    python benchmarks/bench_linear.py --sizes 2500 5000 10000 --undo-sizes 12500 25000 50000 \\
        --repeat 3 --out benchmarks/results-linear.json
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_store import default_earshot, machine_info

FILES_PER_DIR = 250


def _env(home: Path) -> dict[str, str]:
    env = dict(os.environ, EARSHOT_HOME=str(home), EARSHOT_WATCH="never")
    env.pop("EARSHOT_SESSION", None)
    return env


def _earshot(exe: str, root: Path, home: Path, *argv: str, stdin: bytes | None = None) -> str:
    proc = subprocess.run(
        [exe, *argv], cwd=root, env=_env(home), input=stdin, capture_output=True, check=False
    )
    if proc.returncode not in (0, 3):
        raise RuntimeError(f"earshot {' '.join(argv)}: {proc.stderr.decode()}")
    return proc.stdout.decode()


def _make_files(top: Path, count: int) -> None:
    for i in range(count):
        d = top / f"d{i // FILES_PER_DIR}"
        if i % FILES_PER_DIR == 0:
            d.mkdir(parents=True, exist_ok=True)
        (d / f"f{i}.txt").write_text(f"{i}\n" * 20)


def _cp(src: Path, work: Path) -> float:
    dst = work / "copy"
    shutil.rmtree(dst, ignore_errors=True)
    os.sync()  # no earlier writeback in the figure
    start = time.perf_counter()
    subprocess.run(["cp", "-a", str(src), str(dst)], check=True)
    elapsed = time.perf_counter() - start
    shutil.rmtree(dst)
    return elapsed


def writes_once(exe: str, work: Path, count: int) -> tuple[float, float]:
    """(earshot exec of ``count`` writes, cp -a of the files they make), seconds."""
    root, home = work / "root", work / "home"
    shutil.rmtree(root, ignore_errors=True)
    shutil.rmtree(home, ignore_errors=True)
    root.mkdir()
    (root / "README").write_text("a tree\n")
    session = json.loads(_earshot(exe, root, home, "session", "new", "--json"))["id"]
    calls = [
        {
            "tool": "write_file",
            "path": f"d{i // FILES_PER_DIR}/f{i}.txt",
            "content": f"{i}\n" * 20,
        }
        for i in range(count)
    ]
    data = json.dumps(calls).encode()
    os.sync()
    start = time.perf_counter()
    _earshot(exe, root, home, "exec", "--session", session, stdin=data)
    took = time.perf_counter() - start
    return took, _cp(root, work)


def undo_once(exe: str, work: Path, count: int) -> tuple[float, float]:
    """(earshot undo of a command that deleted ``count`` files, cp -a of them), seconds."""
    root, home = work / "root", work / "home"
    shutil.rmtree(root, ignore_errors=True)
    shutil.rmtree(home, ignore_errors=True)
    root.mkdir()
    _make_files(root, count)
    copy_time = _cp(root, work)
    session = json.loads(_earshot(exe, root, home, "session", "new", "--json"))["id"]
    _earshot(exe, root, home, "bash", "--session", session, "rm -rf d*")
    os.sync()
    start = time.perf_counter()
    _earshot(exe, root, home, "undo", "--session", session)
    took = time.perf_counter() - start
    if sum(1 for _ in root.rglob("f*.txt")) != count:
        raise RuntimeError("undo did not bring every file back")
    return took, copy_time


def measure(kind: str, exe: str, sizes: list[int], repeat: int) -> list[dict[str, Any]]:
    run = writes_once if kind == "writes" else undo_once
    rows = []
    for size in sizes:
        ours, peer = [], []
        for i in range(repeat):
            with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_TMP")) as tmp:
                a, b = run(exe, Path(tmp), size)
            ours.append(a)
            peer.append(b)
            print(f"{kind} {size}: run {i + 1}: {a:.2f} s, cp -a {b:.2f} s", file=sys.stderr)
        ratios = [a / b for a, b in zip(ours, peer, strict=True)]
        rows.append(
            {
                "kind": kind,
                "files": size,
                "earshot_s": _stat(ours),
                "cp_a_s": _stat(peer),
                "ratio": _stat(ratios),
                "us_per_file": round(statistics.median(ours) / size * 1e6, 1),
            }
        )
    return rows


def _stat(values: list[float]) -> dict[str, float]:
    return {
        "median": round(statistics.median(values), 3),
        "min": round(min(values), 3),
        "max": round(max(values), 3),
    }


def markdown(rows: list[dict[str, Any]]) -> str:
    out = [
        "| work | files | earshot (s) | cp -a (s) | ratio | us per file |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        what = "exec batch of N writes" if r["kind"] == "writes" else "undo of an N-file delete"
        e, c, q = r["earshot_s"], r["cp_a_s"], r["ratio"]
        out.append(
            f"| {what} | {r['files']:,} | {e['median']} ({e['min']}-{e['max']}) | "
            f"{c['median']} ({c['min']}-{c['max']}) | {q['median']:.1f}x "
            f"({q['min']:.1f}-{q['max']:.1f}) | {r['us_per_file']} |"
        )
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[2500, 5000, 10000])
    parser.add_argument("--undo-sizes", type=int, nargs="+", default=[12500, 25000, 50000])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--earshot", default=None)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    exe = args.earshot or default_earshot()
    if exe is None:
        sys.exit("no earshot to run: pass --earshot PATH")
    rows = measure("writes", exe, args.sizes, args.repeat)
    rows += measure("undo", exe, args.undo_sizes, args.repeat)
    print(markdown(rows))
    if args.out is not None:
        doc = {"machine": machine_info(Path(tempfile.gettempdir()), exe), "rows": rows}
        args.out.write_text(json.dumps(doc, indent=2) + "\n")


if __name__ == "__main__":
    main()
