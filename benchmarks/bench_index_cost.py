"""What reading git's index costs a snapshot: whole ``earshot snapshot`` commands on a real tree.

Scenarios, each timed ``--repeat`` times (median, min-max), after one warm-up
snapshot into a fresh store:

- ``no-change``: nothing changed since the last snapshot.
- ``10-changed``: 10 tracked files edited (a line appended) before each snapshot.
- ``ignored/no-change``: the same with ignored build outputs in the tree
  (``--ignored`` ``*.o`` files spread over directories, one of them in the
  index with ``git add -f``), so ignore rules match names.
- ``ignored/index-rewritten``: ``touch .git/index`` before each snapshot (as
  a ``git status`` that rewrites it): every directory with an ignored name
  is judged again, and the index is parsed once.

Every file the run creates or edits is put back at the end (the index entry
added with ``git add -f`` is removed with ``git rm --cached``).

    python benchmarks/bench_index_cost.py /work/trees/linux-source-6.1 \\
        --earshot .venv/bin/earshot --base /tmp/earshot-base/.venv/bin/earshot --repeat 5

With ``--base``, a second earshot (e.g. the code before a change) is timed
in the same run, alternating with the first, each into its own store.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path


def snapshot(earshot: str, root: Path, home: str) -> float:
    env = dict(os.environ, EARSHOT_HOME=home, EARSHOT_WATCH="never")
    start = time.perf_counter()
    subprocess.run(
        [earshot, "snapshot", "--json"], cwd=root, env=env, check=True, stdout=subprocess.DEVNULL
    )
    return time.perf_counter() - start


def summary(seconds: list[float]) -> dict[str, float]:
    return {
        "median": round(statistics.median(seconds), 3),
        "min": round(min(seconds), 3),
        "max": round(max(seconds), 3),
    }


def git(root: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=root, check=True, capture_output=True, text=True
    ).stdout


class Runs:
    """Each earshot with its own store, timed in turn (A B, then B A, ...) on the same tree."""

    def __init__(self, tools: dict[str, str], root: Path, homes: dict[str, str], repeat: int):
        self.tools, self.root, self.homes, self.repeat = tools, root, homes, repeat
        self.results: dict[str, dict[str, dict[str, float]]] = {name: {} for name in tools}

    def all(self) -> None:
        """One untimed snapshot each, then wait out the racy margin."""
        for name, tool in self.tools.items():
            snapshot(tool, self.root, self.homes[name])
        time.sleep(2.5)

    def scenario(self, label: str, before: Callable[[int], None]) -> None:
        seconds: dict[str, list[float]] = {name: [] for name in self.tools}
        names = list(self.tools)
        for i in range(self.repeat):
            before(i)
            for name in names if i % 2 == 0 else reversed(names):
                seconds[name].append(snapshot(self.tools[name], self.root, self.homes[name]))
        for name in names:
            self.results[name][label] = summary(seconds[name])
        print(label, {n: self.results[n][label] for n in names}, file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("root", type=Path)
    parser.add_argument("--earshot", default=str(Path(sys.executable).parent / "earshot"))
    parser.add_argument(
        "--base", help="another earshot to time side by side (e.g. before a change)"
    )
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--ignored", type=int, default=200, help="ignored *.o files to add")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    root: Path = args.root.resolve()
    tools = {"earshot": args.earshot, **({"base": args.base} if args.base else {})}
    rng = random.Random(args.seed)
    tracked = sorted(p for p in git(root, "ls-files", "-z").split("\0") if p.endswith(".c"))
    edited = rng.sample(tracked, 10 * args.repeat)
    originals = {p: (root / p).read_bytes() for p in edited}
    dirs = sorted({os.path.dirname(p) for p in tracked})
    made = [f"{d}/earshot-bench-{i}.o" for i, d in enumerate(rng.sample(dirs, args.ignored))]
    with tempfile.TemporaryDirectory(prefix="bench-index-") as tmp:
        homes = {name: os.path.join(tmp, name) for name in tools}
        runs = Runs(tools, root, homes, args.repeat)
        try:
            runs.all()  # cold: fills each store and stat cache
            runs.scenario("no-change", lambda i: None)

            def edit(i: int) -> None:
                for p in edited[10 * i : 10 * i + 10]:
                    with open(root / p, "ab") as f:
                        f.write(b"/* earshot bench */\n")
                time.sleep(2.5)  # past the racy margin: only these 10 are read

            runs.scenario("10-changed", edit)
            for p in made:
                (root / p).write_bytes(b"\x7fELF object\n")
            git(root, "add", "-f", made[0])
            runs.all()
            runs.all()
            runs.scenario("ignored/no-change", lambda i: None)

            def rewrite_index(i: int) -> None:
                os.utime(root / ".git" / "index")
                time.sleep(2.5)  # the index is then old enough to be trusted

            runs.scenario("ignored/index-rewritten", rewrite_index)
        finally:
            for p, data in originals.items():
                (root / p).write_bytes(data)
            git(root, "rm", "-q", "--cached", "--ignore-unmatch", made[0])
            for p in made:
                (root / p).unlink(missing_ok=True)
    doc = {"root": str(root), "tools": tools, "repeat": args.repeat, "results": runs.results}
    print(json.dumps(doc, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
