"""Power cuts: how many crash states the explorer checked, and the violations (none).

``tests/powercut.py`` runs each mutating operation under strace, builds
the states a power cut may leave at each barrier and at random points, and
checks each one as the crash harness checks a kill (see its docstring and
tests/crash_states.py for the model). The suite's tests run a sample; here
it runs a thousand, an explorer per core (``--quick``: one state per operation, to prove it runs).
It is a count, not a timing, so it runs once, on the plan's first tree.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from benchmarks.suite.plan import Plan
from benchmarks.suite.procs import harness_report
from benchmarks.suite.runner import Context, Tree
from benchmarks.suite.trees import TreeSpec

NAME = "powercut"
FULL = 1000  # crash states (about 3 s each on two cores)
QUICK = 10  # one per operation (tests/powercut.py POWER_OPERATIONS)
EXPLORER = Path(__file__).resolve().parents[2] / "tests" / "powercut.py"


class PowerCut:
    name = NAME
    title = "Power cuts: crash states checked, and violations"

    def applies(self, tree: TreeSpec, plan: Plan) -> bool:
        return tree == plan.trees[0]

    def weight(self, tree: TreeSpec, plan: Plan) -> float:
        return 2_000 * (QUICK if plan.quick else FULL)

    def run(self, ctx: Context, tree: Tree) -> None:
        states = QUICK if ctx.plan.quick else FULL
        ctx.progress.step(f"{states:,} crash states, each laid on disk and checked")
        work = ctx.scratch("powercut")
        argv = [sys.executable, str(EXPLORER), "--states", str(states), "--per-run", "8"]
        argv += ["--jobs", str(os.cpu_count() or 1)]
        report = harness_report(
            [*argv, "--seed", "1", "--work", str(work), "--json"], "the power-cut explorer"
        )
        note = (
            f"{report['runs']} traced runs, {report['ops_traced']:,} file-system operations, "
            f"{report['barriers']} barriers; names={report['names']}, seed {report['seed']}"
        )
        record = ctx.results.measure
        for metric, value in (
            ("powercut_states", report["states"]),
            ("powercut_violations", len(report["violations"])),
        ):
            record(NAME, metric, tree.key, "earshot", value, "count", note=note)
        record(NAME, "powercut_seconds", tree.key, "earshot", report["seconds"], note=note)
        for line in report["violations"]:
            ctx.progress.step(f"VIOLATION {line}")


FIGURE = PowerCut()
