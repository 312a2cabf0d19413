"""Asking before the model changes files: once, for the session, or not at all.

Before the first ``bash``, ``write_file`` or ``edit`` the person is asked
(the face asks; with no one to ask, as in print mode, the answer is no).
``--allow bash,write_file,edit`` grants ahead. Every grant is a
``permission`` entry of the log, a record only: a resumed session asks
again, deliberately (a grant was given to what the person saw then).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable

from earshot.agent.loop.tools import MUTATING
from earshot.cas.errors import EarshotError


class Answer(enum.Enum):
    ONCE = "once"
    SESSION = "session"
    DENY = "deny"


class UnknownTool(EarshotError):
    exit_code = 2

    def __init__(self, names: Iterable[str]) -> None:
        super().__init__(
            f"--allow takes {', '.join(MUTATING)} (comma-separated), not {', '.join(names)}"
        )


def parse_allow(text: str | None) -> frozenset[str]:
    """The tools ``--allow`` names; ``UnknownTool`` for any other name."""
    if not text:
        return frozenset()
    names = {n.strip() for n in text.split(",") if n.strip()}
    unknown = sorted(names - set(MUTATING))
    if unknown:
        raise UnknownTool(unknown)
    return frozenset(names)


class Grants:
    """What the person allowed in this process: per tool, for the session."""

    def __init__(self, allowed: Iterable[str] = ()) -> None:
        self.session: set[str] = set(allowed)
        #: Granted by --allow, not yet written to the log (on first use).
        self.unrecorded: set[str] = set(self.session)

    def needs_asking(self, tool: str) -> bool:
        return tool in MUTATING and tool not in self.session

    def take(self, tool: str, answer: Answer) -> None:
        if answer is Answer.SESSION:
            self.session.add(tool)
