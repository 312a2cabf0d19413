"""What each hook event costs, as a whole process, through the root's daemon.

A stand-in agent process (this script) runs ``earshot hook claude`` the way
Claude Code does (a child, the payload on stdin) on a tree of ``--files``
files, once the daemon runs and the tree is recorded: responses of
``--calls`` Bash calls, each a PreToolUse, a file written, a PostToolUse,
then a Read's PreToolUse (a read-only tool: answered before anything is
imported) and the response's PostToolBatch. Each event is a whole process
timed with ``time.perf_counter``; the floor is a bare ``python -c pass`` of
the same interpreter. In the same run, the peer checkpoints the same tree
(``git add -A`` + ``git commit``, GIT_DIR outside it) after one changed file.

    python benchmarks/bench_hook_events.py --files 100000 --responses 10 \\
        --python /tmp/bench-venv/bin/python --out benchmarks/results-hook-events.json
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

import gen_tree  # noqa: E402
from bench_store import log, machine_info, machine_markdown, summarize  # noqa: E402
from shadow_git import ShadowGit  # noqa: E402


class Hooks:
    """``earshot hook claude`` run by this process, as an agent runs it."""

    def __init__(self, python: str, tree: Path, home: Path) -> None:
        main = subprocess.run(
            [python, "-c", "import earshot.cli, os; print(os.path.dirname(earshot.cli.__file__))"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        self.argv = [python, os.path.join(main, "__main__.py"), "hook", "claude"]
        self.tree = tree
        self.env = {**os.environ, "EARSHOT_HOME": str(home), "CLAUDE_PROJECT_DIR": str(tree)}
        self.env.pop("EARSHOT_WATCH", None)
        self.session = f"bench-{os.getpid()}"

    def event(self, name: str, **fields: Any) -> float:
        payload = {"session_id": self.session, "cwd": str(self.tree), "hook_event_name": name}
        payload.update(fields)
        start = time.perf_counter()
        done = subprocess.run(
            self.argv, input=json.dumps(payload).encode(), capture_output=True, cwd=self.tree
        )
        elapsed = time.perf_counter() - start
        if done.returncode != 0 or done.stdout.strip():
            raise RuntimeError(f"{name}: {done.returncode} {done.stdout!r} {done.stderr!r}")
        return elapsed

    def stop(self, python: str) -> None:
        subprocess.run(
            [python, self.argv[1], "watch", "--stop", "--root", str(self.tree)],
            env=self.env,
            capture_output=True,
            check=False,
        )


def floor(python: str, repeat: int) -> list[float]:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        subprocess.run([python, "-c", "pass"], check=True)
        times.append(time.perf_counter() - start)
    return times


def bench(args: argparse.Namespace) -> dict[str, Any]:
    work = args.work_dir / "hook-events"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    tree = work / "tree"
    log(f"generating {args.files:,} files")
    gen_tree.generate(tree, args.files, args.seed)
    git = ShadowGit(tree, work / "shadow.git")
    git.init()
    git.snapshot("first")
    hooks = Hooks(args.python, tree, work / "earshot-home")
    log("earshot: starting the daemon, recording the tree")
    hooks.event("SessionStart", source="startup")
    hooks.event("UserPromptSubmit", prompt="bench")
    out = tree / "hook-bench"
    out.mkdir()
    times: dict[str, list[float]] = {
        k: [] for k in ("open_pre", "pre", "post", "read", "response_end", "prompt")
    }
    n = 0
    for response in range(args.responses + 1):  # the first one warms up
        for call in range(args.calls):
            n += 1
            tool_input = {"command": f"echo {n} > hook-bench/f{n}", "description": "w"}
            pre = hooks.event(
                "PreToolUse", tool_name="Bash", tool_input=tool_input, tool_use_id=f"t{n}"
            )
            (out / f"f{n}").write_text(f"{n}\n")
            post = hooks.event(
                "PostToolUse", tool_name="Bash", tool_input=tool_input, tool_use_id=f"t{n}"
            )
            read = hooks.event("PreToolUse", tool_name="Read", tool_input={"file_path": "x"})
            if response:
                times["open_pre" if call == 0 else "pre"].append(pre)
                times["post"].append(post)
                times["read"].append(read)
        end = hooks.event("PostToolBatch", tool_calls=[])
        prompt = hooks.event("UserPromptSubmit", prompt=f"next {response}")
        if response:
            times["response_end"].append(end)
            times["prompt"].append(prompt)
    git_times = []
    for rep in range(args.git_repeat):
        (out / "git-touch").write_text(f"{rep}\n")
        start = time.perf_counter()
        git.snapshot(f"checkpoint {rep}")
        git_times.append(time.perf_counter() - start)
    hooks.stop(args.python)
    pairs = [a + b for a, b in zip(times["pre"], times["post"], strict=False)]
    git_median = statistics.median(git_times)
    return {
        "files": sum(len(names) for _, _, names in os.walk(tree)),
        "calls_per_response": args.calls,
        "events_s": {k: summarize(v) for k, v in times.items()},
        "pre_plus_post_s": summarize(pairs),
        "python_floor_s": summarize(floor(args.python, 20)),
        "shadow_git_checkpoint_s": summarize(git_times),
        "ratio_pre_plus_post_to_git": statistics.median(pairs) / git_median,
    }


def markdown(result: dict[str, Any]) -> str:
    def ms(summary: dict[str, Any]) -> str:
        low, high = summary["min"] * 1000, summary["max"] * 1000
        return f"{summary['median'] * 1000:.1f} ms ({low:.1f}-{high:.1f})"

    ev = result["events_s"]
    rows = [
        f"| event, {result['files']:,} files, daemon running | median (min-max) |",
        "|---|---|",
        f"| `python -c pass` (the floor) | {ms(result['python_floor_s'])} |",
        f"| a read-only tool's PreToolUse | {ms(ev['read'])} |",
        f"| PreToolUse, the response's first (opens the batch) | {ms(ev['open_pre'])} |",
        f"| PreToolUse, later calls | {ms(ev['pre'])} |",
        f"| PostToolUse | {ms(ev['post'])} |",
        f"| PreToolUse + PostToolUse of one call | {ms(result['pre_plus_post_s'])} |",
        f"| PostToolBatch (closes the batch) | {ms(ev['response_end'])} |",
        f"| UserPromptSubmit | {ms(ev['prompt'])} |",
        f"| shadow git (`add -A` + `commit`) | {ms(result['shadow_git_checkpoint_s'])} |",
        f"| Pre + Post / shadow git | {result['ratio_pre_plus_post_to_git']:.3f} |",
    ]
    return "\n".join(rows)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--responses", type=int, default=10)
    parser.add_argument("--calls", type=int, default=5, help="Bash calls a response")
    parser.add_argument("--git-repeat", type=int, default=7)
    parser.add_argument("--python", default=sys.executable, help="the interpreter earshot is in")
    parser.add_argument("--work-dir", type=Path, default=HERE / "work")
    parser.add_argument("--out", type=Path, default=None)
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    result = bench(args)
    doc = {"hook_events": result, "machine": machine_info(args.work_dir, None)}
    if args.out is not None:
        args.out.write_text(json.dumps(doc, indent=2) + "\n")
    print(markdown(result))
    print(machine_markdown(doc["machine"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
