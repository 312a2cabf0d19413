"""The conversation commands: ``prompt``, ``say``, ``tree``, ``transcript``, ``rewind``, ``fork``,
``sessions``."""

from __future__ import annotations

import sys
import time

import click

from earshot.agent.core import conversation, navigation, removal
from earshot.agent.core import transcript as transcripts
from earshot.agent.core.engine import Engine
from earshot.agent.core.records import OUTSIDE
from earshot.cas.paths import sessions_dir
from earshot.cas.project import Project

from . import colour, render, render_conversation, render_session
from .common import (
    EXIT_SKIPPED,
    acts_on,
    fail,
    list_option,
    project_reader,
    session_command,
    session_lookup,
    session_reader,
)
from .progress import progress_for
from .readonly import is_dry_run, no_sessions, unless_recorded

_UNITS = {"m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def _age_s(text: str) -> int:
    """``30m``, ``12h``, ``7d``, ``2w`` -> seconds."""
    number, unit = text[:-1], text[-1:].lower()
    if not number.isdigit() or unit not in _UNITS:
        raise click.BadParameter(f"{text!r}: a number and m, h, d or w (7d)", param_hint="AGE")
    return int(number) * _UNITS[unit]


def _remove(project: Project, as_json: bool, ids: tuple[str, ...], older_than: str | None) -> None:
    if bool(ids) == bool(older_than):
        raise click.UsageError("'sessions rm' takes session ids or --older-than AGE: one of them")
    if older_than:
        cutoff = time.time_ns() - _age_s(older_than) * 1_000_000_000
        chosen = [s.id for s in conversation.summaries(project) if s.last_activity_ns < cutoff]
    else:
        chosen = []
        for text in ids:
            ident = conversation.find(project, text)
            if ident is None or ident == OUTSIDE:
                raise click.BadParameter(f"{text!r}: no such session", param_hint="ID")
            chosen.append(ident)
    removed = removal.remove_sessions(project, sorted(set(chosen)))
    text = "\n".join(f"removed session {ident}" for ident in removed) or "no session to remove"
    if removed:
        text += "\n'earshot gc' frees what only they used"
    render.emit({"removed": removed}, text, as_json)


def _text(text: str) -> str:
    """TEXT, or stdin for "-"."""
    return sys.stdin.read() if text == "-" else text


@click.command()
@click.argument("text")
@session_reader
def prompt(engine: Engine, as_json: bool, text: str) -> None:
    """Append TEXT ("-": stdin) as a user prompt to the session; prints the entry id.

    Checkpoint batches made afterwards in the session are linked after it,
    so 'earshot rewind --code' knows which came after which prompt.
    """
    entry = conversation.say(engine.project, engine.session.id, "user", _text(text))
    doc, out = render_session.message(entry, engine.session.id)
    render.emit(doc, out, as_json)


@click.command()
@click.argument("text")
@click.option(
    "--role",
    type=click.Choice(conversation.ROLES),
    default="assistant",
    show_default=True,
    help="Who says it.",
)
@session_reader
def say(engine: Engine, as_json: bool, text: str, role: str) -> None:
    """Append TEXT ("-": stdin) as a message of --role to the session; prints the entry id."""
    entry = conversation.say(engine.project, engine.session.id, role, _text(text))
    doc, out = render_session.message(entry, engine.session.id)
    render.emit(doc, out, as_json)


def _no_tree(as_json: bool, **options: object) -> None:
    render.emit(*render_session.tree(None, ()), as_json)


@click.command()
@unless_recorded(_no_tree)
@session_lookup
def tree(project: Project, as_json: bool, session: str | None) -> None:
    """List the numbered user prompts on the session's current path.

    With each: its time, its first line, and whether the conversation has
    branches there (an earlier rewind went another way). 'earshot rewind N'
    and 'earshot fork N' take these numbers. Creates nothing: in a root with
    no session it says so.
    """
    prompts = navigation.read_prompts(project, session) if session is not None else ()
    doc, out = render_session.tree(session, prompts)
    colour.emit(doc, out, as_json, colour.numbered_line)


def _no_transcript(as_json: bool, **options: object) -> None:
    render.emit(*render_conversation.transcript(None), as_json)


@click.command()
@click.option(
    "--at",
    metavar="ENTRY",
    help="Show the branch holding ENTRY (an entry id or unique prefix) instead of "
    "the current path.",
)
@unless_recorded(_no_transcript)
@session_lookup
@acts_on(conversation.PROMPTS)
def transcript(project: Project, as_json: bool, session: str | None, at: str | None) -> None:
    """Show the session's conversation along its current path.

    User prompts numbered as in 'earshot tree' and shown whole, the
    assistant's replies whole, each tool call on one line with the first
    line of its result, batch links, compactions and rewinds where they
    happened. Where an earlier rewind left another branch, the line says so
    and names its last entry: --at ENTRY shows the branch holding ENTRY,
    from the start to that branch's most recent end. With no session named,
    the most recent one with prompts. Creates nothing.
    """
    shown = transcripts.read_transcript(project, session, at) if session is not None else None
    doc, out = render_conversation.transcript(shown)
    colour.emit(doc, out, as_json, colour.numbered_line)


@click.command()
@click.argument("n", type=click.IntRange(min=1), metavar="N")
@click.option("--code", is_flag=True, help="Also undo every checkpoint batch made after it.")
@click.option("--dry-run", is_flag=True, help="With --code: show the impact, change nothing.")
@click.option("--force", is_flag=True, help="With --code: overwrite conflicting files.")
@list_option
@unless_recorded(no_sessions, when=is_dry_run)
@session_command
@acts_on(conversation.PROMPTS)
def rewind(
    engine: Engine, as_json: bool, n: int, code: bool, dry_run: bool, force: bool, every: bool
) -> None:
    """Return the conversation to before prompt N, and print prompt N's text.

    Appends a navigation entry (nothing is rewritten: the abandoned branch
    stays in the log, and 'earshot tree' marks it). With --code, first undoes
    the session's batches made after that point, with undo's rules: a file
    changed since is a conflict, left alone (exit 3) unless --force; only
    files a call created are deleted. Refused (exit 1, nothing appended) when
    no such batch is left to undo. 'earshot redo' brings the code back.
    A second rewind of the same session while one runs is refused.
    """
    if (dry_run or force) and not code:
        raise click.UsageError("--dry-run and --force go with --code")
    finished = engine.finished_interrupted("rewind")
    if finished is not None and not dry_run:
        seq = finished.doc.get("seq")
        text = f"the interrupted rewind is finished (batch {seq}); nothing more was done"
        render.emit({"finished_interrupted": True, "record": seq}, text, as_json)
        return
    with progress_for(as_json) as progress:
        result = navigation.rewind(
            engine, n, code=code, force=force, dry_run=dry_run, progress=progress
        )
    doc, out = render_session.rewound(result, every)
    render.emit(doc, out, as_json)
    if not result.dry_run and not as_json:
        render_session.notice(render_session.rewound_notice(result))
    impact = result.impact
    if impact is not None and (impact.conflicts or impact.kept):
        sys.exit(EXIT_SKIPPED)


@click.command()
@click.argument("n", type=click.IntRange(min=1), metavar="[N]", required=False)
@session_reader
def fork(engine: Engine, as_json: bool, n: int | None) -> None:
    """Start a new session holding the current path up to before prompt N; print its id.

    Without N, the whole current path. The new log's header names the
    session and entry it came from; the working tree is not touched, and the
    new session's undo never reaches batches of the session it came from.
    """
    result = navigation.fork(engine.project, engine.session.id, n)
    doc, out = render_session.forked(result)
    render.emit(doc, out, as_json)


def _no_sessions(root: str, as_json: bool, action: str | None, **options: object) -> None:
    if action is None:
        render.emit(*render_session.sessions([]), as_json)
    else:
        render.emit(*render_session.checked([], sessions_dir(root)), as_json)


@click.command()
@click.argument("action", type=click.Choice(["check", "rm"]), required=False, metavar="[check|rm]")
@click.argument("ids", nargs=-1, metavar="[ID]...")
@click.option("--repair", is_flag=True, help="With check: repair what can be (backup kept).")
@click.option(
    "--older-than",
    "older_than",
    metavar="AGE",
    help="With rm: every session last active more than AGE ago (30m, 12h, 7d, 2w).",
)
@unless_recorded(_no_sessions)
@project_reader
def sessions(
    project: Project,
    as_json: bool,
    action: str | None,
    ids: tuple[str, ...],
    repair: bool,
    older_than: str | None,
) -> None:
    """List the root's sessions, most recently active first; 'check' validates their
    files; 'rm' removes sessions.

    \b
    earshot sessions              id, last activity, batches, first prompt
    earshot sessions check        header, unique ids, parents, cycles, torn tail
    earshot sessions check --repair
                                  truncate a torn tail, close interrupted tool
                                  calls; the original is kept as FILE.bak-TIME
    earshot sessions rm ID...     remove sessions whole: log and checkpoints
    earshot sessions rm --older-than 7d

    check exits 1 when a problem remains (listed on stdout). A removed
    session's batches cannot be undone any more; 'earshot gc' then frees
    what only they used.
    """
    if action == "rm":
        _remove(project, as_json, ids, older_than)
        return
    if ids or older_than:
        raise click.UsageError("session ids and --older-than go with 'rm'")
    if action is None:
        if repair:
            raise click.UsageError("--repair goes with 'check'")
        listed = conversation.summaries(project, with_prompt_counts=True)
        doc, out = render_session.sessions(listed)
        render.emit(doc, out, as_json)
        return
    results = navigation.check_sessions(project, fix=repair)
    doc, out = render_session.checked(results, conversation.log_dir(project))
    render.emit(doc, out, as_json)
    bad = sum(1 for r in results if r.remaining)
    if bad:
        fail(f"{bad} of {len(results)} session files have problems (listed on stdout)")
