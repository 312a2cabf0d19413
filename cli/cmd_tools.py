"""The agent's tools as one-call batches: ``bash``, ``write``, ``edit``; and ``exec``."""

from __future__ import annotations

import json
import sys
from typing import IO

import click

from earshot.agent.core import coverage
from earshot.agent.core.calls import Bash, Call, EditFile, WriteFile, exit_status, parse_call
from earshot.agent.core.engine import Engine, Outcome
from earshot.agent.core.outside import notice

from . import render, render_agent
from .common import EXIT_ERROR, fail, session_command


def _finish(engine: Engine, out: Outcome, as_json: bool) -> None:
    """Print the outcome; exit with the command's code (bash) or 1 on a failed call.

    A signal received while a command ran (passed on to it) ends earshot
    too, once the batch is recorded: exit 128 + the signal, as a shell does.
    """
    if as_json:
        render.emit(
            render_agent.outcome(engine.session.id, out.batch, out.results, out.outside), "", True
        )
    if not as_json:
        _say_outside(out)
        for result in out.results:
            if result.error is not None:
                click.echo(f"earshot: {render.one_line(result.error)}", err=True)
            if result.git:
                click.echo(f"earshot: {render_agent.git_notice(result.git)}", err=True)
            if result.warning is not None:
                click.echo(f"earshot: {render.one_line(result.warning)}", err=True)
        _say_uncovered(out)
    if out.interrupted_by is not None:
        click.echo(
            f"earshot: interrupted by signal {out.interrupted_by}; batch {out.batch.seq} "
            "is recorded",
            err=True,
        )
        sys.exit(exit_status(out.interrupted_by))
    last = out.results[-1] if out.results else None
    if last is not None and last.exit_code is not None:
        sys.exit(last.exit_code)
    if any(not r.ok for r in out.results):
        sys.exit(EXIT_ERROR)


def _say_outside(out: Outcome) -> None:
    """On stderr: what changed outside any call before the calls, and its batch."""
    for batch in out.outside:
        click.echo(f"earshot: {render.one_line(notice(batch))}", err=True)


def _say_uncovered(out: Outcome) -> None:
    """On stderr: what the batch deleted or changed that undo cannot take back."""
    for line in coverage.lines(coverage.uncovered(out.batch.ledger), quote=render.quote_path):
        click.echo(f"earshot: {line}", err=True)


@click.command()
@click.argument("command")
@session_command
def bash(engine: Engine, as_json: bool, command: str) -> None:
    """Run COMMAND with your shell in the root, as a one-call batch.

    Output and exit code pass through. A command judged destructive (rm, mv,
    git reset, redirects, ...) gets a full snapshot before it runs.
    """
    _finish(engine, engine.run_batch([Bash(command)]), as_json)


@click.command()
@click.argument("path")
@click.option("--from", "source", type=click.File("rb"), help="Read the content from FILE.")
@session_command
def write(engine: Engine, as_json: bool, path: str, source: IO[bytes] | None) -> None:
    """Write PATH (relative to the root) from stdin or --from FILE, as a one-call batch."""
    data = source.read() if source is not None else sys.stdin.buffer.read()
    _finish(engine, engine.run_batch([WriteFile(path, data)]), as_json)


@click.command()
@click.argument("path")
@click.option("--old", required=True, help="The exact text to replace.")
@click.option("--new", required=True, help="The text to put in its place.")
@click.option("--all", "replace_all", is_flag=True, help="Replace every occurrence.")
@session_command
def edit(engine: Engine, as_json: bool, path: str, old: str, new: str, replace_all: bool) -> None:
    """Replace --old by --new in PATH (once; --all for every occurrence), as a one-call batch.

    Fails when --old is absent, or present more than once without --all.
    """
    _finish(engine, engine.run_batch([EditFile(path, old, new, replace_all)]), as_json)


@click.command(name="exec")
@click.argument("source", type=click.File("r"), default="-", metavar="[FILE|-]")
@session_command
def exec_(engine: Engine, as_json: bool, source: IO[str]) -> None:
    """Run a whole batch given as a JSON list of calls (from FILE or stdin).

    \b
    [{"tool": "write_file", "path": "a.txt", "content": "..."},
     {"tool": "edit", "path": "a.txt", "old": "x", "new": "y", "all": false},
     {"tool": "read_file", "path": "a.txt"},
     {"tool": "bash", "command": "make test"}]

    Prints one JSON result per call, one per line (with --json: one document).
    Exits 1 if a call failed.
    """
    try:
        docs = json.load(source)
    except json.JSONDecodeError as exc:
        fail(f"the batch is not valid JSON: {exc}")
    if not isinstance(docs, list):
        fail("the batch is a JSON list of calls")
    calls: list[Call] = [parse_call(i, doc) for i, doc in enumerate(docs)]
    engine.capture = True
    out = engine.run_batch(calls)
    if as_json:
        render.emit(
            render_agent.outcome(engine.session.id, out.batch, out.results, out.outside), "", True
        )
    else:
        _say_outside(out)
        for result in out.results:
            click.echo(json.dumps(result.to_json(), ensure_ascii=False))
        _say_uncovered(out)
    if out.interrupted_by is not None:
        sys.exit(exit_status(out.interrupted_by))
    if any(not r.ok for r in out.results):
        sys.exit(EXIT_ERROR)
