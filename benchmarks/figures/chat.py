"""What a reply's batch costs inside ``earshot chat``, against a shadow-git checkpoint.

``earshot chat -p`` runs one prompt against a scripted Messages API server
on 127.0.0.1 (tests/model_servers) through the real ``anthropic`` SDK: each
reply holds one ``bash`` call (``echo N > chat-bench/fN.txt``), then a final
text. The cost of one reply and its batch (``chat_reply``) is the slope
between a short and a long session, (T(long) - T(short)) / (replies(long) -
replies(short)), so the start-up a run pays once (the interpreter, the SDK's
import, the session) cancels out; the short session's whole time is
``chat_session``. Both with the watch daemon (``earshot-daemon``: the
default, ``EARSHOT_WATCH=auto``) and without it (``earshot``: ``never``),
alternating. Sessions of 1 and 6 replies (``--quick``: 1 and 3). In the same
run the peer checkpoints its own copy of the tree after one changed file
(shadow git's ``add -A`` + ``commit``), once a repeat: the reply's peer.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

from benchmarks.peers import GitPeer
from benchmarks.suite import testkit
from benchmarks.suite.plan import Plan
from benchmarks.suite.runner import Context, Tree, alternate, timed, tree_weight
from benchmarks.suite.trees import TreeSpec

NAME = "chat"
MODES = {"earshot-daemon": "auto", "earshot": "never"}
MAX_FILES = 100_000


class Sessions:
    """``earshot chat -p`` sessions in one tree, each on a fresh script."""

    def __init__(self, tree: Path, home: Path, earshot: str) -> None:
        self.tree = tree
        self.home = home
        self.earshot = earshot
        self.offset = 0

    def script(self, replies: int) -> list[Any]:
        from model_servers import ToolCall

        turns: list[Any] = []
        for n in range(self.offset, self.offset + replies):
            command = f"mkdir -p chat-bench && echo {n} > chat-bench/f{n}.txt"
            turns.append([ToolCall("bash", {"command": command})])
        self.offset += replies
        return [*turns, "done"]

    def run(self, mode: str, replies: int) -> float:
        """One whole session; its wall seconds."""
        from model_servers import AnthropicServer

        with AnthropicServer(self.script(replies)) as model:
            env = {
                **os.environ,
                "EARSHOT_HOME": str(self.home),
                "EARSHOT_WATCH": mode,
                "ANTHROPIC_BASE_URL": model.url,
                "ANTHROPIC_API_KEY": "bench",
            }
            env.pop("EARSHOT_SESSION", None)
            argv = [self.earshot, "chat", "-p", "go", "--model", "anthropic:bench"]
            argv += ["--allow", "bash", "--json", "--root", str(self.tree)]
            done: list[subprocess.CompletedProcess[str]] = []
            seconds = timed(
                lambda: done.append(
                    subprocess.run(
                        argv, cwd=self.tree, env=env, capture_output=True, text=True, check=False
                    )
                )
            )
        out = done[0]
        if out.returncode != 0 or len(json.loads(out.stdout)["batches"]) != replies:
            raise RuntimeError(f"earshot chat failed: {out.stdout[-400:]} {out.stderr[-400:]}")
        if not (self.tree / "chat-bench" / f"f{self.offset - 1}.txt").exists():
            raise RuntimeError(f"earshot chat worked outside {self.tree}")
        return seconds

    def stop_daemon(self) -> None:
        subprocess.run(
            [self.earshot, "watch", "--stop", "--root", str(self.tree)],
            env={**os.environ, "EARSHOT_HOME": str(self.home)},
            capture_output=True,
            check=False,
        )


class Chat:
    name = NAME
    title = "A reply and its batch in earshot chat"

    def applies(self, tree: TreeSpec, plan: Plan) -> bool:
        return tree.kind == "generated" and tree.files <= MAX_FILES

    def weight(self, tree: TreeSpec, plan: Plan) -> float:
        return tree_weight(tree) * 4 + 20_000 * plan.repeat * (4 if plan.quick else 7)

    def run(self, ctx: Context, tree: Tree) -> None:
        testkit.on_path()
        short, long = (1, 3) if ctx.plan.quick else (1, 6)
        sessions = Sessions(ctx.copy(tree, "earshot"), ctx.work / "home", ctx.earshot)
        git = GitPeer("shadow-git", ctx.copy(tree, "shadow-git"), ctx.work / "stores" / "git")
        ctx.progress.step("shadow git's first checkpoint")
        git.init()
        git.snapshot()
        record = ctx.results.measure
        try:
            ctx.progress.step("the first session (records the tree, starts the daemon)")
            sessions.run("auto", 1)
            for r in range(ctx.plan.repeat):
                for peer in alternate(list(MODES), r):
                    ctx.progress.step(f"repeat {r + 1}: sessions of {short} and {long}, {peer}")
                    first = sessions.run(MODES[peer], short)
                    second = sessions.run(MODES[peer], long)
                    record(NAME, "chat_reply", tree.key, peer, (second - first) / (long - short))
                    record(NAME, "chat_session", tree.key, peer, first)
                ctx.progress.step(f"repeat {r + 1}: shadow git")
                touched = git.tree / "chat-bench" / "git-touch.txt"
                touched.parent.mkdir(exist_ok=True)
                touched.write_text(f"{r}\n")
                record(NAME, "chat_reply", tree.key, "shadow-git", timed(git.snapshot))
        finally:
            sessions.stop_daemon()


FIGURE = Chat()
