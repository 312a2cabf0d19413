"""Costs that must grow with the work, not faster: a batch of N writes, an undo of N deletes.

An ``earshot exec`` batch of N write_file calls, and an ``earshot undo`` of
an ``earshot bash 'rm -rf d*'`` that deleted N files, at N, 2N and 4N
(writes: 2,500 to 10,000; undo: 12,500 to 50,000; ``--quick``: 500 to
2,000 and 1,000 to 4,000). Each is timed beside ``cp -a`` of the same files
(peer ``cp-a``: the least any tool must spend writing them), alternating,
each in a fresh root and store, dirty pages written before each timed
command. Linear work shows as a ratio to ``cp -a`` that stays flat as N
grows. The files are the figure's own, so it runs once, on the plan's first
tree.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

from benchmarks.suite.plan import Plan
from benchmarks.suite.runner import Context, Tree, alternate, timed
from benchmarks.suite.trees import TreeSpec

NAME = "linear"
FILES_PER_DIR = 250
WRITES = {True: (500, 1_000, 2_000), False: (2_500, 5_000, 10_000)}  # by plan.quick
UNDOS = {True: (1_000, 2_000, 4_000), False: (12_500, 25_000, 50_000)}


class Root:
    """One fresh root and store for earshot, under ``work``."""

    def __init__(self, exe: str, work: Path) -> None:
        self.exe = exe
        self.root, self.home = work / "root", work / "home"
        for path in (self.root, self.home):
            shutil.rmtree(path, ignore_errors=True)
        self.root.mkdir(parents=True)
        self.session = ""

    def earshot(self, *argv: str, stdin: bytes | None = None) -> str:
        env = dict(os.environ, EARSHOT_HOME=str(self.home), EARSHOT_WATCH="never")
        env.pop("EARSHOT_SESSION", None)
        # --root: a root inside another git work tree would otherwise mean that tree
        argv_ = [self.exe, *argv, "--root", str(self.root)]
        proc = subprocess.run(argv_, cwd=self.root, env=env, input=stdin, capture_output=True)
        if proc.returncode not in (0, 3):
            raise RuntimeError(f"earshot {' '.join(argv)}: {proc.stderr.decode().strip()}")
        return proc.stdout.decode()

    def new_session(self) -> None:
        self.session = json.loads(self.earshot("session", "new", "--json"))["id"]


def make_files(top: Path, count: int) -> None:
    for i in range(count):
        d = top / f"d{i // FILES_PER_DIR}"
        if i % FILES_PER_DIR == 0:
            d.mkdir(parents=True, exist_ok=True)
        (d / f"f{i}.txt").write_text(f"{i}\n" * 20)


def copy_seconds(src: Path, work: Path) -> float:
    """``cp -a`` of ``src``: the least writing its files costs."""
    dst = work / "copy"
    shutil.rmtree(dst, ignore_errors=True)
    seconds = timed(lambda: subprocess.run(["cp", "-a", str(src), str(dst)], check=True))
    shutil.rmtree(dst)
    return seconds


def writes(exe: str, work: Path, count: int) -> float:
    """An ``earshot exec`` of ``count`` write_file calls into a near-empty root."""
    at = Root(exe, work)
    (at.root / "README").write_text("a tree\n")
    at.new_session()
    calls = [
        {"tool": "write_file", "path": f"d{i // FILES_PER_DIR}/f{i}.txt", "content": f"{i}\n" * 20}
        for i in range(count)
    ]
    data = json.dumps(calls).encode()
    return timed(lambda: at.earshot("exec", "--session", at.session, stdin=data))


def undo(exe: str, work: Path, count: int) -> float:
    """An ``earshot undo`` of a command that deleted ``count`` files; checked."""
    at = Root(exe, work)
    make_files(at.root, count)
    at.new_session()
    at.earshot("bash", "--session", at.session, "rm -rf d*")
    if any(at.root.rglob("f*.txt")):
        raise RuntimeError(f"the command ran outside {at.root}: its files are still there")
    seconds = timed(lambda: at.earshot("undo", "--session", at.session))
    if sum(1 for _ in at.root.rglob("f*.txt")) != count:
        raise RuntimeError(f"undo of {count:,} deletes did not bring every file back")
    return seconds


class Linear:
    name = NAME
    title = "Costs that grow with the work: N writes, an undo of N deletes"

    def applies(self, tree: TreeSpec, plan: Plan) -> bool:
        return tree == plan.trees[0]

    def weight(self, tree: TreeSpec, plan: Plan) -> float:
        return 4 * (sum(WRITES[plan.quick]) + sum(UNDOS[plan.quick])) * plan.repeat

    def run(self, ctx: Context, tree: Tree) -> None:
        record = ctx.results.measure
        for kind, sizes in (("writes", WRITES[ctx.plan.quick]), ("undo", UNDOS[ctx.plan.quick])):
            for count in sizes:
                metric = f"exec_{count}_writes" if kind == "writes" else f"undo_{count}_deletes"
                for r in range(ctx.plan.repeat):
                    for peer in alternate(("earshot", "cp-a"), r):
                        ctx.progress.step(f"{kind} of {count:,} files, {peer}")
                        if peer == "cp-a":
                            source = ctx.scratch("source")
                            make_files(source, count)
                            seconds = copy_seconds(source, ctx.work)
                        elif kind == "writes":
                            seconds = writes(ctx.earshot, ctx.work, count)
                        else:
                            seconds = undo(ctx.earshot, ctx.work, count)
                        record(NAME, metric, tree.key, peer, seconds)


FIGURE = Linear()
