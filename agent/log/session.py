"""Append-only JSONL conversation trees: one session, one file.

A ``Session`` is a handle on ``sessions/<root-key>/<session-id>.jsonl``; the
file is only ever appended to, so rewinds and compactions are new lines.
Format: ``entries``; locking, torn writes and the fsync policy:
``logfile``; checking and repair: ``check``; listing: ``listing``.

Resuming. ``Session.resume`` appends an "interrupted" error result for every
tool call in the current context that has none, so the next model request
has a complete history. Permission entries are a record only: nothing here
restores them and ``context`` leaves them out, so a resumed agent asks again.
"""

from __future__ import annotations

import fcntl
import os
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from earshot.agent.log.entries import (
    BatchLink,
    Body,
    Entry,
    Label,
    Navigation,
    Repair,
    ToolCall,
    ToolResult,
    now_ts,
)
from earshot.agent.log.header import ForkOrigin, Header
from earshot.agent.log.ids import EntryId, SessionId, new_entry_id, resolve_prefix
from earshot.agent.log.logfile import InvalidEntry, SessionFile, write_new_file
from earshot.agent.log.scan import TornTail
from earshot.agent.log.tree import Prompt, SessionTree, context_of, open_tool_calls
from earshot.cas.errors import EarshotError
from earshot.cas.logs import get_logger
from earshot.cas.paths import real_root, sessions_dir

log = get_logger("earshot.agent.session")

INTERRUPTED_OUTPUT = "[interrupted: the process stopped before this tool call returned]"


class NoSuchPrompt(EarshotError):
    """A prompt number outside the current path."""

    def __init__(self, session: SessionId, n: int, count: int) -> None:
        super().__init__(f"session {session} has prompts 1..{count} on its current path, not {n}")
        self.session = session
        self.n = n
        self.count = count


class RewindInProgress(EarshotError):
    """Another rewind of the same session holds its rewind lock."""

    def __init__(self, session: SessionId, lock_path: Path) -> None:
        super().__init__(f"session {session} is being rewound elsewhere; try again when it is done")
        self.session = session
        self.lock_path = lock_path


class SessionBusy(EarshotError):
    """Another process runs a turn of the session right now (``Session.turn_lock``)."""

    def __init__(self, session: SessionId, pid: str) -> None:
        who = f" (pid {pid.strip()})" if pid.strip().isdigit() else ""
        super().__init__(
            f"session {session} is running a turn in another process{who}: wait for it, "
            "or start another session"
        )
        self.session = session


@dataclass(frozen=True, slots=True)
class RewindResult:
    """What a rewind did: the prompt undone and the batches on the abandoned path.

    ``batches`` are the checkpoint batch numbers, oldest first; ``batch_ids``
    the ids of the entries that link them.
    """

    prompt: Prompt
    target: EntryId | None
    navigation: Entry
    batch_ids: tuple[EntryId, ...]
    batches: tuple[int, ...]

    @property
    def text(self) -> str:
        return self.prompt.text


def _find(tree: SessionTree, ident: str) -> EntryId:
    """``ident`` itself if it is an id of ``tree``, else the id it is a unique prefix of."""
    if ident in tree.entries:
        return EntryId(ident)
    return resolve_prefix(tree.entries, ident, "entry")


def _at(tree: SessionTree, at: str | None) -> EntryId | None:
    return tree.leaf if at is None else _find(tree, at)


class Session:
    """A handle on one session file, safe to share between threads.

    Every read first picks up what other handles and processes appended.
    """

    def __init__(self, path: Path, *, sync_every_append: bool = False) -> None:
        """Load ``path`` as it is (``SessionNotFound``/``SessionCorrupt``).

        Anywhere an entry id is taken, a unique prefix of one is too
        (``NoMatchingId``/``AmbiguousId`` otherwise).
        """
        self.path = Path(path)
        self._file = SessionFile(self.path, sync_every_append=sync_every_append)
        self._rewind_guard = threading.Lock()
        self._rewind_owner: int | None = None

    @classmethod
    def create(
        cls,
        directory: Path,
        root: str | os.PathLike[str],
        *,
        session_id: SessionId | None = None,
        sync_every_append: bool = False,
    ) -> Session:
        """A new empty session of ``root`` in ``directory``.

        ``session_id``: use this id (one made for the checkpoint side) instead
        of a new one; ``SessionExists`` if its file is already there.
        """
        path = write_new_file(directory, os.fspath(real_root(root)), None, (), session_id)
        return cls(path, sync_every_append=sync_every_append)

    @classmethod
    def open(cls, path: Path, *, sync_every_append: bool = False) -> Session:
        """The session at ``path``, as it is on disk (nothing is appended)."""
        return cls(path, sync_every_append=sync_every_append)

    @classmethod
    def resume(cls, path: Path, *, sync_every_append: bool = False) -> Session:
        """The session at ``path``, ready to continue: lost tool calls get results."""
        session = cls(path, sync_every_append=sync_every_append)
        session.close_interrupted_tool_calls()
        return session

    # -- reading ------------------------------------------------------------

    def __repr__(self) -> str:
        return f"Session({str(self.path)!r})"

    @property
    def header(self) -> Header:
        return self._file.header

    @property
    def id(self) -> SessionId:
        return self._file.header.id

    @property
    def torn_tail(self) -> TornTail | None:
        """A torn write at the end of the file: ignored, sealed off by the next append."""
        with self._file.reading():
            return self._file.torn

    @property
    def leaf(self) -> EntryId | None:
        """The current leaf (None: before the first entry)."""
        with self._file.reading() as tree:
            return tree.leaf

    def refresh(self) -> None:
        """Read what was appended since the last read, by anyone."""
        self._file.refresh()

    def get(self, ident: str) -> Entry:
        """The entry with id (or unique id prefix) ``ident``."""
        with self._file.reading() as tree:
            return tree.entries[_find(tree, ident)]

    def resolve(self, prefix: str) -> EntryId:
        """The entry id that ``prefix`` starts (``NoMatchingId``/``AmbiguousId``)."""
        with self._file.reading() as tree:
            return _find(tree, prefix)

    def entries(self) -> tuple[Entry, ...]:
        """Every entry, in file order."""
        with self._file.reading() as tree:
            return tuple(tree.entries.values())

    def children(self, parent: str | None) -> tuple[Entry, ...]:
        """The nodes whose parent is ``parent`` (None: the roots), oldest first."""
        with self._file.reading() as tree:
            key = None if parent is None else _find(tree, parent)
            return tuple(tree.entries[i] for i in tree.children[key])

    def labels(self) -> dict[EntryId, str]:
        """The current label of each labelled entry."""
        with self._file.reading() as tree:
            return dict(tree.labels)

    def last_activity(self) -> str:
        """The time of the latest entry, or of creation if later (a fork's copies are older)."""
        with self._file.reading() as tree:
            return max(tree.last_ts or "", self.header.created)

    def path_to(self, at: str | None = None) -> tuple[Entry, ...]:
        """The nodes from the root to ``at`` (default: the current leaf)."""
        with self._file.reading() as tree:
            return tuple(tree.path(_at(tree, at)))

    def context(self, at: str | None = None) -> tuple[Entry, ...]:
        """What the model sees at ``at`` (default: the current leaf), compaction applied."""
        with self._file.reading() as tree:
            return tuple(context_of(tree.path(_at(tree, at))))

    def prompts(self, at: str | None = None) -> tuple[Prompt, ...]:
        """The numbered user prompts on the path to ``at`` (default: the current leaf)."""
        with self._file.reading() as tree:
            return tuple(tree.prompts(tree.path(_at(tree, at))))

    # -- writing ------------------------------------------------------------

    def append(self, body: Body) -> Entry:
        """Append one entry as a child of the current leaf, chosen under the lock."""
        return self.append_many((body,))[0]

    def append_many(self, bodies: Iterable[Body]) -> tuple[Entry, ...]:
        """Append entries as one chain from the current leaf, in one write."""
        items = tuple(bodies)
        for body in items:
            if isinstance(body, Navigation | Repair):
                raise InvalidEntry(f"{body.TYPE} entries come from navigate() and the log itself")
        with self._file.writing():
            return self._file.write(items)

    def navigate(self, target: str | None) -> Entry:
        """Make ``target`` (an id or unique prefix; None: before the first entry) the leaf."""
        with self.rewind_lock(), self._file.writing() as tree:
            ident = None if target is None else _find(tree, target)
            return self._file.write((Navigation(ident),))[0]

    def close_interrupted_tool_calls(self) -> tuple[Entry, ...]:
        """Append an "interrupted" result for each unanswered call in the context."""
        with self._file.writing() as tree:
            bodies: list[Body] = []
            for call in open_tool_calls(context_of(tree.path(tree.leaf))):
                assert isinstance(call.body, ToolCall)
                bodies.append(ToolResult(call.body.call_id, INTERRUPTED_OUTPUT, True, True))
            if not bodies:
                return ()
            log.info("session_interrupted_tool_calls", path=str(self.path), count=len(bodies))
            return self._file.write(bodies)

    @contextmanager
    def turn_lock(self) -> Iterator[None]:
        """Hold the session's turn: one turn of a chat at a time, whichever
        process runs it (``SessionBusy`` when another holds it). A rewind holds
        it too: a navigation in the middle of a turn would hang the turn's
        tool results off another branch than its calls. An flock, so a killed
        holder lets go."""
        fd = os.open(
            self.path.with_name(f"{self.id}.turn.lock"),
            os.O_RDWR | os.O_CREAT | os.O_CLOEXEC,
            0o600,
        )
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise SessionBusy(self.id, os.pread(fd, 32, 0).decode(errors="replace")) from None
            os.ftruncate(fd, 0)
            os.pwrite(fd, str(os.getpid()).encode(), 0)
            yield
        finally:
            os.close(fd)

    @contextmanager
    def rewind_lock(self) -> Iterator[None]:
        """Hold the session's rewind lock, and its turn (``turn_lock``);
        ``RewindInProgress`` if anyone else holds the first, ``SessionBusy``
        the second.

        Re-entrant in the holding thread, so a caller that undoes code after
        ``rewind`` (``rewind --code``) can hold it across both.
        """
        me = threading.get_ident()
        lock_path = self.path.with_name(f"{self.id}.rewind.lock")
        if self._rewind_owner == me:
            yield
            return
        if not self._rewind_guard.acquire(blocking=False):
            raise RewindInProgress(self.id, lock_path)
        try:
            # The lock file stays: unlinking it would race with a second opener.
            fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
            try:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    raise RewindInProgress(self.id, lock_path) from None
                with self.turn_lock():
                    self._rewind_owner = me
                    try:
                        yield
                    finally:
                        self._rewind_owner = None
            finally:
                os.close(fd)
        finally:
            self._rewind_guard.release()

    def rewind(self, n: int) -> RewindResult:
        """Go back to just before prompt ``n`` of the current path.

        Appends a navigation entry to prompt ``n``'s parent (by id, so earlier
        rewinds and compactions do not shift it) and returns that prompt, for
        editing, and the batches linked on the abandoned path, for undoing.
        """
        with self.rewind_lock(), self._file.writing() as tree:
            path = tree.path(tree.leaf)
            prompts = tree.prompts(path)
            if not 1 <= n <= len(prompts):
                raise NoSuchPrompt(self.id, n, len(prompts))
            prompt = prompts[n - 1]
            target = tree.entries[prompt.id].parent_id
            start = next(i for i, e in enumerate(path) if e.id == prompt.id)
            links = [(e.id, e.body.batch) for e in path[start:] if isinstance(e.body, BatchLink)]
            navigation = self._file.write((Navigation(target),))[0]
        return RewindResult(
            prompt,
            target,
            navigation,
            tuple(ident for ident, _ in links),
            tuple(batch for _, batch in links),
        )

    def fork(self, n: int | None = None) -> Session:
        """A new session holding the current path up to just before prompt ``n``.

        With no ``n``, the whole current path. Entries keep their ids and
        parents; labels of copied entries come along; the new header names
        this session and the entry the fork continues from.
        """
        with self._file.reading() as tree:
            path = tree.path(tree.leaf)
            if n is not None:
                prompts = tree.prompts(path)
                if not 1 <= n <= len(prompts):
                    raise NoSuchPrompt(self.id, n, len(prompts))
                path = tree.path(tree.entries[prompts[n - 1].id].parent_id)
            anchor = path[-1].id if path else None
            ts = now_ts()
            labels = [
                Entry(new_entry_id(), anchor, ts, Label(e.id, tree.labels[e.id]))
                for e in path
                if e.id in tree.labels
            ]
            origin = ForkOrigin(self.id, anchor)
            new = write_new_file(self.path.parent, self.header.root, origin, [*path, *labels])
        return Session(new, sync_every_append=self._file.sync_every_append)


def create_session(
    root: str | os.PathLike[str], *, home: Path | None = None, sync_every_append: bool = False
) -> Session:
    """A new session of ``root`` in its sessions directory under the data home."""
    return Session.create(sessions_dir(root, home), root, sync_every_append=sync_every_append)
