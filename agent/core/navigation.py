"""Navigating a session: its prompts, rewind (with code), fork, and checks.

Rewind with code, in this order, under the session's rewind lock: (1) find
prompt N and the batches after it on the path, writing nothing; (2) undo
those batches (dry run: only compute the impact); refuse with
``NothingToRestore`` when none is left to undo; (3) append the navigation.
So a refusal or a dry run leaves both halves as they were, and the rewind
batch's own link lands on the abandoned branch, where it belongs. The undo's
commit also commits an intent for (3), ended once the navigation is
appended: a process that dies between them leaves it, and the next command
appends the navigation (``finish_navigation``).

The batches after prompt N are those linked there, and those whose link
was lost (a torn last line) but whose record's *anchor* (the log's leaf when
the batch began) lies on the path after the prompt: a batch's place in the
conversation is derivable from the checkpoint records alone.

A fork copies its source's entries, batch links included; those batches
belong to the source session (undo is scoped to the session that made them),
so a rewind of the fork never undoes them (``RewindPlan.foreign``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from earshot.agent.core.batch import Batch
from earshot.agent.core.conversation import log_dir, log_path, open_log
from earshot.agent.core.engine import Engine
from earshot.agent.core.external_open import close_idle
from earshot.agent.core.records import SessionRecord, session_batches
from earshot.agent.core.reversal import Impact
from earshot.agent.core.sessions import create_session, start_session_upkeep
from earshot.agent.core.undo import NothingToUndo, refuse_if_unrecorded, undo_batches
from earshot.agent.log.check import Problem, RepairResult, check, repair
from earshot.agent.log.entries import BatchLink, Entry
from earshot.agent.log.header import ForkOrigin
from earshot.agent.log.ids import EntryId, SessionId
from earshot.agent.log.listing import session_files
from earshot.agent.log.logfile import SessionNotFound
from earshot.agent.log.session import NoSuchPrompt, Session
from earshot.agent.log.tree import Prompt
from earshot.cas.errors import EarshotError
from earshot.cas.intents import Held
from earshot.cas.logs import get_logger
from earshot.cas.progress import QUIET, Progress
from earshot.cas.project import Project

log = get_logger("earshot.agent.core.conversation")


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


def current_prompts(session_log: Session) -> tuple[tuple[Entry, ...], tuple[Prompt, ...]]:
    """The current path and its numbered prompts, read as one consistent state."""
    path = session_log.path_to()
    if not path:
        return (), ()
    # By id, not "the leaf": an append in between cannot shift what is read.
    return path, session_log.prompts(path[-1].id)


def read_prompts(project: Project, session_id: str) -> tuple[Prompt, ...]:
    """The prompts on a session's current path; none when it has no log (none is made)."""
    try:
        session_log = Session.open(log_path(project, session_id))
    except SessionNotFound:
        return ()
    return current_prompts(session_log)[1]


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


def plan_rewind(session_log: Session, n: int, records: Iterable[Batch] = ()) -> RewindPlan:
    """What ``rewind(n)`` would do, with nothing written.

    ``records``: the session's batch records; a batch no link in the log
    names is placed by its anchor (the log's leaf when it began).
    """
    path, prompts = current_prompts(session_log)
    prompt = _prompt(session_log, prompts, n)
    start = next(i for i, e in enumerate(path) if e.id == prompt.id)
    copied = _copied(session_log)
    own: list[int] = []
    foreign: list[int] = []
    for entry in path[start:]:
        if isinstance(entry.body, BatchLink):
            (foreign if entry.id in copied else own).append(entry.body.batch)
    linked = {e.body.batch for e in session_log.entries() if isinstance(e.body, BatchLink)}
    after_prompt = {e.id for e in path[start:]}
    own += [
        b.seq
        for b in records
        if b.seq not in linked and b.anchor is not None and b.anchor in after_prompt
    ]
    return RewindPlan(
        session_log.id,
        prompt,
        len(prompts),
        path[start].parent_id,
        tuple(sorted(dict.fromkeys(own))),
        tuple(dict.fromkeys(foreign)),
    )


def _batches(engine: Engine) -> list[Batch]:
    with engine.project.store.backend.read() as view:
        return session_batches(view, engine.session.id)


#: The intent a rewind with code leaves until its navigation is appended.
NAVIGATE = "navigate"


def finish_navigation(project: Project, held: Held) -> Entry:
    """Append the navigation of a rewind whose process died after undoing its code."""
    doc = held.intent.doc
    session_log = open_log(project, str(doc["session"]))
    target = doc.get("target")
    entry = session_log.navigate(None if target is None else str(target))
    project.intents.drop(held)
    return entry


def rewind(
    engine: Engine,
    n: int,
    *,
    code: bool = False,
    force: bool = False,
    dry_run: bool = False,
    progress: Progress = QUIET,
) -> Rewound:
    """Return the session's conversation to before prompt ``n``; with ``code``, its files too.

    Holds the session's rewind lock throughout (``RewindInProgress`` if
    another rewind has it). With ``code``: ``NothingToRestore`` when no batch
    after the prompt is left to undo (nothing is appended then); conflicts
    follow undo's rules (``force`` overwrites). ``dry_run`` writes nothing.
    ``progress`` hears how far the undo of the files is.
    """
    intents = engine.project.intents
    if dry_run:  # writes nothing: not even the log of a session that has none
        try:
            session_log = Session.open(log_path(engine.project, engine.session.id))
        except SessionNotFound:
            raise NoSuchPrompt(SessionId(engine.session.id), n, 0) from None
    else:
        session_log = open_log(engine.project, engine.session.id)
    with session_log.rewind_lock():
        if code and not dry_run:
            # An agent's batch left open with no call running is one of the
            # batches after the prompt: committed first, so the rewind sees it.
            close_idle(engine, "a rewind was asked")
        if code:
            refuse_if_unrecorded(engine)  # a batch still running: wait, say so
        plan = plan_rewind(session_log, n, _batches(engine))
        impact = None
        then = None
        if code:
            if not plan.batches:
                raise NothingToRestore(session_log.id, n, ())
            if not dry_run:
                then = intents.new(NAVIGATE, {"session": session_log.id, "target": plan.target})
            try:
                impact = undo_batches(
                    engine,
                    list(plan.batches),
                    force=force,
                    dry_run=dry_run,
                    then=then,
                    progress=progress,
                )
            except BaseException as exc:
                if then is not None:
                    then.release()
                if isinstance(exc, NothingToUndo):
                    raise NothingToRestore(session_log.id, n, plan.batches) from None
                raise
        if dry_run:
            return Rewound(plan, None, impact, True)
        navigation = session_log.navigate(plan.target)
        if then is not None:
            intents.drop(then)
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
