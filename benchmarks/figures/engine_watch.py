"""Per-batch checkpoint overhead through the library, with an in-process watcher.

One process holds an ``Engine`` whose tracker is a ``Watcher`` on its copy
of the tree, as an agent embedding earshot would (this process, the
installed library, not ``--earshot``). For each kind of batch the overhead
is the batch's time minus the same work done bare (the write, or the
command run by the same shell):

- ``engine_write_file``: one write_file of 80 bytes;
- ``engine_bash_true``: ``bash 'true'``;
- ``engine_bash_10``: a command writing 10 files.

The peer's figure, the same in each row, is shadow git's ``add -A`` +
``commit`` on its own copy after each repeat's changes. 15 repeats
(``--quick`` 3), after the first batch of the process (one full restage)
and the 2.5 s racy margin. ``watcher_start`` is the watcher's start-up.
"""

from __future__ import annotations

import subprocess
import time

from benchmarks.peers import GitPeer
from benchmarks.suite.plan import Plan
from benchmarks.suite.runner import Context, Tree, timed, tree_weight
from benchmarks.suite.trees import TreeSpec
from earshot.agent.core.calls import Bash, Call, WriteFile
from earshot.agent.core.engine import Engine, shell_argv
from earshot.agent.core.records import TABLES
from earshot.agent.core.sessions import create_session
from earshot.agent.watch.watcher import Watcher
from earshot.cas.paths import checkpoints_dir
from earshot.cas.project import Project

NAME = "engine_watch"
TEN = "mkdir -p b{r} && for i in 0 1 2 3 4 5 6 7 8 9; do echo $i > b{r}/f$i.txt; done"
RACY = 2.5
MAX_FILES = 100_000


class EngineWatch:
    name = NAME
    title = "Per-batch overhead through the library, with an in-process watcher"

    def applies(self, tree: TreeSpec, plan: Plan) -> bool:
        return tree.kind == "generated" and tree.files <= MAX_FILES

    def weight(self, tree: TreeSpec, plan: Plan) -> float:
        return tree_weight(tree) * 4 + 4_000 * (3 if plan.quick else 15)

    def run(self, ctx: Context, tree: Tree) -> None:
        mine = ctx.copy(tree, "earshot")
        git = GitPeer("shadow-git", ctx.copy(tree, "shadow-git"), ctx.work / "stores" / "git")
        ctx.progress.step("shadow git's first checkpoint")
        git.init()
        git.snapshot()
        home = ctx.scratch("home")
        record = ctx.results.measure
        ctx.progress.step("the watcher's start, the first batch")
        with Project(mine, home=home, extra_tables=TABLES) as project:
            watcher = Watcher(str(project.root), str(checkpoints_dir(project.root, home)))
            record(NAME, "watcher_start", tree.key, "earshot", timed(watcher.start))
            try:
                session = create_session(project).id
                engine = Engine(project, session, tracker=watcher, link_conversation=False)
                engine.run_batch([Bash("true")])  # the process's first call: a full restage
                time.sleep(RACY)  # what was written so far leaves the racy window
                repeat = 3 if ctx.plan.quick else 15
                for r in range(repeat):
                    ctx.progress.step(f"repeat {r + 1}/{repeat}")
                    cases: list[tuple[str, list[Call], str | None, str | None]] = [
                        ("engine_write_file", [WriteFile(f"w{r}.txt", b"x\n" * 40)], None, None),
                        ("engine_bash_true", [Bash("true")], "true", "true"),
                        (
                            "engine_bash_10",
                            [Bash(TEN.format(r=f"e{r}"))],
                            TEN.format(r=f"p{r}"),
                            TEN.format(r=f"g{r}"),
                        ),
                    ]
                    for metric, calls, bare, on_git in cases:
                        batch = timed(lambda c=calls: engine.run_batch(c), sync=False)
                        if bare is None:
                            path = mine / f"bare{r}.txt"
                            alone = timed(lambda p=path: p.write_bytes(b"x\n" * 40), sync=False)
                        else:
                            argv = shell_argv(bare)
                            alone = timed(
                                lambda a=argv: subprocess.run(a, cwd=mine, check=True), sync=False
                            )
                        record(NAME, metric, tree.key, "earshot", max(batch - alone, 0.0))
                        if on_git is None:
                            (git.tree / f"w{r}.txt").write_bytes(b"x\n" * 40)
                        else:
                            subprocess.run(shell_argv(on_git), cwd=git.tree, check=True)
                    seconds = timed(git.snapshot)
                    for metric, *_ in cases:
                        record(NAME, metric, tree.key, "shadow-git", seconds)
            finally:
                watcher.stop()


FIGURE = EngineWatch()
