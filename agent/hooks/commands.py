"""earshot's own commands typed as a prompt inside an agent: ``earshot undo``.

A prompt that is exactly ``earshot COMMAND [ARGS]`` (or ``/earshot ...``, as
the agents' custom commands installed by ``earshot install`` expand) is
run by the hook for the agent's session and never reaches the model: the
prompt hook blocks it and shows what the command printed. Only commands
about the session's checkpoints and conversation are taken; anything else,
or text that does not parse as a command line, is an ordinary prompt.
"""

from __future__ import annotations

import shlex

#: The commands a prompt may run: the session's history, undo and rewind.
ALLOWED = frozenset({"undo", "redo", "log", "tree", "diff", "rewind", "sessions"})


def prompt_command(text: str) -> tuple[str, ...] | None:
    """The earshot command line a prompt asks for (without ``earshot``), or None."""
    stripped = text.strip()
    head, _, rest = stripped.partition(" ")
    if head not in ("earshot", "/earshot") or "\n" in stripped:
        return None
    try:
        words = tuple(shlex.split(rest))
    except ValueError:
        return None
    if not words or words[0] not in ALLOWED:
        return None
    return words
