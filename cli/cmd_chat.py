"""``earshot chat``: the coding agent, on a terminal or as one prompt for scripts.

The conversation is the session's JSONL log and each reply's tool calls are
one checkpoint batch of the same session, so everything ``earshot log``,
``undo``, ``tree``, ``rewind`` and ``fork`` do works on a chat's session from
another terminal, and the other way round.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Iterator
from types import FrameType
from typing import Any

import click

from earshot.agent.core import coverage
from earshot.agent.loop.chat import Chat, TurnResult
from earshot.agent.loop.events import Events
from earshot.agent.loop.history import Output, Use
from earshot.agent.loop.permissions import Answer, Grants, parse_allow
from earshot.agent.loop.provider import Provider, Reply, make_provider, preload
from earshot.agent.loop.workspace import Workspace

from . import render
from .common import (
    EXIT_ERROR,
    configure_logging,
    discovered,
    error_kind,
    fail,
    root_option,
    tracker,
)


class _Quiet:
    """Print mode's ``Events``: only what a script must know goes to stderr."""

    def text(self, delta: str) -> None:
        pass

    def reply(self, reply: Reply) -> None:
        pass

    def command(self, command: str) -> None:
        pass

    def output(self, text: str) -> None:
        pass

    def command_ended(self) -> None:
        pass

    def result(self, use: Use, output: Output) -> None:
        pass

    def batch(self, batch: Any) -> None:
        # What the reply's calls did that undo cannot take back, on stderr.
        for line in coverage.lines(coverage.uncovered(batch.ledger), quote=render.quote_path):
            click.echo(f"earshot: {line}", err=True)

    def injected(self, text: str) -> None:
        pass

    def notice(self, text: str) -> None:
        click.echo(f"earshot: {render.one_line(text)}", err=True)

    def ask(self, tool: str, detail: str) -> Answer:
        click.echo(
            f"earshot: {tool} denied ({render.one_line(detail)[:120]}): print mode asks no "
            f"one; --allow {tool} allows it",
            err=True,
        )
        return Answer.DENY


def _workspace(root: str, events: list[Events]) -> Workspace:
    def notify(text: str) -> None:
        for target in events:
            target.notice(text)

    return Workspace(root, tracker=tracker, notify=notify)


@contextlib.contextmanager
def _interrupting(chat: Chat) -> Iterator[list[int]]:
    """SIGINT, SIGTERM and SIGHUP interrupt the turn (as Esc does); the signals received."""
    received: list[int] = []

    def handler(signum: int, frame: FrameType | None) -> None:
        received.append(signum)
        chat.interrupt()

    saved = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    try:
        yield received
    finally:
        for sig, old in saved.items():
            signal.signal(sig, old)


def _run_turn(chat: Chat, prompt: str) -> tuple[TurnResult, list[int]]:
    """The turn on a thread of its own, so a signal to this one interrupts it cleanly."""
    box: dict[str, Any] = {}

    def work() -> None:
        try:
            box["result"] = chat.turn(prompt)
        except BaseException as exc:
            box["error"] = exc

    thread = threading.Thread(target=work, name="earshot-turn", daemon=True)
    with _interrupting(chat) as received:
        thread.start()
        while thread.is_alive():
            thread.join(0.2)
    if "error" in box:
        raise box["error"]
    result: TurnResult = box["result"]
    return result, received


def _print_mode(
    root: str,
    session: tuple[str | None, bool],
    model: Provider,
    prompt: str,
    allowed: frozenset[str],
    as_json: bool,
) -> None:
    quiet = _Quiet()
    workspace = _workspace(root, [quiet])
    given, most_recent = session
    new = not (given or most_recent)
    ident = workspace.open_session(given, most_recent=most_recent, new=new)
    chat = Chat(workspace, ident, model, quiet, grants=Grants(allowed))
    result, received = _run_turn(chat, prompt)
    if result.stop == "error":
        if new and not result.text and not result.batches and workspace.discard_unused(ident):
            fail(str(result.error))  # refused before any reply: no session is left behind
        fail(f"{result.error} (session {ident})")
    if as_json:
        doc = {
            "text": result.text,
            "session": ident,
            "batches": result.batches,
            "stop": result.stop,
        }
        render.emit(doc, "", True)
    else:
        click.echo(result.text)
    if received:
        made = (
            f"batch {', '.join(map(str, result.batches))} recorded"
            if result.batches
            else "no batch was made"
        )
        click.echo(f"earshot: interrupted by signal {received[0]}; {made}", err=True)
        sys.exit(128 + received[0])
    if result.stop == "interrupted":
        sys.exit(EXIT_ERROR)


def _terminal(
    root: str, session: tuple[str | None, bool], model: Provider, allowed: frozenset[str]
) -> None:
    from .chat_terminal import Terminal

    given, most_recent = session

    opened: list[tuple[Workspace, str]] = []

    def make_chat(face: Terminal) -> Chat:
        workspace = _workspace(root, [face])
        new = not (given or most_recent)
        ident = workspace.open_session(given, most_recent=most_recent, new=new)
        if new:
            opened.append((workspace, ident))
        return Chat(workspace, ident, model, face, grants=Grants(allowed))

    faces: list[Terminal] = []
    discarded: set[str] = set()
    try:
        faces.append(Terminal(make_chat))
        signalled = faces[0].run()
    finally:
        for workspace, ident in opened:  # a chat closed before anything came of it
            if workspace.discard_unused(ident):
                discarded.add(ident)
    if signalled is not None:
        sys.exit(128 + signalled)
    last = faces[0].chat.session
    if last not in discarded:  # how to come back to it
        click.echo(f"earshot chat --resume {last} goes on in this session")


@click.command()
@root_option("The working tree the agent works in.")
@click.option("--continue", "continue_", is_flag=True, help="Go on in the most recent session.")
@click.option("--resume", "resume_id", metavar="ID", help="Go on in session ID (a unique prefix).")
@click.option(
    "--model",
    metavar="PROVIDER:NAME",
    help="anthropic:NAME or openai:NAME (default: $EARSHOT_MODEL, else "
    "anthropic:claude-sonnet-4-5).",
)
@click.option(
    "-p",
    "--print",
    "prompt",
    metavar="PROMPT",
    help="Run PROMPT to the end, print the reply, exit ('-': stdin).",
)
@click.option(
    "--allow",
    metavar="TOOLS",
    help="Allow these tools without asking: bash,write_file,edit (comma-separated).",
)
@click.option("--json", "as_json", is_flag=True, help="With -p: print one JSON document.")
@click.option("-v", "--verbose", count=True, help="Log to stderr (-vv for debug).")
def chat(
    root: str | None,
    continue_: bool,
    resume_id: str | None,
    model: str | None,
    prompt: str | None,
    allow: str | None,
    as_json: bool,
    verbose: int,
) -> None:
    """Talk to a model that works in the root: it reads, writes and runs commands.

    \b
    earshot chat                      a new session, on this terminal
    earshot chat --continue           the most recent session of the root
    earshot chat -p 'fix the test' --allow bash,edit --json
                                      one prompt for a script: prints the reply

    Each reply's tool calls are one checkpoint batch of the session: /undo
    (or 'earshot undo' from another terminal) takes it back, and /rewind N
    --code goes back to before prompt N, files included. Before the first
    bash, write_file or edit the agent asks (once, for the session, or no);
    print mode asks no one, so what --allow leaves out is denied. Text typed
    while the model works goes in at its next call; Esc stops the turn.
    Keys and base URLs come from ANTHROPIC_API_KEY / ANTHROPIC_BASE_URL and
    OPENAI_API_KEY / OPENAI_BASE_URL (any OpenAI-compatible server).
    """
    configure_logging(verbose)
    from earshot.cas.errors import EarshotError

    if continue_ and resume_id:
        raise click.UsageError("--continue and --resume each choose a session: give one")
    if as_json and prompt is None:
        raise click.UsageError("--json goes with -p PROMPT")
    try:
        root = discovered(root)
    except EarshotError as exc:
        fail(str(exc), exc.exit_code, error_kind(exc))
    if not os.path.isdir(root):
        fail(f"{root}: no such directory (give --root an existing directory)")
    if prompt is None and not (sys.stdin.isatty() and sys.stdout.isatty()):
        fail("earshot chat needs a terminal; for scripts, give it -p PROMPT", 2)
    try:
        allowed = parse_allow(allow)
        provider = make_provider(model)
        provider.check()  # no key: said now, before a session or a request
        preload(provider)  # the SDK loads while the session opens
        session = (resume_id, continue_)
        if prompt is not None:
            text = sys.stdin.read() if prompt == "-" else prompt
            _print_mode(root, session, provider, text, allowed, as_json)
        else:
            _terminal(root, session, provider, allowed)
    except EarshotError as exc:
        fail(str(exc), exc.exit_code, error_kind(exc))
    except OSError as exc:
        where = f"{exc.filename}: " if exc.filename else ""
        fail(f"{where}{exc.strerror or exc}")
