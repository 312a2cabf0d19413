"""The root a chat works in: its project opened per piece of work, never held.

A chat lives for hours; ``earshot gc`` needs the store to itself, and
another terminal's commands must see every batch at once. So the store is
opened for each batch of tool calls and each slash command, and closed
after (a few ms; a command that asks first closes it while it waits),
exactly as a CLI command opens it: interrupted operations are finished
first, and the engine is the one ``earshot exec`` uses, with the watch
daemon's tracker when the face provides one.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

from earshot.agent.core import conversation, removal
from earshot.agent.core.command import CommandRunner, run_command
from earshot.agent.core.engine import Engine
from earshot.agent.core.records import TABLES, upgrade_records
from earshot.agent.core.recovery import describe, finish_all
from earshot.agent.core.tracker import ChangeTracker
from earshot.agent.log.session import Session
from earshot.cas.project import Project

#: Makes the tracker for a project (the face's: it knows how to start the daemon).
TrackerFactory = Callable[[Project], "ChangeTracker | None"]
#: Told what was finished or found on opening (one line each).
Notify = Callable[[str], None]


class Workspace:
    """One root, as a chat sees it."""

    def __init__(
        self,
        root: str | Path,
        *,
        home: Path | None = None,
        tracker: TrackerFactory | None = None,
        notify: Notify | None = None,
    ) -> None:
        self.root = os.path.realpath(root)
        self.home = home
        self.tracker = tracker
        self.notify: Notify = notify or (lambda text: None)
        # A store is open once per process (LMDB refuses a second opening):
        # threads of one face (a page's reads while its turn runs a command)
        # share the opening, and the last one out closes it.
        self._lock = threading.Lock()
        self._open: Project | None = None
        self._users = 0

    @contextlib.contextmanager
    def project(self, *, finish: bool = True) -> Iterator[Project]:
        """The root's project, opened now (or shared with another thread of this
        process that has it open); what a dead process left is finished first,
        when this is the only opening."""
        with self._lock:
            project = self._open
            first = project is None
            if project is None:
                project = Project(self.root, self.home, extra_tables=TABLES)
                project.__enter__()
                try:
                    upgrade_records(project.store.backend)
                except BaseException:
                    project.__exit__(None, None, None)
                    raise
                self._open = project
            self._users += 1
        try:
            if finish and first:
                # Not while another thread works in the store: its batch is live.
                done, left = finish_all(project)
                for item in done:
                    self.notify(item.summary)
                for unfinished in left:
                    what = describe(unfinished.intent)
                    self.notify(f"could not finish the interrupted {what}: {unfinished.reason}")
            yield project
        finally:
            with self._lock:
                self._users -= 1
                if self._users == 0:
                    self._open = None
                    project.__exit__(None, None, None)

    @contextlib.contextmanager
    def engine(self, session: str, runner: CommandRunner = run_command) -> Iterator[Engine]:
        """An engine on ``session`` for one batch, or one undo, redo or rewind."""
        with self.project() as project:
            tracker = self.tracker(project) if self.tracker is not None else None
            yield Engine(project, session, tracker=tracker, capture_output=True, runner=runner)

    def open_session(self, given: str | None, *, most_recent: bool, new: bool) -> str:
        """The session a chat starts in: a new one, ``given`` (an id prefix), or
        the most recently active (``most_recent``). Both halves exist after."""
        with self.project() as project:
            if new:
                return conversation.new_session(project).id
            record, _ = conversation.select(project, given, most_recent=most_recent)
            return record.id

    def discard_unused(self, session: str) -> bool:
        """Remove ``session`` if nothing came of it (``removal.discard_unused``)."""
        with self.project(finish=False) as project:
            return removal.discard_unused(project, session)

    def hold_open(self, session: str) -> int:
        """Mark ``session`` open in this chat until the descriptor is closed
        (``removal.hold_open``: 'earshot sessions rm' refuses it meanwhile)."""
        with self.project(finish=False) as project:
            return removal.hold_open(project, session)

    def log(self, session: str) -> Session:
        """The session's conversation log (created empty if it has none). Calls a
        dead process left unanswered are closed by the next turn, under its lock
        (``Session.turn_lock``): another process's turn may be running them now."""
        with self.project(finish=False) as project:
            path = conversation.log_path(project, session)
            conversation.ensure_log(project, session)
        return Session.open(path)
