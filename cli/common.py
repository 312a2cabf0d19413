"""What every project command shares: options, opening the project, errors.

``project_command`` adds ``--root``, ``--json`` and ``-v``, opens the root's
project and hands it to the command (borg's ``with_repository``), and turns
earshot's own errors into one line on stderr with the exit code each carries
(``EarshotError.exit_code``).
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, NoReturn, TypeVar

import click

F = TypeVar("F", bound=Callable[..., Any])

EXIT_ERROR = 1
EXIT_SKIPPED = 3
#: The daemon the CLI starts: the watcher, hosting whole commands (cli/daemon.py).
DAEMON = "earshot.cli.daemon"
#: Set in a daemon's worker serving a thin client: runs a batch's shell
#: commands in the client's process (see cli/daemon.py).
COMMAND_RUNNER: Any = None
#: Set in a daemon's worker: the pid of the client it serves (the process
#: the agent ran, for a hook), since the worker's own parent is the daemon.
CALLER_PID: int | None = None


def configure_logging(verbose: int) -> None:
    """Logs on stderr: with no ``-v``, warnings alone, each one plain line
    (``earshot: warning: ...``); ``-v``, ``-vv``: structured records."""
    import logging

    from earshot.cas.logs import set_plain

    set_plain(verbose == 0)

    level = logging.DEBUG if verbose > 1 else logging.INFO if verbose == 1 else logging.WARNING
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(message)s"))
    logger = logging.getLogger("earshot")
    logger.handlers[:] = [handler]
    logger.setLevel(level)
    logger.propagate = False


def fail(message: str, code: int = EXIT_ERROR, kind: str = "error") -> NoReturn:
    """One line on stderr (control characters in a name escaped), then exit.

    With ``--json``, stdout holds the error as its one document, as git and jj
    tools' scripts expect: ``{"error": {"code": "root_too_wide", "message":
    ..., "exit": 1}}`` (``kind``: what went wrong, in snake case).
    """
    from .render import EMITTED, emit, one_line

    line = one_line(message)
    ctx = click.get_current_context(silent=True)
    if ctx is not None and ctx.params.get("as_json") and not EMITTED["json"]:
        emit({"error": {"code": kind, "message": line, "exit": code}}, "", True)
    click.echo(f"earshot: {line}", err=True)
    sys.exit(code)


@contextmanager
def usage_errors_as_json(argv: list[str]) -> Iterator[None]:
    """A usage error click finds (an unknown option, a missing argument), with
    ``--json``, is one document on stdout as every other error is, code
    ``usage``, exit 2; click still prints the usage and its line on stderr.

    ``--json`` counts before a ``--`` only: after it, it is a command's word.
    """
    try:
        yield
    except click.UsageError as exc:
        words = argv[: argv.index("--")] if "--" in argv else argv
        if "--json" in words:
            from .render import EMITTED, emit, one_line

            if not EMITTED["json"]:
                error = {"code": "usage", "message": one_line(exc.format_message())}
                emit({"error": {**error, "exit": exc.exit_code}}, "", True)
        raise


def _next_step(exc: BaseException) -> str:
    """An error's line, with what to do next where the error cannot say it: an
    object the store's records name but it does not hold, or holds damaged, is
    damage fsck lists (a page of the index lost, a flipped byte)."""
    from earshot.cas.location import CorruptObject
    from earshot.cas.objects import MissingObject

    if isinstance(exc, MissingObject | CorruptObject):
        return f"{exc}; run 'earshot fsck'"
    return str(exc)


def error_kind(exc: BaseException) -> str:
    """``RootTooWide`` -> ``root_too_wide``: an error's code in ``--json``."""
    name = type(exc).__name__
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in name).lstrip("_")


def settle(project: Any, finish: bool, as_json: bool = False) -> list[Any]:
    """Operations a dead process left (intents): finish them, or only say so.

    A command that changes files or the store finishes them first (an
    interrupted batch is recorded, an undo or restore completed), with its
    progress shown as the command's own is; any other command only reports
    them, and changes nothing.
    """
    from earshot.agent.core.records import upgrade_records

    upgrade_records(project.store.backend)
    for _, damaged in project.intents.damaged():
        click.echo(
            f"earshot: {damaged.what} is damaged ({damaged.why}): it cannot be finished; "
            "'earshot fsck --repair' sets it aside",
            err=True,
        )
    if not project.intents.pending():
        return []
    # Only now: finishing imports most of the agent layer (~60 ms a command).
    from earshot.agent.core.recovery import describe, finish_all, interrupted

    if finish:
        from .progress import progress_for

        with progress_for(as_json) as progress:  # the line is gone before the lines below
            finished, unfinished = finish_all(project, progress)
        for item in finished:
            click.echo(f"earshot: {item.summary}", err=True)
        for left in unfinished:
            click.echo(
                f"earshot: could not finish the interrupted {describe(left.intent)}: {left.reason}",
                err=True,
            )
        return [item.intent for item in finished]
    for intent in interrupted(project):
        click.echo(
            f"earshot: interrupted: {describe(intent)}; the next command that changes "
            "files finishes it",
            err=True,
        )
    return []


ROOT_DEFAULT = (
    "the nearest directory up from here that is a git work tree's top, holds "
    ".earshotignore or an earshot store; else the current directory"
)


#: ``--list``: every path of a long result (past 50 it is summed up per folder).
#: Not ``--verbose``: that is ``-v``'s long form, which brings back the logs.
list_option = click.option(
    "--list",
    "every",
    is_flag=True,
    help="List every path, however many (past 50 they are counted per folder).",
)


def root_option(text: str) -> Callable[[F], F]:
    """``--root``; unset (None), the root is found from the current directory."""
    return click.option(
        "--root",
        type=click.Path(file_okay=False, path_type=str),
        default=None,
        show_default=ROOT_DEFAULT,
        help=f"{text} /, your home directory and a file system's top are taken only "
        "when named here.",
    )


def discovered(root: str | None) -> str:
    """The root given, or the one the current directory means (``cas/rootfind``)."""
    if root is not None:
        return root
    from earshot.cas.paths import data_home
    from earshot.cas.rootfind import find_root

    return find_root(os.getcwd(), data_home()).root


def project_command(func: F) -> F:
    """Add --root/--json/-v, open the project, pass it as ``project``.

    Interrupted operations are finished first (see ``settle``).
    """
    return _project_command(func, finish=True)


def project_reader(func: F) -> F:
    """``project_command`` for commands that change nothing: interrupted
    operations are reported, not finished."""
    return _project_command(func, finish=False)


def _project_command(func: F, finish: bool) -> F:

    @root_option("The working tree to act on.")
    @click.option("--json", "as_json", is_flag=True, help="Print one JSON document on stdout.")
    @click.option("-v", "--verbose", count=True, help="Log to stderr (-vv for debug).")
    @functools.wraps(func)
    def wrapper(root: str | None, as_json: bool, verbose: int, **kwargs: Any) -> Any:
        configure_logging(verbose)
        from earshot.cas.errors import EarshotError
        from earshot.cas.project import Project

        try:
            root = discovered(root)
            if not os.path.isdir(root):
                fail(f"{root}: no such directory (give --root an existing directory)")
            from earshot.agent.core.records import TABLES

            with Project(root, extra_tables=TABLES) as project:
                settled = settle(project, finish and not kwargs.get("dry_run"), as_json)
                if getattr(func, "takes_settled", False):
                    kwargs["settled"] = settled
                return func(project=project, as_json=as_json, **kwargs)
        except EarshotError as exc:
            fail(_next_step(exc), exc.exit_code, error_kind(exc))
        except BrokenPipeError:
            raise  # the reader went away (a pager quit at once): click ends quietly
        except OSError as exc:
            where = f"{exc.filename}: " if exc.filename else ""
            fail(f"{where}{exc.strerror or exc}")

    return wrapper  # type: ignore[return-value]


def tracker(project: Any) -> Any:
    """The watch daemon's tracker for this root, started as $EARSHOT_WATCH says; or None.

    The engine then takes a scoped restage of what the daemon saw instead of
    walking the tree; without one it falls back to the policy's full restages.
    """
    from earshot.agent.watch.client import tracker_for

    return tracker_for(project.root, project.home, module=DAEMON)


def acts_on(kind: str) -> Callable[[F], F]:
    """Below ``session_command`` or ``session_lookup``: with no session named,
    the command takes the most recent one with ``kind`` to act on
    (``conversation.BATCHES``, ``PROMPTS``), and says which."""

    def mark(func: F) -> F:
        func.acting = kind  # type: ignore[attr-defined]
        return func

    return mark


def say_chosen(project: Any, ident: str, given: str | None, continue_: bool) -> None:
    """Name the session taken when none was named and the root has others:
    ``earshot: session 01m8z2d9xf00 (claude, 3 batches, 2 min ago)``."""
    from earshot.agent.core.conversation import summaries
    from earshot.agent.core.sessions import ENV_SESSION

    if given or continue_ or os.environ.get(ENV_SESSION):
        return
    every = summaries(project)
    if len(every) < 2:
        return
    from .render_session import chosen_line

    chosen = next((s for s in every if s.id == ident), None)
    if chosen is not None:
        click.echo(f"earshot: {chosen_line(chosen)}", err=True)


def session_command(func: F) -> F:
    """``project_command`` plus session selection: hands in an ``engine`` for the session.

    The session is ``--session ID`` or ``--resume ID`` (an id or unique
    prefix), else with ``--continue`` the most recently active one, else
    $EARSHOT_SESSION, else the most recently active session of the root, else
    a new one. Its conversation log and checkpoint history both exist after.
    The engine uses the watch daemon, starting it as $EARSHOT_WATCH says.
    """
    return _session_command(func, watch=True)


def session_reader(func: F) -> F:
    """``session_command`` for commands that never change files (prompt, say,
    fork): they neither ask for the watch daemon nor start one."""
    return _session_command(func, watch=False)


def session_lookup(func: F) -> F:
    """For commands that only read a session (log, tree): hands in ``session``,
    the id the session options choose, or None when the root has no session.
    Nothing is created: no session, no log, no daemon.
    """

    @_session_options
    @functools.wraps(func)
    def wrapper(
        project: Any,
        session_id: str | None,
        resume_id: str | None,
        continue_: bool,
        **kwargs: Any,
    ) -> Any:
        from earshot.agent.core.conversation import find

        given = _given(session_id, resume_id, continue_)
        acting = getattr(func, "acting", None)
        ident = find(project, given, most_recent=continue_, acting=acting)
        if ident is not None and acting is not None and not kwargs.get("as_json"):
            say_chosen(project, ident, given, continue_)
        return func(project=project, session=ident, **kwargs)

    return project_reader(wrapper)  # type: ignore[return-value]


def _session_options(func: F) -> F:
    options = [
        click.option(
            "--session",
            "session_id",
            default=None,
            metavar="ID",
            help="The session (a unique id prefix); default: $EARSHOT_SESSION, "
            "else the most recent, else a new one.",
        ),
        click.option(
            "--resume", "resume_id", default=None, metavar="ID", help="Same as --session."
        ),
        click.option(
            "--continue",
            "continue_",
            is_flag=True,
            help="The most recently active session (ignores $EARSHOT_SESSION).",
        ),
    ]
    for option in reversed(options):
        func = option(func)
    return func


def _given(session_id: str | None, resume_id: str | None, continue_: bool) -> str | None:
    """The session id given, refusing more than one way of choosing."""
    given = [n for n, v in (("--session", session_id), ("--resume", resume_id)) if v]
    if continue_:
        given.append("--continue")
    if len(given) > 1:
        message = f"{' and '.join(given)} each choose a session: give one"
        raise click.UsageError(message, ctx=click.get_current_context())
    return session_id or resume_id


def _read_only_engine(
    project: Any, given: str | None, most_recent: bool, acting: str | None = None
) -> Any:
    """An engine on an existing session for a dry run, which must create nothing."""
    from earshot.agent.core.conversation import NoCheckpoints, NoSessions, find
    from earshot.agent.core.engine import Engine
    from earshot.agent.core.records import get_session

    ident = find(project, given, most_recent=most_recent, acting=acting)
    if ident is None:
        raise NoSessions()
    with project.store.backend.read() as view:
        if get_session(view, ident) is None:
            raise NoCheckpoints(ident)
    return Engine(project, ident)


def _session_command(func: F, watch: bool) -> F:

    @_session_options
    @functools.wraps(func)
    def wrapper(
        project: Any,
        session_id: str | None,
        resume_id: str | None,
        continue_: bool,
        settled: list[Any],
        **kwargs: Any,
    ) -> Any:
        from earshot.agent.core.conversation import select
        from earshot.agent.core.engine import Engine

        given = _given(session_id, resume_id, continue_)
        acting = getattr(func, "acting", None)
        if kwargs.get("dry_run"):  # a dry run creates nothing: no session, no log, no daemon
            engine = _read_only_engine(project, given, continue_, acting)
            if acting is not None:
                say_chosen(project, engine.session.id, given, continue_)
            return func(engine=engine, **kwargs)
        record, created = select(project, given, most_recent=continue_, acting=acting)
        if created:
            click.echo(f"earshot: started session {record.id}", err=True)
        elif acting is not None:
            say_chosen(project, record.id, given, continue_)
        runner = {"runner": COMMAND_RUNNER} if COMMAND_RUNNER is not None else {}
        engine = Engine(
            project,
            record.id,
            tracker=tracker(project) if watch else None,
            capture_output=kwargs.get("as_json", False),
            **runner,
        )
        # What this command finished before it runs: re-running a killed undo
        # must finish it, not undo once more.
        engine.settled = tuple(settled)
        return func(engine=engine, **kwargs)

    wrapper.takes_settled = True  # type: ignore[attr-defined]
    return _project_command(wrapper, finish=watch)  # type: ignore[return-value]
