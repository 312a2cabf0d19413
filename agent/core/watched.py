"""An agent's calls noted by the watch daemon itself: no worker, no store, no restage.

While an agent's batch is open on a tree the daemon watches gap-free, the
start and the end of a tool call need nothing recorded at that instant: what
the call changes is what the watcher sees between its two events. So the
daemon, asked by the hook's client, notes the call begun or ended in the
batch's notes with the paths its watcher saw since the previous note and the
token of that instant (``external_notes``). The next event that opens the
store (the end of the response, a call that must be restaged, an undo)
restages all of them at once and pins each path on the call whose range saw
it: a call costs its hook's start-up and a note, not a restage.

The daemon declines (and the hook runs as any other event, in a worker)
whenever a restage cannot wait: no open batch named for it, a watcher gap
or another daemon's token, a subagent dispatch (it walks the tree first), a
write's start (what it names is stored first, ignored or not), the start of
a command that may delete what it names (what it holds as existence only is
read first, ``doomed``), a start
after the person changed files between calls (their versions are stored
before the call may overwrite them), an end whose start it does not know,
or a call that began while others ran.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import stat
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from earshot.agent.core.external_calls import ExternalCall, ToolKind, relative_targets
from earshot.agent.core.external_notes import Notes, pointer
from earshot.agent.shell.targets import may_name_targets
from earshot.cas.intents import append_note, read_notes

#: ``advance(token)`` of the daemon: paths changed since the token (None: a
#: gap, or another daemon's token) and the token of that instant.
Advance = Callable[[object], tuple["set[str] | None", str]]


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[bool]:
    """Hold ``path``'s flock; False when the file is gone (what it guards has ended)
    or is not a regular file."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:  # gone, or a link: a worker takes the event and sees to it
        yield False
        return
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            yield False  # a FIFO is never read here
            return
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield True
    finally:
        os.close(fd)


def note_call(
    store_dir: Path,
    agent: str,
    agent_session: str,
    call: ExternalCall,
    *,
    ended: dict[str, Any] | None,
    advance: Advance,
) -> bool:
    """Note ``call`` begun (``ended`` None) or ended (what the agent said of it) in the
    agent session's open batch; False when it must be recorded the usual way."""
    try:
        named = json.loads(pointer(store_dir, agent, agent_session).read_text())
        session, intent, root = str(named["session"]), str(named["intent"]), str(named["root"])
        linked = [str(p) for p in named.get("linked") or ()]
    except (OSError, ValueError, KeyError, TypeError):
        return False
    if not named.get("watched"):
        return False
    if call.kind is ToolKind.DISPATCH:
        return False
    notes_path = store_dir / "intents" / intent
    with (
        _locked(store_dir / "external" / f"{session}.lock") as live,
        _locked(notes_path) as open_,
    ):
        if not (live and open_):
            return False
        notes = Notes.read(read_notes(notes_path))
        if not notes.watched or notes.damaged is not None:
            return False
        note: dict[str, Any]
        if ended is None:
            if notes.running:
                return False  # what the running calls did must be pinned on them first
            if call.kind is ToolKind.WRITE:
                # The state before a write holds what it names, the ignore rules
                # notwithstanding (a .env it edits is restored, not deleted): only
                # a restage can store that.
                return False
            if call.command is not None and may_name_targets(call.command):
                # It may delete what is kept as existence only: a worker reads
                # that first (agent/core/doomed.py).
                return False
            doc = call.describe(root)
            note = {"call": len(notes.calls), "begin": doc, "key": call.key, "owner": None}
        else:
            index = next((i for i in notes.keys.get(call.key, ()) if i in notes.running), None)
            if index is None or notes.running != [index]:
                return False
            note = {"call": index, "end": ended, "owner": index}
            if call.kind is ToolKind.WRITE:
                note["forced"] = relative_targets(root, call.paths)
            if call.content is not None and not ended:
                # The content the call wrote: proof, after a kill, that it made the file.
                made = relative_targets(root, (call.content[0],))
                if made:
                    note |= {"path": made[-1], "digest": call.content[1]}
        seen, token = advance(notes.belief.token)
        if seen is None:
            return False
        if ended is None and seen:
            # The person changed these between calls; the call may overwrite or
            # delete them: their versions must be stored before it runs.
            return False
        note |= {"paths": sorted(seen | set(linked)), "token": token}
        append_note(notes_path, note)  # a note lost marks the batch incomplete, and raises
    return True


def nothing_open(store_dir: Path, agent: str, agent_session: str) -> bool:
    """Whether the agent session has no open batch: the end of a response (or a
    model call) then needs nothing, and the daemon says so at once. A batch is
    named for the daemon from the moment it opens until it is committed."""
    return not pointer(store_dir, agent, agent_session).exists()
