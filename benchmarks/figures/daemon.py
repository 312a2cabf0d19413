"""The watch daemon on each tree: its start, its memory, its watches, a call through it.

On its own copy of the tree, once earshot has recorded it (untimed, no
daemon):

* its start: ``earshot watch``, which returns once the daemon answers with
  every watch placed, as a fresh daemon each time (the previous one stopped,
  untimed);
* a daemon-backed call at this size: the per-call figure's four calls
  (``bash 'true'``, a one-file ``write``, an ``exec`` of 10 writes, the undo
  of a 10-file batch), through the daemon, warm; on a million files this is
  what a call costs there against 10,000;
* once those calls are done, its memory (RSS) and the inotify watches it
  holds (the ``inotify wd:`` lines of its inotify descriptor's fdinfo;
  one a directory, against ``fs.inotify.max_user_watches``).
"""

from __future__ import annotations

import os
import time

from benchmarks.figures.calls import rounds, settle, time_calls
from benchmarks.peers.calls import EarshotCalls
from benchmarks.suite import edits, procs
from benchmarks.suite.plan import Plan
from benchmarks.suite.runner import Context, Tree, timed, tree_weight
from benchmarks.suite.trees import TreeSpec

NAME = "daemon"
PEER = "earshot-daemon"
STARTS = 3  # daemon starts timed at least, whatever the repeat


class Daemon:
    name = NAME
    title = "The watch daemon: its start, memory and watches, and a call through it"

    def applies(self, tree: TreeSpec, plan: Plan) -> bool:
        return True

    def weight(self, tree: TreeSpec, plan: Plan) -> float:
        # the copy, the first snapshot, and each start's walk placing the watches
        return tree_weight(tree) * (2 + max(STARTS, plan.repeat) * 0.3)

    def run(self, ctx: Context, tree: Tree) -> None:
        root = ctx.copy(tree, PEER)
        copied = time.monotonic()
        pool = edits.candidates(root)
        peer = EarshotCalls(PEER, ctx.earshot, root, ctx.work / "stores" / PEER)
        settle(copied)
        record = ctx.results.measure
        try:
            ctx.progress.step("first snapshot, no daemon")
            peer.setup()
            for i in range(max(STARTS, ctx.plan.repeat)):
                peer.close()
                ctx.progress.step(f"daemon start {i + 1}")
                record(NAME, "daemon_start", tree.key, PEER, timed(peer.start_daemon))
            peer.bash("true")  # the first call after a start leaves the watch mark
            time_calls(ctx, NAME, tree, [peer], pool, rounds(tree.spec, ctx.plan))
            status = peer.status()
            pid = int(str(status["pid"]))
            dirs = sum(1 for _ in os.walk(root))
            note = (
                f"{tree.key}: {dirs:,} directories; the daemon says {status.get('watches')} "
                f"watches, of fs.inotify.max_user_watches {status.get('max_user_watches')}"
            )
            record(NAME, "daemon_rss", tree.key, PEER, procs.rss_mib(pid), "MiB")
            watches = procs.inotify_watches(pid)
            record(NAME, "daemon_watches", tree.key, PEER, watches, "count", note=note)
        finally:
            peer.close()


FIGURE = Daemon()
