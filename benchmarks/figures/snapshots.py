"""Snapshots and restores: cold, no change, 10 and 1,000 files changed, a restore,
and the store's size after the cold snapshot, for earshot and the git peers.

Every peer works on its own copy of the tree; within a repeat the peers run
one after another in turn, their order reversed on every other repeat. The
same seeded edits are made on every copy before the timed snapshot. A cold
snapshot goes into a fresh, empty store; with ``--full`` on a machine that
lets the page cache be dropped, one more cold snapshot per peer is timed
with the cache dropped first (``cache: cold``). The cold snapshot's CPU time
(user + system of its processes) is recorded beside its wall time: a loaded
machine takes earshot's second core (it compresses on a worker thread), so
the wall ratio rises under load while the CPU ratio holds. The restore brings back the
snapshot from before 10 edits, and is checked: every edited file must hold
its content from before. With ``--base EXE``, a second earshot is timed
beside the others as ``earshot-base``, in a store of its own.

From 300,000 files on, a copy of the tree per peer does not fit a common disk
(1,000,000 generated files are ~10 GiB): there the peers run one after
another, each on a fresh copy removed afterwards, with fewer repeats, and
OpenCode's git (the same add as shadow git) is left out.
"""

from __future__ import annotations

import shutil

from benchmarks.peers import SNAPSHOT_PEERS, Checkpointer, EarshotPeer, make
from benchmarks.suite import edits, machine
from benchmarks.suite.plan import Plan
from benchmarks.suite.runner import Context, Tree, alternate, children_cpu, timed, tree_weight
from benchmarks.suite.trees import TreeSpec

NAME = "snapshots"
BIG = 300_000  # from this size on, fewer repeats: a cold git snapshot takes minutes


class Snapshots:
    name = NAME
    title = "Snapshots and restores"

    def applies(self, tree: TreeSpec, plan: Plan) -> bool:
        return True

    def repeats(self, tree: TreeSpec, plan: Plan) -> tuple[int, int]:
        if tree.files >= BIG:
            return min(plan.repeat, 2), 1
        return plan.repeat, plan.cold_repeat

    def peers(self, tree: TreeSpec) -> tuple[str, ...]:
        if tree.files >= BIG:
            return tuple(p for p in SNAPSHOT_PEERS if p != "opencode")
        return SNAPSHOT_PEERS

    def weight(self, tree: TreeSpec, plan: Plan) -> float:
        repeat, cold = self.repeats(tree, plan)
        # seconds per 10,000 files, seen: a cold snapshot ~3.5, the rest of a repeat ~4.5
        return tree_weight(tree) * repeat * (cold * 3.5 + 4.5) * len(self.peers(tree))

    def run(self, ctx: Context, tree: Tree) -> None:
        names = list(self.peers(tree.spec)) + (["earshot-base"] if ctx.base else [])
        groups = [[n] for n in names] if tree.spec.files >= BIG else [names]
        pool: list[str] = []
        for group in groups:
            peers = [self._peer(ctx, tree, name) for name in group]
            pool = pool or edits.candidates(peers[0].tree)
            try:
                self._measure(ctx, tree, peers, pool)
            finally:
                for peer in peers:
                    _stop(peer)
                    shutil.rmtree(peer.tree, ignore_errors=True)
                    shutil.rmtree(ctx.work / "stores" / peer.name, ignore_errors=True)

    def _peer(self, ctx: Context, tree: Tree, name: str) -> Checkpointer:
        copy, store = ctx.copy(tree, name), ctx.work / "stores" / name
        if name == "earshot-base" and ctx.base:
            return EarshotPeer(ctx.base, copy, store, name=name)
        return make(name, copy, store, ctx.earshot)

    def _measure(
        self, ctx: Context, tree: Tree, peers: list[Checkpointer], pool: list[str]
    ) -> None:
        repeat, cold = self.repeats(tree.spec, ctx.plan)
        record = ctx.results.measure
        last: dict[str, str] = {}
        for r in range(repeat):
            order = alternate(peers, r)
            for c in range(cold):
                for peer in alternate(order, c):
                    ctx.progress.step(f"repeat {r + 1}/{repeat}: cold snapshot, {peer.name}")
                    peer.init()
                    cpu = children_cpu()
                    seconds = timed(lambda p=peer: last.__setitem__(p.name, p.snapshot()))
                    record(NAME, "cold_snapshot", tree.key, peer.name, seconds)
                    cpu = children_cpu() - cpu
                    record(NAME, "cold_snapshot_cpu", tree.key, peer.name, cpu)
                    record(NAME, "store_cold", tree.key, peer.name, peer.store_bytes(), "bytes")
            for peer in order:
                ctx.progress.step(f"repeat {r + 1}/{repeat}: no-change snapshot, {peer.name}")
                seconds = timed(lambda p=peer: last.__setitem__(p.name, p.snapshot()))
                record(NAME, "nochange_snapshot", tree.key, peer.name, seconds)
            for count in (10, 1000):
                for peer in order:
                    ctx.progress.step(f"repeat {r + 1}/{repeat}: {count} changed, {peer.name}")
                    edits.edit(peer.tree, pool, count, seed=1000 * r + count)
                    seconds = timed(lambda p=peer: last.__setitem__(p.name, p.snapshot()))
                    record(NAME, f"snapshot_{count}_changed", tree.key, peer.name, seconds)
            for peer in order:
                ctx.progress.step(f"repeat {r + 1}/{repeat}: restore of 10 files, {peer.name}")
                target = last[peer.name]
                before = edits.edit(peer.tree, pool, 10, seed=1000 * r + 7)
                last[peer.name] = peer.snapshot()
                seconds = timed(lambda p=peer, t=target: p.restore(t))
                edits.check_restored(peer.tree, before, peer.name)
                record(NAME, "restore_10", tree.key, peer.name, seconds)
        if ctx.plan.drop_caches and machine.can_drop_caches():
            self._cold_cache(ctx, tree, peers)

    def _cold_cache(self, ctx: Context, tree: Tree, peers: list[Checkpointer]) -> None:
        """One cold snapshot per peer with the page cache dropped first: the tree
        is read from disk, as after a reboot."""
        for peer in peers:
            ctx.progress.step(f"cold snapshot, page cache dropped, {peer.name}")
            peer.init()
            machine.drop_caches()
            seconds = timed(peer.snapshot, sync=False)
            ctx.results.measure(NAME, "cold_snapshot", tree.key, peer.name, seconds, cache="cold")


def _stop(peer: Checkpointer) -> None:
    stop = getattr(peer, "stop_daemon", None)
    if stop is not None:
        stop()


FIGURE = Snapshots()
