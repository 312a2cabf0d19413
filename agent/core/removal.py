"""Sessions removed: one nothing came of (a chat's own), and those a person names.

A session is both halves, its log (``conversation.log_path``) and its
checkpoint history; removing one takes both, and what binds an agent's
session to it. A session with an operation not ended (an open batch), or
open in a chat (``hold_open``), is never removed.
"""

from __future__ import annotations

import contextlib
import fcntl
import os

from earshot.agent.core.conversation import log_path
from earshot.agent.core.records import delete_session, has_batches, unbind_session
from earshot.agent.core.sessions import busy_sessions
from earshot.agent.log.entries import UserMessage
from earshot.agent.log.session import Session
from earshot.cas.errors import EarshotError
from earshot.cas.project import Project


def discard_unused(project: Project, session_id: str) -> bool:
    """Remove a session nothing came of: no batch, and no reply in its log (a
    chat closed before its first prompt, a ``chat -p`` refused before its
    first reply). It would otherwise be the newest session, the one a plain
    ``earshot undo`` took. False (and nothing removed) when anything came of it.
    """
    if session_id in busy_sessions(project):
        return False
    with project.store.backend.read() as view:
        if has_batches(view, session_id):
            return False
    path = log_path(project, session_id)
    if path.exists():
        try:
            entries = Session.open(path).entries()
        except (OSError, EarshotError):
            return False  # unreadable: a person should look, not earshot delete
        if any(not isinstance(e.body, UserMessage) for e in entries):
            return False
    with project.store.backend.write() as txn:
        delete_session(txn, session_id)
    _remove_log(project, session_id)
    return True


def _remove_log(project: Project, session_id: str) -> None:
    """A session's log file and the lock files beside it."""
    path = log_path(project, session_id)
    locks = (f"{session_id}.turn.lock", f"{session_id}.rewind.lock", _open_lock(session_id))
    for leftover in (path, *(path.with_name(name) for name in locks)):
        with contextlib.suppress(FileNotFoundError):
            leftover.unlink()


def _open_lock(session_id: str) -> str:
    return f"{session_id}.open.lock"


def hold_open(project: Project, session_id: str) -> int:
    """Say that a chat has ``session_id`` open, for as long as the descriptor
    returned stays open (a shared ``flock``; a killed chat lets go by itself):
    ``remove_sessions`` refuses it meanwhile."""
    path = log_path(project, session_id).with_name(_open_lock(session_id))
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    fcntl.flock(fd, fcntl.LOCK_SH)
    return fd


def _held_open(project: Project, session_id: str) -> bool:
    """Whether a chat has the session open (``hold_open``)."""
    path = log_path(project, session_id).with_name(_open_lock(session_id))
    try:
        fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


class SessionOpen(EarshotError):
    def __init__(self, session: str) -> None:
        super().__init__(
            f"session {session} is open in a chat: it is not removed; leave the chat (/exit) first"
        )


class SessionInUse(EarshotError):
    def __init__(self, session: str) -> None:
        super().__init__(
            f"session {session} has an operation not ended (an agent's open batch, or "
            "one interrupted): it is not removed; run any earshot command to finish it"
        )


def remove_sessions(project: Project, ids: list[str]) -> list[str]:
    """Remove sessions whole: their checkpoint history, their log, what binds an
    agent's session to them. ``earshot gc`` then frees what only they used.
    All or nothing: a session with an operation not ended refuses the lot."""
    busy = busy_sessions(project)
    for ident in ids:
        if ident in busy:
            raise SessionInUse(ident)
        if _held_open(project, ident):
            raise SessionOpen(ident)
    with project.store.backend.write() as txn:
        for ident in ids:
            delete_session(txn, ident)
            unbind_session(txn, ident)
    for ident in ids:
        _remove_log(project, ident)
    return ids
