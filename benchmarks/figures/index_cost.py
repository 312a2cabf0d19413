"""What reading git's index costs a snapshot: whole ``earshot snapshot`` commands
in a tree that is a git repository.

The tree's copy is made a repository (``git init``, ``git add -A``); after
one untimed snapshot into a fresh store, each case is timed (a repeat is
one snapshot after its preparation):

- ``index_nochange``: nothing changed since the last snapshot;
- ``index_10_changed``: 10 tracked files edited (a line appended) before each;
- ``index_ignored_nochange``: the same with 200 ignored build outputs spread
  over directories (``*.o``, ignored by ``.git/info/exclude``; one of them
  in the index with ``git add -f``), so ignore rules match names;
- ``index_rewritten``: ``touch .git/index`` before each (as a ``git status``
  that rewrites it): every directory with an ignored name is judged again,
  and the index is parsed once.

Each preparation waits out the 2.5 s racy margin, so only what changed is
read. With ``--base EXE``, a second earshot (the code before a change) is
timed side by side as ``earshot-base``, alternating, into a store of its own.
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Callable

from benchmarks import git_view
from benchmarks.peers import EarshotPeer
from benchmarks.suite import edits
from benchmarks.suite.plan import Plan
from benchmarks.suite.runner import Context, Tree, alternate, timed, tree_weight
from benchmarks.suite.trees import TreeSpec

NAME = "index_cost"
IGNORED = 200  # ignored *.o files made
RACY = 2.5  # seconds: a file younger than this is read again, whatever its stat says
MAX_FILES = 100_000


class IndexCost:
    name = NAME
    title = "What reading git's index costs a snapshot"

    def applies(self, tree: TreeSpec, plan: Plan) -> bool:
        return tree.kind == "kernel" or (tree.kind == "generated" and tree.files <= MAX_FILES)

    def weight(self, tree: TreeSpec, plan: Plan) -> float:
        return tree_weight(tree) * (4 + 0.2 * 4 * plan.repeat)

    def run(self, ctx: Context, tree: Tree) -> None:
        root = ctx.copy(tree, "earshot")
        ctx.progress.step("git init, git add -A")
        git_view.make_repository(root)
        exes = {"earshot": ctx.earshot, **({"earshot-base": ctx.base} if ctx.base else {})}
        peers = []
        for name, exe in exes.items():
            peer = EarshotPeer(exe, root, ctx.work / "stores" / name, name=name)
            peer.init()
            peers.append(peer)
        repeat = ctx.plan.repeat
        rng = random.Random(1)
        pool = [p for p in edits.candidates(root) if not p.startswith(".git")]
        edited = rng.sample(pool, min(len(pool), 10 * repeat))
        dirs = sorted({os.path.dirname(p) for p in pool})
        spread = rng.sample(dirs, min(IGNORED, len(dirs)))
        made = [os.path.join(d, f"earshot-bench-{i}.o") for i, d in enumerate(spread)]

        def warm() -> None:
            for peer in peers:
                peer.snapshot()
            time.sleep(RACY)

        def case(metric: str, before: Callable[[int], None]) -> None:
            for r in range(repeat):
                before(r)
                for peer in alternate(peers, r):
                    ctx.progress.step(f"{metric}, repeat {r + 1}/{repeat}, {peer.name}")
                    seconds = timed(peer.snapshot)
                    ctx.results.measure(NAME, metric, tree.key, peer.name, seconds)

        def edit(r: int) -> None:
            for rel in edited[10 * r : 10 * r + 10]:
                with open(root / rel, "ab") as f:
                    f.write(b"/* earshot bench */\n")
            time.sleep(RACY)

        def rewrite_index(r: int) -> None:
            os.utime(root / ".git" / "index")
            time.sleep(RACY)

        ctx.progress.step("the first snapshots (untimed)")
        warm()
        case("index_nochange", lambda r: None)
        case("index_10_changed", edit)
        with (root / ".git" / "info" / "exclude").open("a") as f:
            f.write("*.o\n")
        for rel in made:
            (root / rel).write_bytes(b"\x7fELF object\n")
        git_view.git(root, "add", "-f", made[0])
        warm()
        case("index_ignored_nochange", lambda r: None)
        case("index_rewritten", rewrite_index)


FIGURE = IndexCost()
