"""The files a Codex ``apply_patch`` names, read from the patch text.

The patch format is line based::

    *** Begin Patch
    *** Add File: path        (then + lines)
    *** Update File: path     (then @@ hunks, optionally *** Move to: new path)
    *** Delete File: path
    *** End Patch

A patch writes only the files it names, so those are what earshot records
before and after it. Paths are relative to the agent's working directory
(or absolute).
"""

from __future__ import annotations

_HEADERS = ("*** Add File: ", "*** Update File: ", "*** Delete File: ", "*** Move to: ")


def patch_paths(text: str) -> tuple[str, ...]:
    """Every path the patch adds, updates, deletes or moves to, in order, once each."""
    seen: dict[str, None] = {}
    for line in text.splitlines():
        for header in _HEADERS:
            if line.startswith(header):
                path = line[len(header) :].strip()
                if path:
                    seen[path] = None
                break
    return tuple(seen)
