"""What a reply's batch costs inside ``earshot chat``, against a shadow-git checkpoint.

``earshot chat -p`` runs one prompt against a scripted Messages API server
on 127.0.0.1 (tests/model_servers) through the real ``anthropic`` SDK: each
reply holds one ``bash`` call (``echo N > chat-bench/fN.txt``), then a final
text. The cost of one reply and its batch is the slope between a short and
a long session, (T(long) - T(short)) / (replies(long) - replies(short)), so
the start-up a run pays once (the interpreter, the SDK's import, the
session) cancels out; the short session's whole time is reported too. Both
with the watch daemon (the default, ``EARSHOT_WATCH=auto``) and without it
(``never``), alternating, ``--repeat`` times; in the same run the peer
checkpoints the same tree after one changed file (``git add -A`` + ``git
commit``, GIT_DIR outside the tree).

    python benchmarks/bench_chat.py --files 10000 100000 --repeat 5 \\
        --earshot /tmp/bench-venv/bin/earshot --out benchmarks/results-chat.json
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
from shadow_git import ShadowGit  # noqa: E402

MODES = ("auto", "never")


def _script(replies: int, offset: int) -> list[Any]:
    turns: list[Any] = []
    for n in range(offset, offset + replies):
        command = f"mkdir -p chat-bench && echo {n} > chat-bench/f{n}.txt"
        turns.append([ToolCall("bash", {"command": command})])
    return [*turns, "done"]


class Runner:
    """``earshot chat -p`` sessions on one tree, each with a fresh script."""

    def __init__(self, tree: Path, work: Path, earshot: str) -> None:
        self.tree = tree
        self.earshot = earshot
        self.home = work / "earshot-home"
        self.offset = 0

    def session(self, mode: str, replies: int) -> float:
        with AnthropicServer(_script(replies, self.offset)) as model:
            self.offset += replies
            env = {
                **os.environ,
                "EARSHOT_HOME": str(self.home),
                "EARSHOT_WATCH": mode,
                "ANTHROPIC_BASE_URL": model.url,
                "ANTHROPIC_API_KEY": "bench",
            }
            args = [self.earshot, "chat", "-p", "go", "--model", "anthropic:bench"]
            start = time.perf_counter()
            done = subprocess.run(
                [*args, "--allow", "bash", "--json"],
                cwd=self.tree,
                env=env,
                capture_output=True,
                text=True,
                check=False,
            )
            elapsed = time.perf_counter() - start
        if done.returncode != 0 or len(json.loads(done.stdout)["batches"]) != replies:
            raise RuntimeError(f"earshot chat failed: {done.stdout} {done.stderr}")
        return elapsed

    def stop_daemon(self) -> None:
        subprocess.run(
            [self.earshot, "watch", "--stop", "--root", str(self.tree)],
            env={**os.environ, "EARSHOT_HOME": str(self.home)},
            capture_output=True,
            check=False,
        )


def bench_size(args: argparse.Namespace, files: int) -> dict[str, Any]:
    work = args.work_dir / f"chat-{files}"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    tree = work / "tree"
    log(f"generating {files:,} files")
    gen_tree.generate(tree, files, args.seed)
    counted = sum(len(names) for _, _, names in os.walk(tree))
    git = ShadowGit(tree, work / "shadow.git")
    git.init()
    git.snapshot("first")
    runner = Runner(tree, work, args.earshot)
    log("earshot: the first session (records the tree, starts the daemon)")
    runner.session("auto", 1)
    lengths = {"short": args.short, "long": args.long}
    times: dict[str, dict[str, list[float]]] = {m: {k: [] for k in lengths} for m in MODES}
    git_times: list[float] = []
    try:
        for rep in range(args.repeat):
            for mode in MODES if rep % 2 == 0 else tuple(reversed(MODES)):
                for length, replies in lengths.items():
                    seconds = runner.session(mode, replies)
                    times[mode][length].append(seconds)
                    log(f"{files:,} files, repeat {rep + 1}: {mode} {length} {seconds:.2f} s")
            (tree / "chat-bench" / "git-touch.txt").write_text(f"{rep}\n")
            start = time.perf_counter()
            git.snapshot(f"checkpoint {rep}")
            git_times.append(time.perf_counter() - start)
    finally:
        runner.stop_daemon()
    replies = args.long - args.short
    per_reply = {
        mode: [(lg - sh) / replies for sh, lg in zip(d["short"], d["long"], strict=True)]
        for mode, d in times.items()
    }
    git_median = statistics.median(git_times)
    if not args.keep_work:
        shutil.rmtree(work, ignore_errors=True)
    return {
        "files": counted,
        "replies": lengths,
        "session_s": {m: {k: summarize(v) for k, v in d.items()} for m, d in times.items()},
        "per_reply_s": {m: summarize(v) for m, v in per_reply.items()},
        "shadow_git_checkpoint_s": summarize(git_times),
        "ratio_to_git": {m: statistics.median(v) / git_median for m, v in per_reply.items()},
    }


def markdown(results: list[dict[str, Any]]) -> str:
    def ms(summary: dict[str, Any]) -> str:
        low, high = summary["min"] * 1000, summary["max"] * 1000
        return f"{summary['median'] * 1000:.0f} ms ({low:.0f}-{high:.0f})"

    rows = [
        "| files | a reply and its batch, daemon | without it | shadow git checkpoint "
        "| ratio, daemon | ratio, without | the short session, whole |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in results:
        rows.append(
            f"| {r['files']:,} | {ms(r['per_reply_s']['auto'])} | {ms(r['per_reply_s']['never'])} "
            f"| {ms(r['shadow_git_checkpoint_s'])} | {r['ratio_to_git']['auto']:.2f} "
            f"| {r['ratio_to_git']['never']:.2f} | {ms(r['session_s']['auto']['short'])} |"
        )
    return "\n".join(rows)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, nargs="+", default=[10_000])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--short", type=int, default=1, help="replies in the short session")
    parser.add_argument("--long", type=int, default=6, help="replies in the long session")
    parser.add_argument("--earshot", default=str(Path(sys.executable).parent / "earshot"))
    parser.add_argument("--work-dir", type=Path, default=HERE / "work")
    parser.add_argument("--keep-work", action="store_true")
    parser.add_argument("--out", type=Path, default=None)
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    results = [bench_size(args, files) for files in args.files]
    doc = {"chat": results, "machine": machine_info(args.work_dir, args.earshot)}
    if args.out is not None:
        args.out.write_text(json.dumps(doc, indent=2) + "\n")
    print(markdown(results))
    print(machine_markdown(doc["machine"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
