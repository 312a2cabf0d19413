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
- ``rewind`` goes back to before prompt N; with ``code`` it first undoes the
  batches linked after that point through ``undo.undo_batches``.

Rewind with code, in this order, under the session's rewind lock: (1) find
prompt N and the batches linked on the path after it, writing nothing;
(2) undo those batches (dry run: only compute the impact); refuse with
``NothingToRestore`` when none is left to undo; (3) append the navigation.
So a refusal or a dry run leaves both halves as they were, and the rewind
batch's own link lands on the abandoned branch, where it belongs. A crash
between (2) and (3) leaves the code rewound and the conversation not: a
plain ``rewind N`` finishes it.

A fork copies its source's entries, batch links included; those batches
belong to the source session (undo is scoped to the session that made them),
so a rewind of the fork never undoes them (``RewindPlan.foreign``).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from earshot.cas.errors import EarshotError
from earshot.cas.logs import get_logger
from earshot.cas.paths import sessions_dir
from earshot.cas.project import Project

from .engine import Engine
from .ids import EntryId, NoMatchingId, SessionId, is_id, normalize_prefix, resolve_prefix
from .records import Batch, SessionRecord, all_sessions, get_session
from .session_check import Problem, RepairResult, check, repair
from .session_entries import AssistantMessage, BatchLink, Entry, ForkOrigin, UserMessage
from .session_file import SessionExists, SessionNotFound
from .session_list import SUFFIX, SessionInfo, list_sessions, session_files
from .session_log import NoSuchPrompt, Session
from .session_tree import Prompt
from .sessions import ENV_SESSION, create_session, start_session_upkeep
from .undo import Impact, NothingToUndo, undo_batches

log = get_logger("earshot.agent.conversation")

ROLES = ("user", "assistant")


class NoPrompts(EarshotError):
    """A session whose current path holds no user prompt."""

    def __init__(self, session: str) -> None:
        super().__init__(
            f"session {session} has no prompts on its current path ('earshot prompt TEXT' adds one)"
        )
        self.session = session


class NothingToRestore(EarshotError):
    """``rewind --code`` with no batch of the session left to undo after the prompt."""

    def __init__(self, session: str, n: int, batches: tuple[int, ...]) -> None:
        why = (
            f"batches {', '.join(map(str, batches))} are already undone or changed nothing"
            if batches
            else "no batch of this session is linked after it"
        )
        super().__init__(
            f"nothing to restore after prompt {n} of session {session}: {why}; "
            "nothing was changed (without --code, rewind moves the conversation only)"
        )
        self.session = session
        self.n = n
        self.batches = batches


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


def summaries(project: Project, count_batches: bool = True) -> list[SessionSummary]:
    """Every session of the root, most recently active first (either half counts)."""
    logs: dict[str, SessionInfo] = {info.id: info for info in list_sessions(log_dir(project))}
    with project.store.backend.read() as view:
        records = {r.id: r for r in all_sessions(view)}
        counts = {
            ident: sum(1 for _ in view.items("batches", ident.encode() + b"/"))
            for ident in (records if count_batches else ())
        }
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
            )
        )
    out.sort(key=lambda s: (s.last_activity_ns, s.id), reverse=True)
    return out


def _resolve(project: Project, text: str) -> str:
    """The session id ``text`` names: an id or unique prefix of either half's ids.

    A full id known to neither half is taken as is: a session made elsewhere
    (by the log library, say) whose halves start now.
    """
    with project.store.backend.read() as view:
        known = {r.id for r in all_sessions(view)}
    known.update(p.name.removesuffix(SUFFIX) for p in session_files(log_dir(project)))
    try:
        return resolve_prefix(sorted(known), text, "session")
    except NoMatchingId:
        wanted = normalize_prefix(text)
        if is_id(wanted):
            return wanted
        raise


def select(
    project: Project, given: str | None, *, most_recent: bool = False
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
        recent = summaries(project, count_batches=False)
        ident = recent[0].id if recent else None
        if ident is None and most_recent:
            raise NoSessionToContinue()
    if ident is None:
        return new_session(project), True
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


def current_prompts(session_log: Session) -> tuple[tuple[Entry, ...], tuple[Prompt, ...]]:
    """The current path and its numbered prompts, read as one consistent state."""
    path = session_log.path_to()
    if not path:
        return (), ()
    # By id, not "the leaf": an append in between cannot shift what is read.
    return path, session_log.prompts(path[-1].id)


def _copied(session_log: Session) -> set[EntryId]:
    """The entries a fork copied from its source (none for a session that is not a fork)."""
    origin = session_log.header.fork_of
    if origin is None or origin.entry is None:
        return set()
    return {e.id for e in session_log.path_to(origin.entry)}


# -- rewind and fork ------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RewindPlan:
    """Where a rewind to before prompt ``prompt.n`` goes, and what it abandons.

    ``batches``: this session's batches linked on the path from the prompt to
    the leaf, oldest first. ``foreign``: batches linked there that a fork
    copied from its source session; they are never undone from here.
    """

    session: SessionId
    prompt: Prompt
    prompts: int
    target: EntryId | None
    batches: tuple[int, ...]
    foreign: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Rewound:
    """A rewind done (or, dry run, planned): the navigation and the code undone."""

    plan: RewindPlan
    navigation: Entry | None
    impact: Impact | None
    dry_run: bool

    @property
    def text(self) -> str:
        return self.plan.prompt.text


def _prompt(session_log: Session, prompts: tuple[Prompt, ...], n: int) -> Prompt:
    if not prompts:
        raise NoPrompts(session_log.id)
    if not 1 <= n <= len(prompts):
        raise NoSuchPrompt(session_log.id, n, len(prompts))
    return prompts[n - 1]


def plan_rewind(session_log: Session, n: int) -> RewindPlan:
    """What ``rewind(n)`` would do, with nothing written."""
    path, prompts = current_prompts(session_log)
    prompt = _prompt(session_log, prompts, n)
    start = next(i for i, e in enumerate(path) if e.id == prompt.id)
    copied = _copied(session_log)
    own: list[int] = []
    foreign: list[int] = []
    for entry in path[start:]:
        if isinstance(entry.body, BatchLink):
            (foreign if entry.id in copied else own).append(entry.body.batch)
    return RewindPlan(
        session_log.id,
        prompt,
        len(prompts),
        path[start].parent_id,
        tuple(dict.fromkeys(own)),
        tuple(dict.fromkeys(foreign)),
    )


def rewind(
    engine: Engine, n: int, *, code: bool = False, force: bool = False, dry_run: bool = False
) -> Rewound:
    """Return the session's conversation to before prompt ``n``; with ``code``, its files too.

    Holds the session's rewind lock throughout (``RewindInProgress`` if
    another rewind has it). With ``code``: ``NothingToRestore`` when no batch
    after the prompt is left to undo (nothing is appended then); conflicts
    follow undo's rules (``force`` overwrites). ``dry_run`` writes nothing.
    """
    session_log = open_log(engine.project, engine.session.id)
    with session_log.rewind_lock():
        plan = plan_rewind(session_log, n)
        impact = None
        if code:
            if not plan.batches:
                raise NothingToRestore(session_log.id, n, ())
            try:
                impact = undo_batches(engine, list(plan.batches), force=force, dry_run=dry_run)
            except NothingToUndo:
                raise NothingToRestore(session_log.id, n, plan.batches) from None
        if dry_run:
            return Rewound(plan, None, impact, True)
        navigation = session_log.navigate(plan.target)
    log.info("rewind", session=session_log.id, prompt=n, code=code, batches=list(plan.batches))
    return Rewound(plan, navigation, impact, False)


@dataclass(frozen=True, slots=True)
class Forked:
    """A fork: the new session (both halves) and where it came from."""

    record: SessionRecord
    log: Session
    origin: ForkOrigin
    prompts: int


def fork(project: Project, session_id: str, n: int | None = None) -> Forked:
    """A new session holding the current path up to before prompt ``n`` (None: all of it)."""
    source = open_log(project, session_id)
    if n is not None:
        _prompt(source, current_prompts(source)[1], n)
    new = source.fork(n)
    record = create_session(project, new.id)
    start_session_upkeep(project)
    origin = new.header.fork_of
    assert origin is not None
    return Forked(record, new, origin, len(new.prompts()))


# -- checking -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Checked:
    """One session file checked (and maybe repaired): what is still wrong with it."""

    path: Path
    problems: tuple[Problem, ...]
    repair: RepairResult | None = None

    @property
    def remaining(self) -> tuple[Problem, ...]:
        return self.repair.remaining if self.repair is not None else self.problems


def check_sessions(project: Project, fix: bool = False) -> list[Checked]:
    """Check every session file of the root, oldest first; ``fix``: repair what can be."""
    out = []
    for path in sorted(session_files(log_dir(project))):
        try:
            problems = tuple(check(path))
            result = None
            if fix and any(p.repairable for p in problems):
                result = repair(path)
        except OSError as err:
            problems = (Problem("unreadable", None, err.strerror or str(err), False),)
            result = None
        out.append(Checked(path, problems, result))
    return out


def all_ok(results: Iterable[Checked]) -> bool:
    return not any(c.remaining for c in results)
