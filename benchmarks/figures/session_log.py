"""Loading a long session log and computing the context the model sees.

A session of 10,000 entries (``--quick``; 100,000 otherwise) is built
through earshot's session API (benchmarks/suite/session_build.py), then
loaded (``Session.open``) and its model-visible context computed, from a
warm page cache, a few times a repeat; each is a sample. It runs in the
interpreter of the earshot under test, in a process of its own. The figure
does not depend on the tree: it runs once a run, on the plan's first
generated tree (or its first tree).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from benchmarks.suite import procs
from benchmarks.suite.plan import Plan
from benchmarks.suite.runner import Context, Tree
from benchmarks.suite.trees import TreeSpec

NAME = "session_log"
PEER = "earshot"
LOADS = 3  # loads a repeat
BUILDER = Path(__file__).resolve().parent.parent / "suite" / "session_build.py"


def entries(plan: Plan) -> int:
    return 10_000 if plan.quick else 100_000


class SessionLog:
    name = NAME
    title = "The session log: load and context"

    def applies(self, tree: TreeSpec, plan: Plan) -> bool:
        generated = [t for t in plan.trees if t.kind == "generated"]
        return tree == (generated or plan.trees)[0]

    def weight(self, tree: TreeSpec, plan: Plan) -> float:
        return entries(plan) * (1 + plan.repeat * LOADS * 0.2)

    def run(self, ctx: Context, tree: Tree) -> None:
        ctx.progress.step(f"a session of {entries(ctx.plan):,} entries: build, then load")
        argv = [
            procs.script_python(ctx.earshot),
            str(BUILDER),
            str(entries(ctx.plan)),
            str(ctx.plan.repeat * LOADS),
            str(ctx.scratch("session")),
        ]
        proc = subprocess.run(argv, capture_output=True, text=True, check=False)
        if proc.returncode:
            raise RuntimeError(f"session_build.py exited {proc.returncode}: {proc.stderr[-800:]}")
        doc = json.loads(proc.stdout)
        note = (
            f"A session of {doc['entries']:,} entries ({doc['bytes'] / 1e6:.1f} MB), "
            f"{doc['context_entries']:,} of them on the model-visible path; not a tree's figure."
        )
        record = ctx.results.measure
        for load, context in zip(doc["load"], doc["context"], strict=True):
            record(NAME, "session_load_context", tree.key, PEER, load + context, note=note)
            record(NAME, "session_load", tree.key, PEER, load)
            record(NAME, "session_context", tree.key, PEER, context)


FIGURE = SessionLog()
