"""Soak: sessions side by side through the daemon; undos checked, its memory, and leftovers.

``tests/soak.py`` runs four sessions on one root at once (Claude Code's and
Gemini CLI's hook events, ``earshot bash``, ``earshot chat -p`` against a
scripted model), each a hundred batches, with the daemon restarted, a
snapshot forgotten and ``gc`` run along the way; after each window of
batches a session undoes some of them and its files must be as before them
(see its docstring for what differs by design, and is said). Recorded
here: the batches and undos checked, the daemon's RSS (at its start, after
warm-up, at the end) and its growth, and the violations (none). ``--quick``
runs three batches a session, to prove it runs. A count, not a timing: it
runs once, on the plan's first tree.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from benchmarks.suite.plan import Plan
from benchmarks.suite.procs import harness_report
from benchmarks.suite.runner import Context, Tree
from benchmarks.suite.trees import TreeSpec

NAME = "soak"
SESSIONS = 4
FULL = 100  # batches a session
QUICK = 3
SOAK = Path(__file__).resolve().parents[2] / "tests" / "soak.py"


class Soak:
    name = NAME
    title = "Soak: sessions at once through the daemon, undos checked, its memory"

    def applies(self, tree: TreeSpec, plan: Plan) -> bool:
        return tree == plan.trees[0]

    def weight(self, tree: TreeSpec, plan: Plan) -> float:
        return 20_000 * SESSIONS * (QUICK if plan.quick else FULL)

    def run(self, ctx: Context, tree: Tree) -> None:
        batches = QUICK if ctx.plan.quick else FULL
        ctx.progress.step(f"{SESSIONS} sessions x {batches} batches at once, each undo checked")
        work = ctx.scratch("soak")
        argv = [sys.executable, str(SOAK), "--sessions", str(SESSIONS), "--batches", str(batches)]
        report = harness_report([*argv, "--seed", "1", "--work", str(work), "--json"], "the soak")
        note = (
            f"{report['sessions']} sessions ({', '.join(report['roles'][: report['sessions']])}), "
            f"{report['calls']:,} calls, {report['processes']:,} earshot processes; "
            f"{report['kept_ambiguous']} ambiguous creations kept and "
            f"{report['restored_by_others']} paths restored by another session's undo, "
            "as two sessions at once do; seed 1"
        )
        record = ctx.results.measure
        for metric, value in (
            ("soak_batches", report["batches"]),
            ("soak_undos", report["undos"]),
            ("soak_violations", len(report["violations"])),
        ):
            record(NAME, metric, tree.key, "earshot", value, "count", note=note)
        record(NAME, "soak_seconds", tree.key, "earshot", report["seconds"], note=note)
        for metric, value in memory(report["rss"]).items():
            record(NAME, metric, tree.key, "earshot", value, "MiB", note=note)
        for line in report["violations"]:
            ctx.progress.step(f"VIOLATION {line}")


def memory(rss: dict[str, Any]) -> dict[str, float]:
    """The first daemon's RSS at its start; the last one's after warm-up, at the
    end, and its growth between (the daemon stopped along the way is replaced)."""
    daemons = rss.get("daemons") or []
    if not daemons:
        return {}
    out = {"soak_rss_start": float(daemons[0]["first"]["mib"])}
    last = daemons[-1]
    if "warm" in last:
        out["soak_rss_warm"] = float(last["warm"]["mib"])
        out["soak_rss_end"] = float(last["last"]["mib"])
        out["soak_rss_growth"] = float(last["growth_mib"])
    return out


FIGURE = Soak()
