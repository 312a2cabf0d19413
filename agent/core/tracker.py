"""Change trackers: who can tell the engine which paths changed, and since when.

The engine asks two questions: "give me a token for now" before a call, and
"which paths changed since that token?" after it. ``None`` means "don't know"
(no watcher, or a gap: overflow, error, restart), and the snapshot policy
falls back to a full restage. This module ships the tracker that knows
nothing; the watcher is a second implementation of the same two methods.
"""

from __future__ import annotations

from typing import Protocol


class ChangeTracker(Protocol):
    """Answers "what changed since T?", or "don't know"."""

    def token(self) -> object:
        """A mark for "now"; every change after it will be reported against it."""
        ...

    def changed_since(self, token: object) -> set[str] | None:
        """Root-relative paths changed since ``token``; None when there was a gap.

        Waits until events caused before the call have arrived (a sync point),
        so a command that has exited has all its changes reported.
        """
        ...

    def advance(self, token: object) -> tuple[set[str] | None, object]:
        """``changed_since(token)`` and the token of that same sync point.

        Taking the next token at the same instant leaves no window in which a
        change would belong to neither answer.
        """
        ...


class NullTracker:
    """The tracker that knows nothing: every answer is "don't know"."""

    def token(self) -> object:
        return None

    def changed_since(self, token: object) -> set[str] | None:
        return None

    def advance(self, token: object) -> tuple[set[str] | None, object]:
        return None, None
