"""Navigating a session: its prompts, rewind (with code), fork, and checks.

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

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from earshot.cas.errors import EarshotError
from earshot.cas.logs import get_logger
from earshot.cas.project import Project

from .conversation import log_dir, log_path, open_log
from .engine import Engine
from .ids import EntryId, SessionId
from .records import SessionRecord
from .session_check import Problem, RepairResult, check, repair
from .session_entries import BatchLink, Entry, ForkOrigin
from .session_file import SessionNotFound
from .session_list import session_files
from .session_log import NoSuchPrompt, Session
from .session_tree import Prompt
from .sessions import create_session, start_session_upkeep
from .undo import Impact, NothingToUndo, undo_batches

log = get_logger("earshot.agent.conversation")


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
    if dry_run:  # writes nothing: not even the log of a session that has none
        try:
            session_log = Session.open(log_path(engine.project, engine.session.id))
        except SessionNotFound:
            raise NoSuchPrompt(SessionId(engine.session.id), n, 0) from None
    else:
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
