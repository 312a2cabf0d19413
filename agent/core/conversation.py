"""A session's conversation log joined to its checkpoint history.

One session id names two halves: the append-only JSONL log
(``session_log``, under ``sessions/<root-key>/``) and the checkpoint records
in the project's store (``sessions``, ``records``). This module keeps them
together:

- ``new_session`` makes both; ``select`` finds a session by an id prefix of
  either half (or the most recently active one) and creates whichever half
  is missing, the log lazily, with the same id.
- ``BatchLinker`` is the engine's default ``on_batch`` hook: every batch
  committed in a session (tool calls, undo, redo, rewind) appends one
  ``BatchLink`` at the log's current leaf, so a rewind knows which batches
  came after which prompt. The batch commits first; if the link then fails
  (a corrupt log, a full disk) the batch stands and a warning is logged.

Rewind, fork and checks are in ``navigation``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from earshot.agent.core.batch import Batch
from earshot.agent.core.records import (
    OUTSIDE,
    SessionRecord,
    all_sessions,
    bound_sessions,
    count_batches,
    get_session,
    has_batches,
)
from earshot.agent.core.sessions import (
    ENV_SESSION,
    create_session,
    start_session_upkeep,
)
from earshot.agent.log.entries import AssistantMessage, BatchLink, Compaction, Entry, UserMessage
from earshot.agent.log.header import ForkOrigin
from earshot.agent.log.ids import NoMatchingId, SessionId, is_id, normalize_prefix, resolve_prefix
from earshot.agent.log.listing import SUFFIX, SessionInfo, list_sessions, session_files
from earshot.agent.log.logfile import SessionExists, SessionNotFound
from earshot.agent.log.session import Session
from earshot.cas.errors import EarshotError
from earshot.cas.logs import get_logger
from earshot.cas.paths import sessions_dir
from earshot.cas.project import Project

log = get_logger("earshot.agent.core.conversation")

ROLES = ("user", "assistant")


class NoSessions(EarshotError):
    """A command that only reads, in a root with no session: it does not start one."""

    def __init__(self) -> None:
        super().__init__("no sessions in this root ('earshot session new' starts one)")


class NoCheckpoints(EarshotError):
    """A dry run on a session whose checkpoint history is gone (or never began)."""

    def __init__(self, session: str) -> None:
        super().__init__(f"session {session} has no checkpoint batches; nothing to undo or redo")


class NoSessionToContinue(EarshotError):
    def __init__(self) -> None:
        super().__init__("no session to continue in this root ('earshot session new' starts one)")


# -- the two halves -------------------------------------------------------------


def log_dir(project: Project) -> Path:
    """The directory of the root's session logs."""
    return sessions_dir(project.root, project.home)


def log_path(project: Project, session_id: str) -> Path:
    return log_dir(project) / f"{session_id}{SUFFIX}"


def open_log(project: Project, session_id: str) -> Session:
    """The session's log, created empty with this id if it has none yet."""
    path = log_path(project, session_id)
    try:
        return Session.open(path)
    except SessionNotFound:
        pass
    try:
        created = Session.create(log_dir(project), project.root, session_id=SessionId(session_id))
    except SessionExists:  # another process made it just now
        return Session.open(path)
    log.info("session_log_created", session=session_id, path=str(path))
    return created


def ensure_log(project: Project, session_id: str) -> None:
    """Create the session's log (empty, this id) unless it has one; nothing is read."""
    if not log_path(project, session_id).exists():
        open_log(project, session_id)


def new_session(project: Project) -> SessionRecord:
    """A new session: its checkpoint record and its log, one id."""
    record = create_session(project)
    ensure_log(project, record.id)
    start_session_upkeep(project)
    return record


def _linked_batches(path: Path) -> int:
    """The highest batch number the log at ``path`` links (0: none, or no log)."""
    try:
        entries = Session.open(path).entries()
    except SessionNotFound:
        return 0
    return max((e.body.batch for e in entries if isinstance(e.body, BatchLink)), default=0)


def _register(project: Project, session_id: str) -> SessionRecord:
    """The session's checkpoint record, made now if missing.

    A log may link batches of a checkpoint history that retention pruned:
    numbering starts above them, so an old link never names a new batch.
    """
    with project.store.backend.read() as view:
        record = get_session(view, session_id)
    if record is not None:
        return record
    first = _linked_batches(log_path(project, session_id)) + 1
    record = create_session(project, session_id, next_seq=first)
    start_session_upkeep(project)
    return record


def ts_ns(ts: str) -> int:
    """A log timestamp (UTC ISO 8601, ms) as ns since the epoch; 0 if unreadable."""
    try:
        return round(datetime.fromisoformat(ts).timestamp() * 1000) * 1_000_000
    except ValueError:
        return 0


@dataclass(frozen=True, slots=True)
class SessionSummary:
    """One session of a root, both halves merged (a half may be missing)."""

    id: str
    created_ns: int
    last_activity_ns: int
    batches: int
    first_prompt: str | None
    fork_of: ForkOrigin | None
    has_log: bool
    has_checkpoints: bool
    #: The agent whose session this is, seen through its hooks: (agent, its id).
    agent: tuple[str, str] | None = None
    #: User prompts in its log, on every branch (counted only when asked: see ``summaries``).
    prompts: int = 0


def summaries(
    project: Project, *, with_batch_counts: bool = True, with_prompt_counts: bool = False
) -> list[SessionSummary]:
    """Every session of the root, most recently active first (either half counts).

    ``with_prompt_counts`` reads each log whole; without it ``prompts`` is 0 or 1.
    """
    logs: dict[str, SessionInfo] = {
        info.id: info for info in list_sessions(log_dir(project), with_prompt_counts)
    }
    with project.store.backend.read() as view:
        records = {r.id: r for r in all_sessions(view)}
        counts = {
            ident: count_batches(view, ident) for ident in (records if with_batch_counts else ())
        }
        agents = bound_sessions(view)
    out = []
    for ident in logs.keys() | records.keys():
        info, record = logs.get(ident), records.get(ident)
        created = [ts_ns(info.created)] if info is not None else []
        active = [ts_ns(info.last_activity)] if info is not None else []
        if record is not None:
            created.append(record.created_ns)
            active.append(record.touched_ns)
        out.append(
            SessionSummary(
                ident,
                min(created),
                max(active),
                counts.get(ident, 0),
                info.first_prompt if info is not None else None,
                info.fork_of if info is not None else None,
                info is not None,
                record is not None,
                agents.get(ident),
                info.prompts if info is not None else 0,
            )
        )
    out.sort(key=lambda s: (s.last_activity_ns, s.id), reverse=True)
    return out


class NothingOutside(EarshotError):
    def __init__(self) -> None:
        super().__init__(
            f"nothing has changed outside any call in this root: session '{OUTSIDE}' "
            "has no batches yet"
        )


def _resolve(project: Project, text: str, allow_new: bool = True) -> str:
    """The session id ``text`` names: an id or unique prefix of either half's ids.

    A full id known to neither half is taken as is when ``allow_new``: a
    session made elsewhere (by the log library, say) whose halves start now.
    """
    if text.strip().lower() == OUTSIDE:  # a name, not an id: no aliases apply
        return OUTSIDE
    with project.store.backend.read() as view:
        known = {r.id for r in all_sessions(view)}
    known.update(p.name.removesuffix(SUFFIX) for p in session_files(log_dir(project)))
    try:
        return resolve_prefix(sorted(known), text, "session")
    except NoMatchingId:
        wanted = normalize_prefix(text)
        if allow_new and is_id(wanted):
            return wanted
        raise


#: What a command acts on, for the session it takes when none is named
#: (``find``): batches (undo, redo, log) or prompts (rewind).
BATCHES = "batches"
PROMPTS = "prompts"


def find(
    project: Project, given: str | None, *, most_recent: bool = False, acting: str | None = None
) -> str | None:
    """The session a command would act on, creating nothing; None when the root has none.

    The same choice as ``select``, for commands that only read (``log``,
    ``tree``, dry runs): a session must be known to one of its halves.
    ``acting``: when no session is named, the most recently active one that
    has that to act on (``BATCHES``, ``PROMPTS``); an empty chat or an agent
    run that changed nothing is newer, and is not what a person means.
    """
    text = given or (None if most_recent else os.environ.get(ENV_SESSION))
    if text:
        return _resolve(project, text, allow_new=False)
    recent = summaries(project, with_batch_counts=False)
    if acting is not None and not most_recent:
        chosen = _first_acting(project, recent, acting)
        if chosen is not None:
            return chosen
    if recent:
        return recent[0].id
    if most_recent:
        raise NoSessionToContinue()
    return None


def _first_acting(project: Project, recent: list[SessionSummary], acting: str) -> str | None:
    """The first of ``recent`` with batches (or prompts) to act on."""
    if acting == PROMPTS:
        return next((s.id for s in recent if s.first_prompt is not None), None)
    with project.store.backend.read() as view:
        return next((s.id for s in recent if has_batches(view, s.id)), None)


def select(
    project: Project, given: str | None, *, most_recent: bool = False, acting: str | None = None
) -> tuple[SessionRecord, bool]:
    """The session a command acts on, both halves in place; and whether it is new.

    ``given`` (an id or unique prefix), else with ``most_recent`` the most
    recently active session (``NoSessionToContinue`` if there is none), else
    $EARSHOT_SESSION, else the most recently active session, else a new one.
    """
    text = given or (None if most_recent else os.environ.get(ENV_SESSION))
    if text:
        ident: str | None = _resolve(project, text)
    else:
        ident = find(project, None, most_recent=most_recent, acting=acting)
    if ident is None:
        return new_session(project), True
    if ident == OUTSIDE:  # batches only: no conversation, nothing registered
        with project.store.backend.read() as view:
            outside = get_session(view, OUTSIDE)
        if outside is None:
            raise NothingOutside()
        return outside, False
    record = _register(project, ident)
    ensure_log(project, record.id)
    return record, False


# -- batch links ----------------------------------------------------------------


class BatchLinker:
    """The engine's default ``on_batch``: link each batch at the log's current leaf.

    Holds the log open after the first batch, so later links read only what
    was appended since (one append each).
    """

    def __init__(self, project: Project, session_id: str, session_log: Session | None = None):
        self.project = project
        self.session_id = session_id
        self._log = session_log

    def leaf(self) -> str | None:
        """The log's current leaf: the batch about to begin hangs there (its anchor)."""
        if self._log is None:
            self._log = open_log(self.project, self.session_id)
        else:
            self._log.refresh()
        return self._log.leaf

    def __call__(self, batch: Batch) -> None:
        try:
            if self._log is None:
                self._log = open_log(self.project, self.session_id)
            self._log.append(BatchLink(batch.seq))
        except (EarshotError, OSError) as err:
            # The batch is committed; failing now would lose the command's results.
            log.warning(
                "batch_unlinked",
                session=self.session_id,
                batch=batch.seq,
                error=str(err),
                note="the batch is recorded, but 'rewind --code' will not know of it",
            )


def link_batch(project: Project, session_id: str, seq: int) -> Entry:
    """Append a link to batch ``seq`` at the session log's current leaf."""
    return open_log(project, session_id).append(BatchLink(seq))


# -- messages and prompts -------------------------------------------------------


def say(project: Project, session_id: str, role: str, text: str) -> Entry:
    """Append a message of ``role`` ("user" or "assistant") at the current leaf."""
    if role not in ROLES:
        raise ValueError(f"role must be one of {ROLES}, not {role!r}")
    body = UserMessage(text) if role == "user" else AssistantMessage(text)
    return open_log(project, session_id).append(body)


def note_compaction(project: Project, session_id: str, summary: str) -> Entry:
    """Append a compaction entry: the agent compacted its context (``summary`` says
    how); what came before it stays in the log."""
    return open_log(project, session_id).append(Compaction(summary, None))
