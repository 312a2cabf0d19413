"""What earshot's hooks cost the real Claude Code, against a shadow-git checkpoint.

Each copy of the tree is made a git work tree (``git init``), as a project
is. The agent is the real ``claude`` binary (tests/real_agents finds the pinned
npm package, or installs it into .agents/) on a scripted model server on
127.0.0.1 (tests/model_servers): one prompt whose responses each hold 5 Bash
calls (``echo N > hooks-bench/fN.txt``), then a final text. The same session
is run three ways, alternating:

- ``claude-code``: no hooks at all;
- ``hooks-true``: hooks on the same events and matchers as earshot's, each
  running ``true`` (what the agent's own hook machinery costs: a shell, a
  process);
- ``earshot``: ``earshot install claude``, as installed (its watch daemon
  hosting the events).

Each way runs at two lengths (1 and 5 responses; ``--quick``: 1 and 2
responses of 2 calls); the cost of one Bash call is the slope, (T(long) -
T(short)) / (calls(long) - calls(short)), so what a run pays once cancels
out. ``hook_call`` is what the hooks add to a call (the way's slope minus
the no-hooks one; ``claude-code``'s row is its own slope). In the same run,
shadow git checkpoints its own copy of the tree after one changed file,
once a repeat, as that row's peer.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

from benchmarks import git_view
from benchmarks.peers import GitPeer
from benchmarks.suite import testkit
from benchmarks.suite.plan import Plan
from benchmarks.suite.runner import Context, Tree, alternate, timed, tree_weight
from benchmarks.suite.trees import TreeSpec

NAME = "hooks"
WAYS = ("claude-code", "hooks-true", "earshot")
MAX_FILES = 100_000


def _script(responses: int, per: int, offset: int) -> list[Any]:
    from model_servers import ToolCall

    turns: list[Any] = []
    for r in range(responses):
        calls = []
        for c in range(per):
            n = offset + r * per + c
            command = f"mkdir -p hooks-bench && echo {n} > hooks-bench/f{n}.txt"
            calls.append(ToolCall("Bash", {"command": command, "description": "write"}))
        turns.append(calls)
    turns.append("done")
    return turns


class Sessions:
    """The scripted Claude Code session in one tree, one way or another."""

    def __init__(self, tree: Path, work: Path, earshot: str) -> None:
        self.tree = tree
        self.work = work
        self.earshot = earshot
        self.earshot_home = work / "earshot-home"
        self.count = 0
        self.earshot_settings: dict[str, Any] = {}

    def _home(self, way: str) -> Path:
        home = self.work / f"home-{way}"
        home.mkdir(parents=True, exist_ok=True)
        return home

    def prepare(self) -> None:
        """Install earshot once, to copy its events for ``hooks-true``."""
        home = self._home("earshot")
        self._install(home)
        self.earshot_settings = json.loads((home / ".claude" / "settings.json").read_text())

    def _install(self, home: Path) -> None:
        env = {**os.environ, "HOME": str(home), "EARSHOT_HOME": str(self.earshot_home)}
        subprocess.run(
            [self.earshot, "install", "claude", "--user"],
            env=env,
            cwd=self.tree,
            check=True,
            capture_output=True,
        )

    def _noop(self, home: Path) -> None:
        """The same events and matchers as earshot's, each running ``true``."""
        hooks = {
            event: [
                {**group, "hooks": [{"type": "command", "command": "true", "timeout": 120}]}
                for group in groups
            ]
            for event, groups in self.earshot_settings["hooks"].items()
        }
        (home / ".claude" / "settings.json").write_text(json.dumps({"hooks": hooks}))

    def run(self, way: str, responses: int, per: int) -> float:
        """One whole ``claude -p`` run; its wall seconds."""
        from model_servers import AnthropicServer
        from real_agents import Invocation, claude, run

        home = self._home(way)
        offset = self.count
        self.count += responses * per
        with AnthropicServer(_script(responses, per, offset)) as model:
            built = claude(
                "write the files", cwd=self.tree, model=model, home=home, tools=("Bash",)
            )
            if way == "earshot":
                self._install(home)
            elif way == "hooks-true":
                self._noop(home)
            env = {**built.env, "EARSHOT_HOME": str(self.earshot_home)}
            invocation = Invocation(built.agent, built.argv, env, built.cwd, built.home)
            done: list[Any] = []
            seconds = timed(lambda: done.append(run(invocation, timeout=600)))
        if done[0].rc != 0:
            raise RuntimeError(f"claude failed ({way}): {done[0]}")
        if not (self.tree / "hooks-bench" / f"f{self.count - 1}.txt").exists():
            raise RuntimeError(f"claude worked outside {self.tree}")
        return seconds

    def stop_daemon(self) -> None:
        subprocess.run(
            [self.earshot, "watch", "--stop", "--root", str(self.tree)],
            env={**os.environ, "EARSHOT_HOME": str(self.earshot_home)},
            capture_output=True,
            check=False,
        )


def claude_version() -> str:
    """The pinned Claude Code's version; installs it first if it is missing."""
    from real_agents import binary

    try:
        exe = binary("claude")
        out = subprocess.run([str(exe), "--version"], capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError) as exc:
        raise RuntimeError(
            f"no Claude Code to run ({exc}): tests/real_agents installs it with npm "
            "into .agents/ (.ci/run does it up front)"
        ) from exc
    return out.stdout.strip()


class Hooks:
    name = NAME
    title = "Hooks under the real Claude Code"

    def applies(self, tree: TreeSpec, plan: Plan) -> bool:
        return tree.kind == "kernel" or (tree.kind == "generated" and tree.files <= MAX_FILES)

    def weight(self, tree: TreeSpec, plan: Plan) -> float:
        return tree_weight(tree) * 3 + 60_000 * plan.repeat * (6 if plan.quick else 18)

    def run(self, ctx: Context, tree: Tree) -> None:
        testkit.on_path()
        version = claude_version()
        per, short, long = (2, 1, 2) if ctx.plan.quick else (5, 1, 5)
        sessions = Sessions(ctx.copy(tree, "earshot"), ctx.work, ctx.earshot)
        git = GitPeer("shadow-git", ctx.copy(tree, "shadow-git"), ctx.work / "stores" / "git")
        for copy in (sessions.tree, git.tree):
            # A project is a git work tree; and the hooks find their root as git
            # does, so a copy inside another work tree must be one of its own.
            git_view.git(copy, "init", "-q")
        ctx.progress.step("shadow git's first checkpoint")
        git.init()
        git.snapshot()
        note = f"Claude Code {version}; {per} Bash calls a response, sessions of {short} and {long}"
        record = ctx.results.measure
        try:
            sessions.prepare()
            ctx.progress.step("the first run (starts the daemon, records the tree)")
            sessions.run("earshot", 1, 1)
            calls = (long - short) * per
            for r in range(ctx.plan.repeat):
                slope: dict[str, float] = {}
                for way in alternate(WAYS, r):
                    ctx.progress.step(f"repeat {r + 1}: {way}, {short} and {long} responses")
                    first = sessions.run(way, short, per)
                    slope[way] = (sessions.run(way, long, per) - first) / calls
                for way in WAYS:
                    extra = slope[way] - (slope["claude-code"] if way != "claude-code" else 0.0)
                    record(NAME, "hook_call", tree.key, way, extra, note=note)
                ctx.progress.step(f"repeat {r + 1}: shadow git")
                touched = git.tree / "hooks-bench" / "git-touch.txt"
                touched.parent.mkdir(exist_ok=True)
                touched.write_text(f"{r}\n")
                record(NAME, "hook_call", tree.key, "shadow-git", timed(git.snapshot), note=note)
        finally:
            sessions.stop_daemon()


FIGURE = Hooks()
