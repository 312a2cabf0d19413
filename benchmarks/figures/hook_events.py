"""One hook event as the agent runs it: ``earshot hook claude``, through the daemon.

earshot's hooks are installed in the earshot copy of the tree by
``earshot install claude``, and each event runs the command it wrote, as
Claude Code runs it: ``/bin/sh -c COMMAND`` as a child of the agent's
process (this one), the event's JSON on stdin, in Claude Code's payload
shape (session, transcript path, cwd, permission mode, the tool's name,
input and id; a PostToolUse's response). The tree is recorded and the
daemon started first (untimed), then a session starts and a warm-up
response runs. Each repeat runs responses of Bash calls: a PreToolUse
(the response's first opens the batch), the file the command writes, its
PostToolUse, a read-only tool's PreToolUse; then the response's
PostToolBatch and the next UserPromptSubmit. Every event is a whole
process, timed; right after each, the same interpreter's bare start
(``python -c pass``, the floor no hook process goes below).

The peer in the same run: shadow git on its own copy, a checkpoint per call
(``add -A`` + ``commit`` after the call's one written file), which is what
a hook of a shadow-git tool runs per call.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import time
from pathlib import Path
from typing import Any

from benchmarks.figures.calls import settle
from benchmarks.peers.calls import EarshotCalls
from benchmarks.peers.git import GitPeer
from benchmarks.suite.plan import Plan
from benchmarks.suite.runner import Context, Tree, alternate, timed, tree_weight
from benchmarks.suite.trees import TreeSpec

NAME = "hook_events"
EARSHOT = "earshot-daemon"
FLOOR = "python-floor"
CALLS = 5  # Bash calls a response
NOTE = (
    "A Bash call's hooks: shadow git's is its checkpoint (`add -A` + `commit` after the "
    "call's file); `python -c pass`'s, two bare starts, one for each event."
)
RESPONSES = 2  # responses a repeat


class Agent:
    """Claude Code's side of the hooks: it runs each event's command as a child."""

    def __init__(self, peer: EarshotCalls, command: str) -> None:
        self.command = command
        self.python = shlex.split(self.command)[0]
        self.tree = peer.tree
        self.env = dict(peer.peer.env, CLAUDE_PROJECT_DIR=str(peer.tree))
        self.env.pop("EARSHOT_SESSION", None)
        self.session = f"bench-{os.getpid()}-{time.monotonic_ns()}"
        self.ids = 0

    def event(self, name: str, **fields: Any) -> None:
        """Run the hook for one event; it must succeed and say nothing."""
        payload = {
            "session_id": self.session,
            "transcript_path": str(self.tree.parent / "transcript.jsonl"),
            "cwd": str(self.tree),
            "permission_mode": "default",
            "hook_event_name": name,
            **fields,
        }
        done = subprocess.run(
            ["/bin/sh", "-c", self.command],
            input=json.dumps(payload).encode(),
            capture_output=True,
            cwd=self.tree,
            env=self.env,
            check=False,
        )
        if done.returncode != 0 or done.stdout.strip():
            raise RuntimeError(
                f"hook {name}: exit {done.returncode}, {done.stdout!r} {done.stderr.decode()!r}"
            )

    def timed(self, name: str, **fields: Any) -> tuple[float, float]:
        """One event's seconds, and the floor's right after."""
        seconds = timed(lambda: self.event(name, **fields))
        floor = timed(lambda: subprocess.run([self.python, "-c", "pass"], check=True))
        return seconds, floor

    def bash(self, command: str, run: Any, first: bool) -> dict[str, tuple[float, float]]:
        """A whole Bash call and a Read after it: metric -> (seconds, floor)."""
        self.ids += 1
        ident = f"toolu_{self.ids:024d}"
        tool = {"tool_name": "Bash", "tool_input": {"command": command, "description": "w"}}
        pre = self.timed("PreToolUse", tool_use_id=ident, **tool)
        run()
        response = {"stdout": "", "stderr": "", "interrupted": False, "isImage": False}
        post = self.timed("PostToolUse", tool_use_id=ident, tool_response=response, **tool)
        read = self.timed(
            "PreToolUse",
            tool_name="Read",
            tool_input={"file_path": str(self.tree / "README.md")},
            tool_use_id=f"{ident}r",
        )
        out = {"event_open" if first else "event_pre": pre, "event_post": post, "event_read": read}
        if not first:
            out["event_call"] = (pre[0] + post[0], pre[1] + post[1])
        return out


class HookEvents:
    name = NAME
    title = "Hook events: each of a Bash call's, as a whole process through the daemon"

    def applies(self, tree: TreeSpec, plan: Plan) -> bool:
        return True

    def weight(self, tree: TreeSpec, plan: Plan) -> float:
        # two copies, two first snapshots, and git's whole-tree checkpoint per call
        return tree_weight(tree) * (4 + plan.repeat * RESPONSES * CALLS * 0.3)

    def run(self, ctx: Context, tree: Tree) -> None:
        mine = EarshotCalls(EARSHOT, ctx.earshot, ctx.copy(tree, EARSHOT), ctx.work / "earshot")
        git = GitPeer("shadow-git", ctx.copy(tree, "shadow-git"), ctx.work / "git")
        settle(time.monotonic())
        try:
            self._measure(ctx, tree, mine, git)
        finally:
            mine.close()
            git.stop_daemon()

    def _measure(self, ctx: Context, tree: Tree, mine: EarshotCalls, git: GitPeer) -> None:
        ctx.progress.step("the hooks' install, first snapshots, the daemon's start")
        # What the install writes, and the calls' directory, are there before
        # the first snapshot: nothing changes outside a call.
        installed = json.loads(mine.command("install", "claude", "--json"))
        out = mine.tree / "hook-bench"
        out.mkdir()
        mine.setup()
        git.init()
        git.snapshot()
        agent = Agent(mine, str(installed["command"]))
        agent.event("SessionStart", source="startup")
        agent.event("UserPromptSubmit", prompt="warm up")
        n = 0
        record = ctx.results.measure
        for r in range(ctx.plan.repeat * RESPONSES + 1):  # the first response warms up
            for side in alternate(("earshot", "git"), r):
                ctx.progress.step(f"response {r + 1}, {side}")
                if side == "git":
                    for call in range(CALLS):
                        (git.tree / f"hook-bench-{r}-{call}").write_text(f"{r} {call}\n")
                        seconds = timed(git.snapshot)
                        if r:
                            record(NAME, "event_call", tree.key, "shadow-git", seconds, note=NOTE)
                    continue
                times: list[tuple[str, tuple[float, float]]] = []
                for call in range(CALLS):
                    n += 1
                    path = out / f"f{n}"
                    made = agent.bash(
                        f"echo {n} > hook-bench/f{n}",
                        lambda p=path, k=n: p.write_text(f"{k}\n"),
                        first=call == 0,
                    )
                    times += made.items()
                times.append(("event_batch_end", agent.timed("PostToolBatch", tool_calls=[])))
                times.append(("event_prompt", agent.timed("UserPromptSubmit", prompt=f"next {r}")))
                for metric, (seconds, floor) in times if r else ():
                    record(NAME, metric, tree.key, EARSHOT, seconds)
                    record(NAME, metric, tree.key, FLOOR, floor)
        ctx.progress.step("checking what the hooks recorded")
        _check_recorded(mine, out / f"f{n}")
        ctx.progress.step("stopping the daemon")


def _check_recorded(mine: EarshotCalls, last: Path) -> None:
    """The hooks recorded the calls: the file the last call wrote is a change of a batch."""
    doc = json.loads(mine.command("log", "--continue", "--json"))
    rel = str(last.relative_to(mine.tree))
    changed = {c["path"] for batch in doc.get("batches", []) for c in batch.get("changes", [])}
    if rel not in changed:
        raise RuntimeError(f"earshot's hooks recorded no change of {rel} in session {doc}")


FIGURE = HookEvents()
