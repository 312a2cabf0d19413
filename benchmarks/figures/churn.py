"""The store over 100 checkpoints of churn: its size after each, then after gc.

After the cold snapshot, each checkpoint follows an agent's batch: 10 files
edited (a line appended) and one new source file of ~4 KiB. The store's size
is read after every checkpoint (the curve), and once more after the peer's own
housekeeping keeping every checkpoint: ``earshot gc --compact``, ``git gc
--prune=now``. The gc is timed.
"""

from __future__ import annotations

import random

from benchmarks.peers import SNAPSHOT_PEERS, make
from benchmarks.suite import edits
from benchmarks.suite.plan import Plan
from benchmarks.suite.record import Series
from benchmarks.suite.runner import Context, Tree, alternate, timed, tree_weight
from benchmarks.suite.trees import TreeSpec

NAME = "churn"
MAX_FILES = 100_000  # the curve is about growth per checkpoint, not the tree's size


class Churn:
    name = NAME
    title = "The store over checkpoints of churn"

    def applies(self, tree: TreeSpec, plan: Plan) -> bool:
        return tree.files <= MAX_FILES

    def weight(self, tree: TreeSpec, plan: Plan) -> float:
        # seconds per 10,000 files, seen: the cold snapshot and gc ~4, a checkpoint ~0.5
        return tree_weight(tree) * len(SNAPSHOT_PEERS) * (4 + plan.churn * 0.5)

    def run(self, ctx: Context, tree: Tree) -> None:
        peers = [
            make(name, ctx.copy(tree, name), ctx.work / "stores" / name, ctx.earshot)
            for name in SNAPSHOT_PEERS
        ]
        pool = edits.candidates(peers[0].tree)
        curves = {
            p.name: Series(NAME, "store_bytes", tree.key, p.name, "checkpoint", "bytes")
            for p in peers
        }
        for peer in peers:
            ctx.progress.step(f"cold snapshot, {peer.name}")
            peer.init()
            peer.snapshot()
            curves[peer.name].x.append(0)
            curves[peer.name].y.append(peer.store_bytes())
        for i in range(1, ctx.plan.churn + 1):
            ctx.progress.step(f"checkpoint {i}/{ctx.plan.churn}")
            for peer in alternate(peers, i):
                edits.edit(peer.tree, pool, 10, seed=i)
                new = peer.tree / "churn" / f"batch{i}.py"
                new.parent.mkdir(exist_ok=True)
                rng = random.Random(i)
                new.write_text("".join(f"value_{j} = {rng.random()!r}\n" for j in range(160)))
                peer.snapshot()
                curves[peer.name].x.append(i)
                curves[peer.name].y.append(peer.store_bytes())
        record = ctx.results.measure
        for peer in peers:
            record(NAME, "store_after_churn", tree.key, peer.name, peer.store_bytes(), "bytes")
            ctx.progress.step(f"gc, {peer.name}")
            record(NAME, "gc", tree.key, peer.name, timed(peer.gc))
            record(NAME, "store_after_gc", tree.key, peer.name, peer.store_bytes(), "bytes")
            stop = getattr(peer, "stop_daemon", None)
            if stop is not None:
                stop()
        ctx.results.series.extend(curves.values())


FIGURE = Churn()
