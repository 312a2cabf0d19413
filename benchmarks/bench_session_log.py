"""Load + context of a 100,000-entry session.

    python benchmarks/bench_session_log.py [--entries N] [--repeat R]

Builds a session with a realistic mix (prompts, assistant messages, tool
calls and results of varied sizes, checkpoint batch links, a few compactions
and rewinds) through the public API, then times ``Session.open`` followed by
``context()`` from a warm page cache, printing the median and min-max.
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time
from pathlib import Path

from earshot.agent.log.entries import (
    AssistantMessage,
    BatchLink,
    Body,
    Compaction,
    ToolCall,
    ToolResult,
    UserMessage,
)
from earshot.agent.log.session import Session

WORDS = ["the", "a", "parser", "file", "test", "fix", "error", "line", "return", "class", "self"]


_CORPUS = " ".join(random.Random(1).choice(WORDS) for _ in range(400_000))


def text(rng: random.Random, low: int, high: int) -> str:
    size = rng.randint(low, high)
    start = rng.randrange(len(_CORPUS) - size)
    return _CORPUS[start : start + size]


def turn(rng: random.Random, n: int, batch: int) -> list[Body]:
    bodies: list[Body] = [
        UserMessage(text(rng, 40, 600)),
        AssistantMessage(text(rng, 100, 1200)),
    ]
    tools = rng.choice([0, 1, 2, 3, 4, 6])
    for k in range(tools):
        call_id = f"toolu_{n}_{k}"
        name = rng.choice(["read", "edit", "bash", "grep"])
        bodies.append(ToolCall(call_id, name, {"path": f"src/m{k}.py", "arg": text(rng, 10, 120)}))
        bodies.append(ToolResult(call_id, text(rng, 50, 4000), is_error=rng.random() < 0.05))
    if tools:
        bodies.append(AssistantMessage(text(rng, 50, 800)))
        bodies.append(BatchLink(batch))
    return bodies


def build(directory: Path, entries: int, seed: int = 7) -> Session:
    rng = random.Random(seed)
    session = Session.create(directory, directory)
    count = 0
    batch = 0
    n = 0
    next_compaction = 8_000
    next_rewind = 2_500
    pending: list[Body] = []
    while count + len(pending) < entries:
        n += 1
        batch += 1
        pending += turn(rng, n, batch)
        if len(pending) < 400:
            continue
        count += len(session.append_many(pending))
        pending = []
        if count >= next_compaction:
            prompts = session.prompts()
            first_kept = prompts[-min(10, len(prompts))].id
            session.append(Compaction(text(rng, 1500, 3000), first_kept))
            count += 1
            next_compaction += 8_000
        if count >= next_rewind:
            prompts = session.prompts()
            session.rewind(max(1, len(prompts) - rng.randint(1, 5)))
            count += 1
            next_rewind += 2_500
    session.append_many(pending[: max(0, entries - count)])
    return session


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--entries", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        started = time.perf_counter()
        built = build(Path(tmp), args.entries)
        build_s = time.perf_counter() - started
        size = built.path.stat().st_size
        total = len(built.entries())
        path = built.path
        del built
        loads: list[float] = []
        contexts: list[float] = []
        both: list[float] = []
        cpu: list[float] = []
        length = 0
        for _ in range(args.repeat):
            c0 = time.process_time()
            t0 = time.perf_counter()
            session = Session.open(path)
            t1 = time.perf_counter()
            length = len(session.context())
            t2 = time.perf_counter()
            cpu.append(time.process_time() - c0)
            loads.append(t1 - t0)
            contexts.append(t2 - t1)
            both.append(t2 - t0)
            del session

    def show(name: str, values: list[float]) -> str:
        ms = [v * 1000 for v in values]
        return (
            f"{name}: median {statistics.median(ms):.0f} ms (min {min(ms):.0f}, max {max(ms):.0f})"
        )

    print(f"session: {total} entries, {size / 1e6:.1f} MB, built in {build_s:.1f} s")
    print(f"context: {length} entries on the model-visible path")
    print(show("load + context", both))
    print(show("  load", loads))
    print(show("  context", contexts))
    print(show("load + context, CPU time", cpu))


if __name__ == "__main__":
    main()
