"""A session log of N entries, as an agent's long session leaves it; and its load.

Run as a script in the interpreter of the earshot under test (so its code is
the one timed): ``python session_build.py ENTRIES REPEAT DIR``. It builds the
session through earshot's public API (prompts, replies, tool calls and their
results of varied sizes, checkpoint batch links, a compaction every 8,000
entries and a rewind every 2,500), then, REPEAT times from a warm page cache,
times ``Session.open`` and ``context()``; it prints one JSON document.
"""

from __future__ import annotations

import json
import random
import sys
import time
from pathlib import Path
from typing import Any

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
CORPUS = " ".join(random.Random(1).choice(WORDS) for _ in range(400_000))


def text(rng: random.Random, low: int, high: int) -> str:
    size = rng.randint(low, high)
    start = rng.randrange(len(CORPUS) - size)
    return CORPUS[start : start + size]


def turn(rng: random.Random, n: int, batch: int) -> list[Body]:
    """One prompt's entries: the prompt, replies, 0-6 tool calls, the batch link."""
    bodies: list[Body] = [UserMessage(text(rng, 40, 600)), AssistantMessage(text(rng, 100, 1200))]
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
    """A session of ``entries`` entries in ``directory``."""
    rng = random.Random(seed)
    session = Session.create(directory, directory)
    count = batch = n = 0
    next_compaction, next_rewind = 8_000, 2_500
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
            session.append(Compaction(text(rng, 1500, 3000), prompts[-min(10, len(prompts))].id))
            count += 1
            next_compaction += 8_000
        if count >= next_rewind:
            prompts = session.prompts()
            session.rewind(max(1, len(prompts) - rng.randint(1, 5)))
            count += 1
            next_rewind += 2_500
    session.append_many(pending[: max(0, entries - count)])
    return session


def measure(entries: int, repeat: int, directory: Path) -> dict[str, Any]:
    started = time.perf_counter()
    built = build(directory, entries)
    doc: dict[str, Any] = {
        "build_s": time.perf_counter() - started,
        "entries": len(built.entries()),
        "bytes": built.path.stat().st_size,
        "load": [],
        "context": [],
    }
    path = built.path
    del built
    for _ in range(repeat):
        t0 = time.perf_counter()
        session = Session.open(path)
        t1 = time.perf_counter()
        doc["context_entries"] = len(session.context())
        doc["load"].append(t1 - t0)
        doc["context"].append(time.perf_counter() - t1)
        del session
    return doc


if __name__ == "__main__":
    entries, repeat, where = int(sys.argv[1]), int(sys.argv[2]), Path(sys.argv[3])
    print(json.dumps(measure(entries, repeat, where)))
