"""Advice as the chat gives it: the chat's slash commands, not the CLI's.

The core's errors and the CLI's renderings advise shell commands
(``'earshot redo' to go back``); inside ``earshot chat`` the same advice
names what the chat takes (``/redo to go back``). Advice the chat has no
command for (``'earshot undo --force'``, ``'earshot fsck'``) is left as
it is: a shell runs it.
"""

from __future__ import annotations

import re

#: The CLI commands the chat has as slash commands, with the same arguments.
SLASHED = ("undo", "redo", "log", "diff", "sessions", "tree", "rewind", "fork", "resume")
_COMMAND = re.compile(r"'earshot (" + "|".join(SLASHED) + r")((?: \d+)?)'")
#: Advice with no command to name in the chat: what to do there instead.
_REPHRASED = {
    "('earshot prompt TEXT' adds one)": (
        "(a prompt typed here adds one; /undo N takes batches back)"
    ),
}


def in_chat(text: str) -> str:
    """``text`` with its CLI advice turned into the chat's."""
    for cli, chat in _REPHRASED.items():
        text = text.replace(cli, chat)
    return _COMMAND.sub(r"/\1\2", text)
