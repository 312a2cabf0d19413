"""Per call: what checkpointing an agent's call costs, and undoing a batch.

Each peer works on its own copy of the tree (benchmarks/peers/calls.py says
what a call is for each). Every round, each peer in turn (the order reversed
on every other round) makes the same four calls, each timed as a whole:

* ``bash 'true'``: ``earshot bash 'true'``; git: ``sh -c true``, then the
  peer's snapshot; file backups: ``sh -c true`` alone (a shell command is not
  seen);
* a one-file write: ``earshot write``; git: the file written, then the
  snapshot; file backups: the copy of the file first (none: it is new);
* an ``exec`` batch of 10 writes of new files: ``earshot exec``; git: the
  10 files, then one snapshot; file backups: the 10 writes;
* the undo of a 10-file batch: a batch overwriting 10 of the tree's files
  (not ignored by git; the same on every copy) is made untimed, then undone:
  ``earshot undo``; git: its restore of the checkpoint before the batch;
  file backups: its restore of the turn's copies. Every undo is checked: the
  10 files hold their content from before again.

A round makes a few calls of each (more on small trees), each a sample.
``earshot`` runs without the daemon (``EARSHOT_WATCH=never``: each call
walks the tree); ``earshot-daemon`` with it, started and warm. On trees past
300,000 files the figure is left to the daemon figure: six copies of a
million files do not fit, and a call without the daemon takes seconds.
"""

from __future__ import annotations

import random
import time

from benchmarks.peers.calls import CALL_PEERS, CallPeer, make_calls
from benchmarks.suite import edits
from benchmarks.suite.plan import Plan
from benchmarks.suite.runner import Context, Tree, alternate, timed, tree_weight
from benchmarks.suite.trees import TreeSpec

NAME = "calls"
MAX_FILES = 300_000
RACY_S = 2.5  # earshot trusts a file's stat once it is 2 s older than the scan
BACKUPS_NOTE = (
    "File backups work in the agent's own process (no process is started): a copy of "
    "each file a Write changes; its `bash 'true'` is `sh -c true` alone, not recorded."
)


def rounds(tree: TreeSpec, plan: Plan) -> int:
    """Calls of each kind: a few a repeat on small trees, one on large ones."""
    per = 1 if tree.files >= 100_000 else 2 if plan.quick else 3
    return plan.repeat * per


def settle(since: float) -> None:
    """Wait until the copies are past earshot's racy margin, as a real tree's
    files are: a file changed within it is read again by every scan."""
    left = RACY_S - (time.monotonic() - since)
    if left > 0:
        time.sleep(left)


def time_calls(
    ctx: Context, figure: str, tree: Tree, peers: list[CallPeer], pool: list[str], count: int
) -> None:
    """``count`` rounds of the four calls on every peer, alternating; each a sample."""

    def record(metric: str, peer: CallPeer, seconds: float) -> None:
        note = BACKUPS_NOTE if peer.name == "file-backups" else ""
        ctx.results.measure(figure, metric, tree.key, peer.name, seconds, note=note)

    for i in range(count):
        targets = random.Random(i).sample(pool, min(10, len(pool)))
        for peer in alternate(peers, i):
            ctx.progress.step(f"call {i + 1}/{count}, {peer.name}")
            seconds = timed(lambda p=peer: p.bash("true"))
            record("call_bash_true", peer, seconds)
            note = f"note-{i}.txt"
            seconds = timed(lambda p=peer, n=note: p.write(n, b"x\n" * 40))
            record("call_write_one", peer, seconds)
            batch = [f"batch-{i}-{j}.txt" for j in range(10)]
            seconds = timed(lambda p=peer, b=batch: p.exec_writes(b, b"y\n" * 30))
            record("call_exec_ten", peer, seconds)
            before = {rel: (peer.tree / rel).read_bytes() for rel in targets}
            peer.mark()
            peer.exec_writes(targets, f"undo me {i}\n".encode())
            seconds = timed(peer.undo)
            edits.check_restored(peer.tree, before, peer.name)
            record("call_undo_ten", peer, seconds)


class Calls:
    name = NAME
    title = "Per call: a checkpoint per agent call, and the undo of a batch"

    def applies(self, tree: TreeSpec, plan: Plan) -> bool:
        return tree.files <= MAX_FILES

    def weight(self, tree: TreeSpec, plan: Plan) -> float:
        # whole-tree work: the copies, the first snapshots, and every call of
        # the four peers that walk the tree (earshot without its daemon, git)
        return tree_weight(tree) * (len(CALL_PEERS) + 4 + rounds(tree, plan) * 4 * 4 * 0.3)

    def run(self, ctx: Context, tree: Tree) -> None:
        copies = {name: ctx.copy(tree, name) for name in CALL_PEERS}
        copied = time.monotonic()
        pool = edits.candidates(copies[CALL_PEERS[0]])
        peers = [
            make_calls(name, copies[name], ctx.work / "stores" / name, ctx.earshot)
            for name in CALL_PEERS
        ]
        settle(copied)
        try:
            for peer in peers:
                ctx.progress.step(f"first checkpoint, {peer.name}")
                peer.setup()
            time_calls(ctx, NAME, tree, peers, pool, rounds(tree.spec, ctx.plan))
        finally:
            for peer in peers:
                peer.close()


FIGURE = Calls()
