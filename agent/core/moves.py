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
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Protocol

from earshot.agent.core.batch import Change, State
from earshot.cas.tree import Ident, Kind

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
    batches created (or a held file they replaced) that holds that very inode
    now, unchanged since, are one entry moved: undo renames it back rather
    than keep one and delete the other, then writes back what it replaced.
    The path it went to may be recorded now (moved to a name nothing ignores)
    or not; a directory kept as one entry is found by its own identity among
    the directories leading to what the batches created. A redo replays an
    undo's moves by the names its ledger kept (``moved``).
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
    gone = _vanished((step.path, step.restore_to) for step in steps if currents[step.path] is None)
    if not gone:
        return out
    candidates = [
        (step.path, now, step.restore_to)
        for step in steps
        if (now := currents[step.path]) is not None
        and unchanged(root, step.path, now, step.expect)
        and step.path not in out
    ]
    out.update(_paired(root, gone, candidates, set(out)))
    return out


def _replaceable(state: State) -> bool:
    """A held file or link a move may have replaced (its content comes back too)."""
    return state.recorded and state.kind in (Kind.FILE, Kind.SYMLINK)


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


def unchanged(root: Path, path: str, now: State | None, expect: State | None) -> bool:
    """Whether ``path`` holds what the batches left: the same state, or the very
    entry they left unheld, held since (recorded first by an undo that will
    overwrite it, say): its identity on disk is the one they left."""
    if now == expect:
        return True
    return (
        now is not None
        and now.recorded
        and expect is not None
        and not expect.recorded
        and still_there(root, path, expect)
    )


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
    """{a path that vanished unrecorded: the path that holds it now}, for a batch
    about to commit: what it moved is then not "deleted" in its record (undo
    finds the move on disk again, ``find_moves``). The path it went to was
    absent, or a file it replaced (``mv model.bin notes.txt``)."""
    gone = _vanished((line.path, line.before) for line in ledger if line.after is None)
    candidates = [(line.path, line.after, line.before) for line in ledger if line.after is not None]
    return {source: path for path, source in _paired(root, gone, candidates, set()).items()}


def _vanished(paths: Iterable[tuple[str, State | None]]) -> dict[Key, str]:
    """{identity: path} of the entries not held (their identity known) that vanished."""
    gone: dict[Key, str] = {}
    for path, before in paths:
        if before is not None and before.ident is not None:
            ident = before.ident
            gone[(ident.ino, ident.mtime_ns, ident.is_dir, before.size)] = path
    return gone


def _paired(
    root: Path,
    gone: dict[Key, str],
    candidates: Sequence[tuple[str, State, State | None]],
    seen: set[str],
) -> dict[str, str]:
    """{where it is now: where it was}: each candidate (its path, its state now, what
    it replaced) holding the identity of an entry that vanished, or leading to
    one (a directory kept as one entry, moved whole: only where nothing was).
    ``seen``: directories not to look at again; found ones are added."""
    out: dict[str, str] = {}
    if not gone:
        return out
    for path, now, replaced in candidates:
        if replaced is not None and not _replaceable(replaced):
            continue
        key = key_now(root, path, now)
        source = gone.pop(key, None) if key is not None else None
        if source is not None:
            out[path] = source
            seen.add(path)
            continue
        if replaced is not None:
            continue  # a directory moved whole went where nothing was
        ancestor = _moved_ancestor(root, path, gone, seen)
        if ancestor is not None:
            out[ancestor[0]] = gone.pop(ancestor[1])
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


#: A file written within this long before a batch began may be written again by
#: it within the same mtime tick: its identity would not prove its content.
RACY_NS = 100_000_000


def known_before(
    root: Path, ledger: Sequence[Change], moved: Mapping[str, str], started_ns: int
) -> dict[str, State]:
    """{a path not held before the batch: its content before, held now}, for a batch
    about to commit (its merged ledger, and what it moved: ``moves_in``).

    A file the batch left held (the rules changed: a ``.gitignore`` edit, a
    ``git checkout``, ``git add -f``; or moved to a name nothing ignores)
    whose identity on disk is still the one recorded before the batch is the
    very file, unwritten: its content now was its content then. The ledger
    says so, so an undo of this batch and of any later one brings it back,
    even once a later batch deleted it.
    """
    after = {line.path: line.after for line in ledger}
    known: dict[str, State] = {}
    for line in ledger:
        before = line.before
        if (
            before is None
            or before.recorded
            or before.ident is None
            or before.ident.is_dir
            or before.ident.mtime_ns > started_ns - RACY_NS
        ):
            continue
        there = line.path if line.after is not None else moved.get(line.path)
        held = after.get(there) if there is not None else None
        if (
            there is not None
            and held is not None
            and held.kind is Kind.FILE
            and held.digest is not None
            and still_there(root, there, before)
        ):
            known[line.path] = held
    return known


def vanished_inodes(
    steps: Sequence[StepLike], currents: Mapping[str, State | None], back: set[str]
) -> dict[int, str]:
    """{inode: path} of the files not held that the reverted batches made vanish
    and that no move brings back: a file holding one of these inodes now may be
    that file, moved and changed since (its content is then its only copy)."""
    out: dict[int, str] = {}
    for step in steps:
        before = step.restore_to
        if (
            before is not None
            and before.ident is not None
            and not before.ident.is_dir
            and currents[step.path] is None
            and step.path not in back
        ):
            out[before.ident.ino] = step.path
    return out


def inode_now(root: Path, path: str) -> int | None:
    try:
        return os.lstat(os.path.join(root, path)).st_ino
    except OSError:
        return None


def older_than(root: Path, path: str, when_ns: int) -> bool:
    """Whether the file at ``path`` was last written before ``when_ns`` (0: never said)."""
    if when_ns <= 0:
        return False
    try:
        return os.lstat(os.path.join(root, path)).st_mtime_ns < when_ns
    except OSError:
        return False
