"""What ``earshot chat`` shows on a terminal: the model's markdown as it streams,
tool calls and their results in a line or two, batches, diffs.

The reply streams block by block: a paragraph, a list or a code fence is
rendered by rich once it is complete (a blank line, or the fence closed),
so text already printed is never redrawn, and the live input line below it
is left alone.
"""

from __future__ import annotations

from rich.console import Console
from rich.markdown import Markdown
from rich.syntax import Syntax
from rich.text import Text

from earshot.agent.core import coverage
from earshot.agent.core.batch import Batch
from earshot.agent.loop.history import Output, Use

from . import render_agent
from .render import one_line, quote_path

#: Lines of a tool's result shown under its call.
RESULT_LINES = 4


def _fence(line: str) -> bool:
    return line.lstrip().startswith(("```", "~~~"))


class MarkdownStream:
    """Feeds a streamed reply to ``console``, one complete markdown block at a time."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self._lines: list[str] = []
        self._partial = ""
        self._in_fence = False

    def feed(self, delta: str) -> None:
        text = self._partial + delta
        *complete, self._partial = text.split("\n")
        for line in complete:
            self._lines.append(line)
            if _fence(line):
                self._in_fence = not self._in_fence
                if not self._in_fence:
                    self._emit()  # a code block, closed
            elif not line.strip() and not self._in_fence:
                self._emit()

    def flush(self) -> None:
        if self._partial:
            self._lines.append(self._partial)
            self._partial = ""
        self._in_fence = False
        self._emit()

    def _emit(self) -> None:
        block = "\n".join(self._lines).strip("\n")
        self._lines = []
        if block.strip():
            self.console.print(Markdown(block))


def call_line(use: Use) -> Text:
    """``● bash  make test``: a tool call as the reply asked for it."""
    given = use.input if isinstance(use.input, dict) else {}
    detail = given.get("command") or given.get("path") or ""
    line = Text("● ", style="cyan")
    line.append(use.name, style="bold")
    if detail:
        line.append("  " + one_line(str(detail))[:200])
    return line


def result_lines(output: Output) -> Text:
    """The first lines of what a call returned, indented under it."""
    lines = output.text.splitlines() or [""]
    shown = lines[:RESULT_LINES]
    more = len(lines) - len(shown)
    out = Text()
    for number, line in enumerate(shown):
        out.append("  ⎿ " if number == 0 else "    ", style="dim")
        out.append(line[:200], style="red" if output.is_error else "dim")
        out.append("\n")
    if more:
        out.append(f"    … {more} more lines\n", style="dim")
    out.rstrip()
    return out


def batch_text(batch: Batch) -> Text:
    """``batch 3: +1 ~2 -0`` and what to do with it."""
    added, modified, deleted = render_agent.counts(batch)
    text = Text(f"  batch {batch.seq}: +{added} ~{modified} -{deleted}", style="green")
    if batch.folded:
        text.append("  (folded into the next snapshot)", style="yellow")
    text.append("   /undo takes it back", style="dim")
    for line in coverage.lines(coverage.uncovered(batch.ledger), quote=quote_path):
        text.append(f"\n  {line}", style="yellow")
    return text


def diff(console: Console, text: str) -> None:
    """A ``render.changes`` text: path lines plain, patches coloured."""
    console.print(Syntax(text, "diff", theme="ansi_dark", background_color="default"))
