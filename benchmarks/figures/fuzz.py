"""Fuzzing: how many damaged inputs the fuzz tests fed earshot's decoders, and the failures (none).

The fuzz tests (``tests/**/test_fuzz_*.py``) feed every decoder of the
store's records, the session log, the hook payloads, the settings merger,
the destructive-command heuristic and a store with damaged LMDB pages
random and mutated input; each must return a value or refuse in words. The
suite runs them under the fixed "ci" profile; here they run under the "long"
one (``EARSHOT_FUZZ=long``: forty times the examples, a new seed each run,
said in the note so a failure can be run again), a worker per core
(``--quick``: the ci profile, to prove it runs). It is a count, not a
timing, so it runs once, on the plan's first tree.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

from benchmarks.suite.plan import Plan
from benchmarks.suite.runner import Context, Tree
from benchmarks.suite.trees import TreeSpec

NAME = "fuzz"
REPO = Path(__file__).resolve().parents[2]
#: The fuzz tests' files: one concept each, found by name.
PATTERN = "test_fuzz_*.py"
#: Hypothesis's statistics, a line per phase of each test.
_PASSING = re.compile(r"- (\d+) passing, \d+ failing")
_SUMMARY = re.compile(r"(\d+) (passed|failed|error)")


def fuzz_files() -> list[str]:
    return sorted(str(p.relative_to(REPO)) for p in (REPO / "tests").rglob(PATTERN))


class Fuzz:
    name = NAME
    title = "Fuzzing: damaged inputs fed to the decoders, and failures"

    def applies(self, tree: TreeSpec, plan: Plan) -> bool:
        return tree == plan.trees[0]

    def weight(self, tree: TreeSpec, plan: Plan) -> float:
        return 60_000 if plan.quick else 1_500_000

    def run(self, ctx: Context, tree: Tree) -> None:
        profile = "ci" if ctx.plan.quick else "long"
        seed = int(time.time())
        files = fuzz_files()
        ctx.progress.step(f"{len(files)} fuzz test files under the {profile} profile")
        env = {**os.environ, "EARSHOT_FUZZ": profile, "PYTHONDONTWRITEBYTECODE": "1"}
        argv = [sys.executable, "-m", "pytest", "-o", "addopts=", "-q", "-p", "no:cacheprovider"]
        argv += ["-n", str(os.cpu_count() or 1), "--hypothesis-show-statistics"]
        argv += [f"--hypothesis-seed={seed}", *files]
        started = time.perf_counter()
        done = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, check=False)
        seconds = time.perf_counter() - started
        out = done.stdout
        counts = {kind: int(n) for n, kind in _SUMMARY.findall(out.splitlines()[-1] if out else "")}
        examples = sum(int(n) for n in _PASSING.findall(out))
        failures = counts.get("failed", 0) + counts.get("error", 0)
        if not counts:
            raise RuntimeError(f"the fuzz tests did not run: {(out + done.stderr)[-500:]}")
        again = (
            "the same examples every run"
            if profile == "ci"
            else f"seed {seed}: pytest --hypothesis-seed={seed} runs them again"
        )
        note = f"{counts.get('passed', 0)} tests in {len(files)} files, profile {profile} ({again})"
        record = ctx.results.measure
        record(NAME, "fuzz_examples", tree.key, "earshot", examples, "count", note=note)
        record(NAME, "fuzz_failures", tree.key, "earshot", failures, "count", note=note)
        record(NAME, "fuzz_seconds", tree.key, "earshot", seconds, note=note)
        # What failed, and how to run just that example again (the work directory goes).
        for line in out.splitlines():
            if line.startswith(("FAILED", "ERROR")) or "@reproduce_failure(" in line:
                ctx.progress.say(f"fuzz: {line.strip()}")


FIGURE = Fuzz()
