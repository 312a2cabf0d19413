"""Where a daemon-backed call's time goes, against a bare interpreter's start-up.

On a copy of the tree with its watch daemon running (``EARSHOT_WATCH=always``),
each of these is timed as a whole process, in turn, their order reversed
every other repeat (20 repeats; ``--quick`` 3):

- ``python_floor``: ``python3 -c 'import socket, json, subprocess'``, the
  floor for any Python client (the interpreter the earshot script runs on);
- ``client_imports``: ``import earshot.cli.entry``, the thin client's own;
- ``watch_status``: ``earshot watch --status``, not hosted (the whole CLI
  in-process);
- ``hosted_log``: ``earshot log``, hosted, reads only (client, hello, a
  forked worker);
- ``hosted_write``: ``earshot write F``, hosted, one batch (the worker's
  LMDB commits);
- ``hosted_bash``: ``earshot bash 'true'``, hosted, one batch whose command
  the client runs.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

from benchmarks.suite.plan import Plan
from benchmarks.suite.runner import Context, Tree, alternate, timed, tree_weight
from benchmarks.suite.trees import TreeSpec

NAME = "client"
PEER = "earshot-daemon"
RACY = 2.5  # seconds: files written before then are trusted by their stat
MAX_FILES = 100_000


def interpreter_of(script: str) -> str:
    """The interpreter a console script runs on (its #! line)."""
    with open(script, "rb") as f:
        first = f.readline().decode().strip()
    return first[2:].strip() if first.startswith("#!") else sys.executable


class Client:
    name = NAME
    title = "Where a daemon-backed call's time goes"

    def applies(self, tree: TreeSpec, plan: Plan) -> bool:
        return tree.kind == "generated" and tree.files <= MAX_FILES

    def weight(self, tree: TreeSpec, plan: Plan) -> float:
        return tree_weight(tree) * 3 + 6 * 500 * (3 if plan.quick else 20)

    def run(self, ctx: Context, tree: Tree) -> None:
        exe = ctx.earshot
        python = interpreter_of(exe)
        root = ctx.copy(tree, PEER)
        env = dict(os.environ, EARSHOT_HOME=str(ctx.work / "home"), EARSHOT_WATCH="always")

        def run(argv: list[str], stdin: bytes = b"") -> str:
            done = subprocess.run(
                argv, cwd=root, env=env, input=stdin, capture_output=True, check=False
            )
            if done.returncode:
                raise RuntimeError(f"{' '.join(argv)} exited {done.returncode}: {done.stderr!r}")
            return done.stdout.decode()

        here = ("--root", str(root))  # a copy inside another git work tree would mean that tree
        env["EARSHOT_SESSION"] = run([exe, "session", "new", *here]).strip()
        try:
            ctx.progress.step("the first snapshot, the daemon started")
            run([exe, "snapshot", *here])
            run([exe, "watch", *here])
            run([exe, "bash", "true", *here])  # leaves the watch mark
            time.sleep(RACY)
            steps: list[tuple[str, list[str], bytes]] = [
                ("python_floor", [python, "-c", "import socket, json, subprocess"], b""),
                ("client_imports", [python, "-c", "import earshot.cli.entry"], b""),
                ("watch_status", [exe, "watch", "--status", *here], b""),
                ("hosted_log", [exe, "log", *here], b""),
                ("hosted_write", [exe, "write", "note.txt", *here], b"x\n"),
                ("hosted_bash", [exe, "bash", "true", *here], b""),
            ]
            repeat = 3 if ctx.plan.quick else 20
            for r in range(repeat):
                ctx.progress.step(f"repeat {r + 1}/{repeat}")
                for metric, argv, stdin in alternate(steps, r):
                    seconds = timed(lambda a=argv, i=stdin: run(a, i), sync=False)
                    ctx.results.measure(NAME, metric, tree.key, PEER, seconds)
        finally:
            subprocess.run([exe, "watch", "--stop", *here], cwd=root, env=env, capture_output=True)


FIGURE = Client()
