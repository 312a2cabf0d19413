"""``earshot hook AGENT``: one hook event of Claude Code, Codex CLI or Gemini CLI.

The agent runs it with the event's JSON on stdin (``earshot install`` sets
that up). It never blocks the agent unless installed with ``--strict``: what
goes wrong is said to the person in the agent's own way (a ``systemMessage``)
and the call runs; stdout carries exactly one JSON answer or nothing, since
an agent may read plain text there as context for the model. It gives up
before the agent's own timeout (``--timeout``), in the same way.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from types import FrameType, ModuleType
from typing import Any

import click

from earshot.agent.hooks import quick

from . import common, settings_file

#: Seconds an event may take before earshot lets the tool run unrecorded; the
#: agent's own timeout (set by ``earshot install``) is longer.
DEFAULT_TIMEOUT_S = 100
#: A payload is a few KiB; a Write of a big file carries it twice.
MAX_PAYLOAD = 256 << 20
#: Set by the hook's client when it began (time.time()), for the deadline.
STARTED = "EARSHOT_HOOK_STARTED"
#: What answering takes once the deadline passed (render, print, exit).
ANSWER_S = 0.3
#: Roots a hook never records: the whole system, and file systems made up on read.
_REFUSED_ROOTS = ("/proc", "/sys", "/dev")


class HookTimeout(Exception):
    """The event took longer than ``--timeout``."""


def adapter(agent: str) -> ModuleType:
    """The module that reads the agent's payloads and words earshot's answers."""
    import importlib

    return importlib.import_module(f"earshot.agent.hooks.{agent}")


@contextlib.contextmanager
def _deadline(seconds: float) -> Iterator[None]:
    """Raise ``HookTimeout`` in this (main) thread once ``seconds`` have passed since
    the hook's client began (``STARTED``: what it spent asking a daemon counts),
    leaving a moment to answer before the agent's own timeout."""

    def expired(signum: int, frame: FrameType | None) -> None:
        raise HookTimeout(f"it took longer than {seconds:g} s (earshot hook --timeout)")

    try:
        spent = time.time() - float(os.environ.get(STARTED, ""))
    except ValueError:
        spent = 0.0
    left = max(seconds - max(spent, 0.0) - ANSWER_S, 0.01)
    previous = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, left)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@click.command()
@click.argument("agent", type=click.Choice(quick.AGENTS))
@click.option(
    "--strict",
    is_flag=True,
    help="Refuse a tool whose state before could not be recorded (the model is told why), "
    "instead of letting it run unrecorded.",
)
@click.option(
    "--root",
    type=click.Path(file_okay=False, path_type=str),
    default=None,
    help="The working tree (default: the agent's project directory, else the event's cwd).",
)
@click.option(
    "--timeout",
    type=click.FloatRange(min=1),
    default=DEFAULT_TIMEOUT_S,
    show_default=True,
    help="Seconds before earshot gives up on an event and lets the tool run.",
)
@click.option("-v", "--verbose", count=True, help="Log to stderr (-vv for debug).")
def hook(agent: str, strict: bool, root: str | None, timeout: float, verbose: int) -> None:
    """Handle one hook event of AGENT (claude, codex or gemini), read as JSON from stdin.

    'earshot install AGENT' puts this command in the agent's settings; there
    is no need to run it by hand. Always exits 0: a failure is said to the
    person (the agent shows it) and the tool still runs, unless --strict.
    """
    common.configure_logging(verbose)
    module = adapter(agent)
    stdout = sys.stdout
    answer: dict[str, Any] | None = None
    try:
        payload = json.loads(sys.stdin.buffer.read(MAX_PAYLOAD))
        event = module.parse(payload)
    except (ValueError, TypeError, AttributeError, RecursionError) as exc:
        # Not an event this agent sends (a field of the wrong type, nested past
        # any limit): said to the person; nothing can be refused or recorded.
        why = f"{type(exc).__name__}: {exc}" if isinstance(exc, RecursionError) else str(exc)
        answer = {"systemMessage": f"earshot: could not read the {agent} hook's event: {why}"}
    else:
        if quick.costs_nothing(agent, payload):
            return
        where = root or quick.project_dir(agent, payload) or os.getcwd()
        answer = _answer(module, event, where, strict, timeout)
    if answer is not None:
        stdout.write(json.dumps(answer, ensure_ascii=True) + "\n")
        stdout.flush()


def _answer(
    module: ModuleType, event: Any, root: str, strict: bool, timeout: float
) -> dict[str, Any] | None:
    """Handle the event in ``root``; whatever goes wrong becomes the answer's message."""
    from earshot.agent.core.calls import error_text
    from earshot.agent.hooks.answer import Answer
    from earshot.agent.hooks.handler import Options, failure, handle
    from earshot.agent.hooks.process import agent_process

    said = io.StringIO()
    try:
        # Nothing may reach the agent's stdout but the answer: what earshot
        # says on the way (an interrupted batch it recorded) goes into it.
        with _deadline(timeout), contextlib.redirect_stdout(said), contextlib.redirect_stderr(said):
            answer = _handled(event, root, strict, handle, Options, agent_process)
    except Exception as exc:  # fail open, but say so: never a traceback at the agent
        answer = failure(event, error_text(exc), strict)
    lines = [line for line in said.getvalue().splitlines() if line.strip()]
    if lines:
        merged = "\n".join([*lines, *([answer.message] if answer.message else [])])
        answer = Answer(message=merged, deny=answer.deny)
    rendered: dict[str, Any] | None = module.render(event, answer)
    return rendered


def _handled(
    event: Any, root: str, strict: bool, handle: Any, options: Any, agent_process: Any
) -> Any:
    from earshot.agent.core.records import TABLES
    from earshot.agent.hooks.events import EventKind
    from earshot.cas.project import Project

    broken = os.environ.get(settings_file.BROKEN)
    if broken:  # nothing recorded with settings other than the person's: said, and --strict refuses
        raise RuntimeError(f"{broken}; nothing is recorded until it is fixed")
    if not os.path.isabs(root) or not os.path.isdir(root):
        raise NotADirectoryError(f"{root}: not a directory (the agent's project directory)")
    real = os.path.realpath(root)
    if real == "/" or any(real == t or real.startswith(t + "/") for t in _REFUSED_ROOTS):
        raise NotADirectoryError(f"{real}: earshot does not record it (the agent's project?)")
    caller = common.CALLER_PID or os.getpid()
    if event.kind is EventKind.COMMAND:
        # The person typed a prompt: the agent's turn is over, whatever it left
        # open ends now (its calls still running never will), then the command runs.
        with Project(root, extra_tables=TABLES) as project:
            common.settle(project, True)
            handle(project, event, tracker=common.tracker(project), options=options())
        return _run_command(event, root)
    with Project(root, extra_tables=TABLES) as project:
        common.settle(project, True)
        return handle(
            project,
            event,
            tracker=common.tracker(project),
            options=options(strict=strict, holder=agent_process(caller)),
        )


#: Seconds an earshot command typed as a prompt may take (an undo of a large batch).
COMMAND_TIMEOUT_S = 80


def _run_command(event: Any, root: str) -> Any:
    """Run the earshot command the person typed as the prompt, for the agent's session,
    in a process of its own (it opens the store and takes the session's locks as any
    command does); what it printed is the answer, and the prompt goes no further."""
    import subprocess

    from earshot.agent.core.records import TABLES
    from earshot.agent.hooks.answer import Answer
    from earshot.agent.hooks.handler import bind
    from earshot.cas.project import Project

    with Project(root, extra_tables=TABLES) as project:
        session, _new = bind(project, event.agent, event.session)
    words = list(event.command)
    if words[0] != "sessions":
        words += ["--session", session]
    me = Path(__file__).with_name("__main__.py")
    done = subprocess.run(
        [sys.executable, str(me), *words, "--root", root],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        errors="replace",
        timeout=COMMAND_TIMEOUT_S,
        check=False,
    )
    text = (done.stdout + done.stderr).strip() or "(nothing printed)"
    if done.returncode not in (0, 3):
        text += f"\n(earshot {words[0]} exited {done.returncode})"
    return Answer(block=f"earshot {' '.join(event.command)}:\n{text}")
