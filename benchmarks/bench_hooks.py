"""What earshot's hooks cost the real Claude Code, against a shadow-git checkpoint.

The agent is the real ``claude`` binary (tests/real_agents installs the pinned
npm package) on a scripted model server on 127.0.0.1 (tests/model_servers):
one prompt whose responses each hold ``--calls-per-response`` Bash calls
(``echo N > hooks-bench/fN.txt``), then a final text. The same session is
run three ways, alternating, ``--repeat`` times:

- ``none``: no hooks at all;
- ``noop``: hooks on the same events and matchers as earshot's, each running
  ``true`` (what the agent's own hook machinery costs: a shell, a process);
- ``earshot``: ``earshot install claude`` (the daemon hosting the events).

Each way runs at two lengths (``--short`` and ``--long`` responses); the
cost of one Bash call is the slope, (T(long) - T(short)) / (calls(long) -
calls(short)), so what a run pays once (start-up, the prompt's and the
session's own events) cancels out. Per call earshot pays its PreToolUse and
PostToolUse, and a share of the response's PostToolBatch. In the same run,
the peer checkpoints the same tree with ``git add -A`` + ``git commit``
(GIT_DIR outside the tree) after one changed file, ``--repeat`` times.

    python benchmarks/bench_hooks.py --files 100000 --repeat 5 \\
        --earshot /tmp/bench-venv/bin/earshot --out benchmarks/results-hooks.json
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))

import gen_tree  # noqa: E402
from bench_store import log, machine_info, machine_markdown, summarize  # noqa: E402
from model_servers import AnthropicServer, ToolCall  # noqa: E402
from real_agents import Invocation, binary, claude, run  # noqa: E402
from shadow_git import ShadowGit  # noqa: E402

WAYS = ("none", "noop", "earshot")


def _script(responses: int, per: int, offset: int) -> list[Any]:
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


def _noop_settings(home: Path, earshot_doc: dict[str, Any]) -> None:
    """The same events and matchers as earshot's, each running ``true``."""
    hooks = {
        event: [
            {**group, "hooks": [{"type": "command", "command": "true", "timeout": 120}]}
            for group in groups
        ]
        for event, groups in earshot_doc["hooks"].items()
    }
    (home / ".claude" / "settings.json").write_text(json.dumps({"hooks": hooks}))


class Runner:
    """Runs the scripted Claude Code session in one tree, one way or another."""

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
        """Install earshot once, to copy its events for ``noop``."""
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

    def session(self, way: str, responses: int, per: int) -> float:
        """One whole ``claude -p`` run; its wall time in seconds."""
        home = self._home(way)
        offset = self.count
        self.count += responses * per
        with AnthropicServer(_script(responses, per, offset)) as model:
            built = claude(
                "write the files", cwd=self.tree, model=model, home=home, tools=("Bash",)
            )
            if way == "earshot":
                self._install(home)
            elif way == "noop":
                _noop_settings(home, self.earshot_settings)
            env = {**built.env, "EARSHOT_HOME": str(self.earshot_home)}
            invocation = Invocation(built.agent, built.argv, env, built.cwd, built.home)
            start = time.perf_counter()
            done = run(invocation, timeout=600)
            elapsed = time.perf_counter() - start
        if done.rc != 0:
            raise RuntimeError(f"claude failed ({way}): {done}")
        return elapsed


def bench(args: argparse.Namespace) -> dict[str, Any]:
    work = args.work_dir / "hooks"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    tree = work / "tree"
    if args.tree is not None:
        log(f"copying {args.tree}")
        shutil.copytree(args.tree, tree, symlinks=True)
    else:
        log(f"generating {args.files:,} files")
        gen_tree.generate(tree, args.files, args.seed)
    files = sum(len(names) for _, _, names in os.walk(tree))
    git = ShadowGit(tree, work / "shadow.git")
    git.init()
    log("shadow git: the first checkpoint")
    git.snapshot("first")
    runner = Runner(tree, work, args.earshot)
    runner.prepare()
    log("earshot: the first run (starts the daemon, records the tree)")
    runner.session("earshot", 1, 1)
    per = args.calls_per_response
    lengths = {"short": args.short, "long": args.long}
    times: dict[str, dict[str, list[float]]] = {w: {k: [] for k in lengths} for w in WAYS}
    git_times: list[float] = []
    for rep in range(args.repeat):
        order = WAYS if rep % 2 == 0 else tuple(reversed(WAYS))
        for way in order:
            for length, responses in lengths.items():
                seconds = runner.session(way, responses, per)
                times[way][length].append(seconds)
                log(f"repeat {rep + 1}: {way} {length} {seconds:.2f} s")
        (tree / "hooks-bench" / "git-touch.txt").write_text(f"{rep}\n")
        start = time.perf_counter()
        git.snapshot(f"checkpoint {rep}")
        git_times.append(time.perf_counter() - start)
    calls = (args.long - args.short) * per
    per_call = {
        way: [
            (long - short) / calls
            for short, long in zip(times[way]["short"], times[way]["long"], strict=True)
        ]
        for way in WAYS
    }
    extra = {
        way: [p - n for p, n in zip(per_call[way], per_call["none"], strict=True)]
        for way in ("noop", "earshot")
    }
    git_median = statistics.median(git_times)
    return {
        "files": files,
        "calls_per_response": per,
        "responses": lengths,
        "claude": subprocess.run(
            [str(binary("claude")), "--version"], capture_output=True, text=True, check=False
        ).stdout.strip(),
        "session_s": {w: {k: summarize(v) for k, v in d.items()} for w, d in times.items()},
        "per_call_s": {w: summarize(v) for w, v in per_call.items()},
        "hook_cost_per_call_s": {w: summarize(v) for w, v in extra.items()},
        "shadow_git_checkpoint_s": summarize(git_times),
        "ratio_earshot_to_git": statistics.median(extra["earshot"]) / git_median,
        "ratio_earshot_beyond_noop_to_git": (
            statistics.median([e - n for e, n in zip(extra["earshot"], extra["noop"], strict=True)])
            / git_median
        ),
    }


def markdown(result: dict[str, Any]) -> str:
    def ms(summary: dict[str, Any]) -> str:
        low, high = summary["min"] * 1000, summary["max"] * 1000
        return f"{summary['median'] * 1000:.0f} ms ({low:.0f}-{high:.0f})"

    cost = result["hook_cost_per_call_s"]
    head = f"{result['files']:,} files, {result['calls_per_response']} Bash calls a response"
    rows = [
        f"| {head} | median (min-max) |",
        "|---|---|",
        f"| one Bash call, no hooks (agent and model) | {ms(result['per_call_s']['none'])} |",
        f"| + hooks running `true` (the agent's hook machinery) | {ms(cost['noop'])} |",
        f"| + earshot's hooks | {ms(cost['earshot'])} |",
        f"| shadow git (`add -A` + `commit`) | {ms(result['shadow_git_checkpoint_s'])} |",
        f"| earshot's hooks / shadow git | {result['ratio_earshot_to_git']:.3f} |",
        f"| beyond `true` / shadow git | {result['ratio_earshot_beyond_noop_to_git']:.3f} |",
    ]
    return "\n".join(rows)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=100_000)
    parser.add_argument("--tree", type=Path, default=None, help="copy this tree instead")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--calls-per-response", type=int, default=5)
    parser.add_argument("--short", type=int, default=1, help="responses in the short session")
    parser.add_argument("--long", type=int, default=5, help="responses in the long session")
    parser.add_argument("--earshot", default=str(Path(sys.executable).parent / "earshot"))
    parser.add_argument("--work-dir", type=Path, default=HERE / "work")
    parser.add_argument("--out", type=Path, default=None)
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    result = bench(args)
    doc = {"hooks": result, "machine": machine_info(args.work_dir, args.earshot)}
    if args.out is not None:
        args.out.write_text(json.dumps(doc, indent=2) + "\n")
    print(markdown(result))
    print(machine_markdown(doc["machine"]))
    subprocess.run(
        [args.earshot, "watch", "--stop", "--root", str(args.work_dir / "hooks" / "tree")],
        env={**os.environ, "EARSHOT_HOME": str(args.work_dir / "hooks" / "earshot-home")},
        capture_output=True,
        check=False,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
