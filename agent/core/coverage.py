"""What undo cannot take back: a batch's changes to paths whose content is not held.

An agent may delete or change a path earshot kept only as existence (an
ignored file over the limits, a cache, what ``.earshotignore`` excludes, a
file over the size limit). Nothing is lost without a word: the command's
stderr, the hook's message in the agent's own view, the chat and ``earshot
log`` all say it, from the batch's ledger. A path moved away and back to a
new name with the same identity is covered: undo renames it back.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from earshot.agent.core.batch import Change, State
from earshot.cas.tree import Ident, Kind

#: Each reason (``State.reason``) in a few words, for one line.
SHORT_REASONS = {
    "too_large": "over the size limit",
    "unreadable": "unreadable",
    "special": "a special file",
    "too_deep": "too deep",
    "ignored": "ignored",
    "cache": "a regenerable cache",
    "excluded": "excluded by .earshotignore",
    "build": "a build output",
}
#: Reasons whose paths tools make again: a change to one is not worth a word.
REGENERABLE = frozenset({"cache", "build"})
#: Lines shown before "and N more" where people read them.
SHOWN = 10


@dataclass(frozen=True, slots=True)
class Uncovered:
    """A path a batch deleted or changed whose content earshot did not hold."""

    path: str
    #: Why its content is not held, in a few words (``SHORT_REASONS``).
    reason: str
    #: ``deleted``, ``changed`` or ``written`` (content that is now not held).
    change: str
    is_dir: bool = False

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "reason": self.reason, "change": self.change}


def _short(state: State) -> str:
    return SHORT_REASONS.get(state.reason or "", state.reason or "not recorded")


def _unheld(state: State | None) -> bool:
    """An unrecorded state of the path itself (not one inside an unrecorded directory)."""
    return state is not None and not state.recorded and state.under is None


def uncovered(ledger: Sequence[Change]) -> list[Uncovered]:
    """The lines of a ledger that undo cannot take back, in path order."""
    appeared: set[tuple[Ident, int]] = {
        (c.after.ident, c.after.size)
        for c in ledger
        if c.before is None and c.after is not None and c.after.ident is not None
    }
    out: list[Uncovered] = []
    for line in ledger:
        before, after = line.before, line.after
        if _unheld(before):
            assert before is not None
            if after is None:
                if line.moved is not None or (
                    before.ident is not None and (before.ident, before.size) in appeared
                ):
                    continue  # moved: undo renames it back
                out.append(Uncovered(line.path, _short(before), "deleted", before.is_dir))
            elif _unheld(after):
                # A regenerable cache changes as its tools run: only its loss is said.
                if before.reason not in REGENERABLE:
                    out.append(Uncovered(line.path, _short(before), "changed", before.is_dir))
            elif after.kind is not Kind.DIR and after.size != before.size and not before.is_dir:
                # Held now, not before, and not the same size: written over what
                # was not held (a rule that only shows a file keeps its size).
                out.append(Uncovered(line.path, _short(before), "changed"))
        elif before is not None and before.kind is not Kind.DIR and _unheld(after):
            assert after is not None
            # Held before, not now (grown over the limit): undo will not
            # overwrite what it does not hold.
            out.append(Uncovered(line.path, _short(after), "written", after.is_dir))
    return out


_CONTROL = re.compile(r"[\x00-\x1f\x7f\\\"]")


def quote(path: str) -> str:
    """A path for one line of text: in quotes with escapes when it needs them."""
    if _CONTROL.search(path) is None:
        return path
    return '"' + _CONTROL.sub(lambda m: f"\\x{ord(m[0]):02x}", path) + '"'


def lines(
    items: Sequence[Uncovered], quote: Callable[[str], str] = quote, shown: int = SHOWN
) -> list[str]:
    """One line per path (``not covered by undo: .env (ignored, deleted)``), at most ``shown``."""
    out = [
        f"not covered by undo: {quote(u.path + ('/' if u.is_dir else ''))} ({u.reason}, {u.change})"
        for u in items[:shown]
    ]
    if len(items) > shown:
        more = len(items) - shown
        out.append(f"not covered by undo: {more} more paths ('earshot log --json' lists them)")
    return out
