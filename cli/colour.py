"""Colour for ``diff``, ``log``, ``tree`` and ``transcript`` on a terminal.

On when stdout is a terminal (or a pager on one: ``EARSHOT_COLOR=always``,
set by ``earshot.cli.pager``), off with ``NO_COLOR`` (https://no-color.org),
``EARSHOT_COLOR=never`` or ``TERM=dumb``. The text is coloured line by line
after it is rendered, so what is shown is the same words with or without it.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable
from typing import Any

import click

from . import render


def wanted() -> bool:
    if os.environ.get("NO_COLOR"):
        return False
    forced = os.environ.get("EARSHOT_COLOR", "auto")
    if forced in ("always", "never"):
        return forced == "always"
    return sys.stdout.isatty() and os.environ.get("TERM") != "dumb"


def emit(doc: dict[str, Any], text: str, as_json: bool, painter: Callable[[str], str]) -> None:
    """``render.emit``, with the text coloured by ``painter`` when colour is wanted."""
    if text and not as_json and wanted():
        # click.echo drops colour codes on a pipe unless told: a pager's pipe.
        click.echo("\n".join(painter(line) for line in text.split("\n")), color=True)
        return
    render.emit(doc, text, as_json)


#: A path line of ``diff`` (``+ a.txt``) or a unified diff's line.
_DIFF_STYLES = (
    (re.compile(r"^(---|\+\+\+) "), {"bold": True}),
    (re.compile(r"^@@ "), {"fg": "cyan"}),
    (re.compile(r"^\+"), {"fg": "green"}),
    (re.compile(r"^-"), {"fg": "red"}),
    (re.compile(r"^[~mt] "), {"fg": "yellow"}),
)


def diff_line(line: str) -> str:
    for pattern, style in _DIFF_STYLES:
        if pattern.match(line):
            return click.style(line, **style)
    return line


#: A numbered line of ``log`` or ``tree``: number (or oN), then the time.
_NUMBERED = re.compile(r"^(\s*o?\d+)(\s+)(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)(.*)$")
_COUNTS = re.compile(r"(\+\d+) (~\d+) (-\d+)")
_FLAGS = re.compile(r"(\s+\[.*\])$")


def numbered_line(line: str) -> str:
    """A line of ``log`` or ``tree``: number in yellow, time dimmed, counts and flags coloured."""
    if line.startswith("session "):
        return click.style(line, bold=True)
    found = _NUMBERED.match(line)
    if found is None:
        return line
    number, gap, time, rest = found.groups()
    flags = _FLAGS.search(rest)
    tail = ""
    if flags is not None:
        rest, tail = rest[: flags.start()], click.style(flags.group(1), fg="cyan")
    rest = _COUNTS.sub(
        lambda m: " ".join(
            click.style(part, fg=colour)
            for part, colour in zip(m.groups(), ("green", "yellow", "red"), strict=True)
        ),
        rest,
    )
    return f"{click.style(number, fg='yellow')}{gap}{click.style(time, dim=True)}{rest}{tail}"
