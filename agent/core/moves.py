"""Entries whose content is not held, found again by their identity: moves, and the same file.

An unrecorded entry (an ignored file over the limits, a cache, a listed
directory's file, a file over the size limit) has no content in the store,
only its identity: inode, mtime, and a file's size. A rename keeps all
three; a new file or directory given a freed inode has a new mtime. So
what a batch moved is found again wherever it went, and undo renames it
back instead of deleting one side and being unable to restore the other.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Protocol

from earshot.agent.core.batch import Change, State
from earshot.cas.tree import Ident

#: (inode, mtime_ns, is a directory, size; 0 for a directory)
Key = tuple[int, int, bool, int]


class StepLike(Protocol):
    """One path of a reversal (``reversal.Step``): what is there, what goes back."""

    @property
    def path(self) -> str: ...
    @property
    def expect(self) -> State | None: ...
    @property
    def restore_to(self) -> State | None: ...
    @property
    def moved(self) -> str | None: ...


def find_moves(
    root: Path, steps: Sequence[StepLike], currents: Mapping[str, State | None]
) -> dict[str, str]:
    """Entries whose content is not held and that the reverted batches moved:
    {where it is now: where it goes back}.

    A path that vanished while unrecorded (its identity known) and a path the
    batches created that holds that very inode now, unchanged since, are one
    entry moved: undo renames it back rather than keep one and delete the
    other. The created path may be recorded now (moved to a name nothing
    ignores) or not; a directory kept as one entry is found by its own
    identity among the directories leading to what the batches created. A
    redo replays an undo's moves by the names its ledger kept (``moved``).
    """
    out: dict[str, str] = {}
    expected = {step.path: step.expect for step in steps}
    for step in steps:
        # An undo's move back, replayed: where it went, it comes from.
        there = step.moved
        if (
            there is not None
            and currents[step.path] is None
            and currents.get(there) is not None
            and currents[there] == expected[there]
        ):
            out[there] = step.path
    gone: dict[Key, str] = {}
    for step in steps:
        before = step.restore_to
        if before is not None and before.ident is not None and currents[step.path] is None:
            ident = before.ident
            gone[(ident.ino, ident.mtime_ns, ident.is_dir, before.size)] = step.path
    if not gone:
        return out
    seen_dirs: set[str] = set()
    for step in steps:
        now = currents[step.path]
        if step.restore_to is not None or now is None or now != step.expect or step.path in out:
            continue
        key = key_now(root, step.path, now)
        source = gone.pop(key, None) if key is not None else None
        if source is not None:
            out[step.path] = source
            continue
        # A directory moved whole, found by what the batches created below it.
        seen_dirs |= set(out)
        ancestor = _moved_ancestor(root, step.path, gone, seen_dirs)
        if ancestor is not None:
            out[ancestor[0]] = gone.pop(ancestor[1])
    return out


def key_now(root: Path, path: str, state: State | None) -> Key | None:
    """What identifies the entry at ``path`` now: from its unrecorded state, or
    from the disk for one recorded (a file's size counts; a directory's is 0)."""
    if state is not None and state.ident is not None:
        ident = state.ident
        return (ident.ino, ident.mtime_ns, ident.is_dir, state.size)
    try:
        st = os.lstat(os.path.join(root, path))
    except OSError:
        return None
    is_dir = stat.S_ISDIR(st.st_mode)
    return (st.st_ino, st.st_mtime_ns, is_dir, 0 if is_dir else st.st_size)


def ident_now(root: Path, path: str) -> Ident:
    """The identity a rename back checks (the applier checks it again on disk)."""
    key = key_now(root, path, None)
    assert key is not None
    return Ident(key[0], key[1], key[2])


def still_there(root: Path, path: str, state: State) -> bool:
    """Whether the disk holds the very file or directory ``state`` names (its
    identity): a path only the rules made recorded since is as it was."""
    if state.ident is None:
        return False
    try:
        st = os.lstat(os.path.join(root, path))
    except OSError:
        return False
    if (st.st_ino, stat.S_ISDIR(st.st_mode)) != (state.ident.ino, state.ident.is_dir):
        return False
    return state.ident.is_dir or (st.st_mtime_ns, st.st_size) == (
        state.ident.mtime_ns,
        state.size,
    )


def moves_in(root: Path, ledger: Sequence[Change]) -> dict[str, str]:
    """{a path that vanished unrecorded: the created path that holds it now}, for
    a batch about to commit: what it moved is then not "deleted" in its record
    (undo finds the move on disk again, ``find_moves``)."""
    gone: dict[Key, str] = {}
    for line in ledger:
        before = line.before
        if line.after is None and before is not None and before.ident is not None:
            ident = before.ident
            gone[(ident.ino, ident.mtime_ns, ident.is_dir, before.size)] = line.path
    out: dict[str, str] = {}
    if not gone:
        return out
    seen_dirs: set[str] = set()
    for line in ledger:
        if line.before is not None or line.after is None:
            continue
        key = key_now(root, line.path, line.after)
        source = gone.pop(key, None) if key is not None else None
        if source is not None:
            out[source] = line.path
            continue
        ancestor = _moved_ancestor(root, line.path, gone, seen_dirs)
        if ancestor is not None:
            out[gone.pop(ancestor[1])] = ancestor[0]
    return out


def _moved_ancestor(
    root: Path, path: str, gone: Mapping[Key, str], seen: set[str]
) -> tuple[str, Key] | None:
    """A directory leading to ``path`` that holds the identity of one that vanished:
    a directory kept as one entry, moved whole (its path now, and its key)."""
    parts = path.split("/")[:-1]
    for depth in range(1, len(parts) + 1):
        ancestor = "/".join(parts[:depth])
        if ancestor in seen:
            continue
        seen.add(ancestor)
        found = key_now(root, ancestor, None)
        if found is not None and found in gone:
            return ancestor, found
    return None
