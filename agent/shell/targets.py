"""Whether a command may name paths to delete, told from its text alone.

The full verdict (``destructive.classify``) parses the command with a shell
grammar, 30 ms to load; this asks first, with one regular expression,
whether the command holds a word that deletes what it names (``rm``,
``find -delete``, ``git clean``...). Only then are its targets worth the
parse: the paths whose content earshot records first, past its limits.
Over-matching costs a parse; a command it misses gets no such recording.
"""

from __future__ import annotations

import re

_DELETING_WORD = re.compile(
    r"(?<![\w.-])(?:rm|unlink|rmdir|shred|truncate|rimraf|trash|trash-put|srm)(?![\w.-])"
    r"|(?<![\w-])-delete(?![\w-])"
    r"|(?<![\w.-])git(?![\w.-])[^;&|]*(?<![\w.-])clean(?![\w.-])"
)


def may_name_targets(command: str) -> bool:
    """Whether ``command`` may delete paths it names (then classify it for its targets)."""
    return _DELETING_WORD.search(command) is not None
