"""What open pages hear: every change to the root's sessions, whoever made it.

Two sources. The composer's turns publish as they go (a reply's text, a
command's output, a question). Everything else (another terminal's
``earshot chat``, a hook, ``earshot undo`` from the CLI) is seen by
looking: four times a second, ``Changes`` stats the session logs and the
store's data file, and what moved is published as ``changed``. Stats, not
opening the store: a reader would hold it against ``earshot gc``. A page
then asks for what it shows again (the transcript, the log).

``Hub`` fans each event out to every open page's stream, from any thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from earshot.cas.paths import checkpoints_dir, sessions_dir

#: How often the root's files are looked at: a change shows within a second.
LOOK_EVERY_S = 0.25
#: Events a page may fall behind by before it is told to read everything again.
BACKLOG = 2000

Event = dict[str, Any]


class Hub:
    """Every open page's queue; ``publish`` from any thread."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._queues: set[asyncio.Queue[Event]] = set()

    def publish(self, event: Event) -> None:
        """Send ``event`` to every page (thread-safe; after the loop closed, dropped)."""
        with contextlib.suppress(RuntimeError):  # the loop is closed: the server stopped
            self._loop.call_soon_threadsafe(self._fan_out, event)

    def _fan_out(self, event: Event) -> None:
        for queue in self._queues:
            if queue.qsize() >= BACKLOG:
                # A page that stopped reading: it reads everything again when it wakes.
                while not queue.empty():
                    queue.get_nowait()
                queue.put_nowait({"kind": "resync"})
            queue.put_nowait(event)

    @contextlib.asynccontextmanager
    async def subscribed(self) -> AsyncIterator[asyncio.Queue[Event]]:
        queue: asyncio.Queue[Event] = asyncio.Queue()
        self._queues.add(queue)
        try:
            yield queue
        finally:
            self._queues.discard(queue)


#: A file's identity for change: size and modification time.
Stamp = tuple[int, int]


class Changes:
    """The stamps of a root's session logs and store, and what moved since the last look."""

    def __init__(self, root: str, home: Path | None = None) -> None:
        self.logs = sessions_dir(root, home)
        self.store = checkpoints_dir(root, home) / "data.mdb"
        self._logs: dict[str, Stamp] = {}
        self._store: Stamp | None = None

    def look(self) -> Event | None:
        """``{"kind": "changed", "sessions": [ids], "store": bool}``, or None if nothing moved."""
        logs = _stamps(self.logs)
        store = _stamp(self.store)
        moved = sorted(
            ident
            for ident in self._logs.keys() | logs.keys()
            if self._logs.get(ident) != logs.get(ident)
        )
        store_moved = store != self._store
        self._logs, self._store = logs, store
        if not moved and not store_moved:
            return None
        return {"kind": "changed", "sessions": moved, "store": store_moved}


def _stamp(path: Path) -> Stamp | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_size, st.st_mtime_ns


def _stamps(directory: Path) -> dict[str, Stamp]:
    out: dict[str, Stamp] = {}
    try:
        names = os.listdir(directory)
    except OSError:
        return out
    for name in names:
        if name.endswith(".jsonl"):
            stamp = _stamp(directory / name)
            if stamp is not None:
                out[name.removesuffix(".jsonl")] = stamp
    return out


async def watch(changes: Changes, hub: Hub) -> None:
    """Publish what moved, every ``LOOK_EVERY_S``, until cancelled."""
    await asyncio.to_thread(changes.look)  # the state the page loads with
    while True:
        await asyncio.sleep(LOOK_EVERY_S)
        event = await asyncio.to_thread(changes.look)
        if event is not None:
            hub.publish(event)
