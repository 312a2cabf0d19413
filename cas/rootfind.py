"""Which root a command run in a directory means, found as git finds its work tree.

From the directory up, the nearest one that is a git work tree's top (it
holds ``.git``, a directory or a file), holds ``.earshotignore`` or
``.earshot.toml`` (earshot's settings for the project), or holds an
earshot store (earshot recorded it before) is the root. With none of them,
the directory itself.

``/``, the home directory and the top of a file system are never taken
unless ``--root`` names them: recording one walks every file below it (a
whole disk), and a daemon for it watches them all. A home directory that
is a git work tree (dotfiles) is passed over on the way up for the same
reason. The top of a file system that is a git work tree's top, or holds
one of the other marks, is a project (a container's mounted checkout) and
is taken.

Standard library only until a store must be looked for: the thin client
(``cli/entry.py``) finds the root before it asks the root's daemon, and
BLAKE3 (the store's key) is imported only when the walk needs it.
"""

from __future__ import annotations

import os

from earshot.cas.errors import EarshotError

# typing and collections.abc cost the thin client milliseconds to import;
# annotations are not evaluated here, so type checkers alone need them.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

#: Names that make a directory a root.
GIT = ".git"
EARSHOTIGNORE = ".earshotignore"
SETTINGS = ".earshot.toml"


class Found:
    """The root a directory means, and why (for ``--json`` and messages).

    A plain class: ``dataclasses`` costs the thin client 12 ms to import.
    """

    __slots__ = ("root", "why")

    def __init__(self, root: str, why: str) -> None:
        self.root = root
        #: "git", "earshotignore", "settings", "store", or "here" (no mark up to the top).
        self.why = why

    def __repr__(self) -> str:
        return f"Found({self.root!r}, {self.why!r})"


class RootTooWide(EarshotError):
    """The directory is ``/``, the home directory or a file system's top."""

    def __init__(self, path: str, what: str) -> None:
        super().__init__(
            f"{path} is {what}: recording it would walk every file below it; "
            f"run earshot in a project, or give --root {path} if you mean it"
        )
        self.path = path


def _home() -> str:
    return os.path.realpath(os.path.expanduser("~"))


def too_wide(path: str) -> str | None:
    """What makes ``path`` (real, absolute) too wide to take unasked, or None."""
    if path == "/":
        return "the file system's root"
    if path == _home():
        return "your home directory"
    try:
        here, parent = os.stat(path), os.stat(os.path.dirname(path))
    except OSError:
        return None
    if here.st_dev != parent.st_dev:
        return "the top of a file system"
    return None


def _has_store(path: str, home: str | os.PathLike[str] | None) -> bool:
    from pathlib import Path

    from earshot.cas.paths import checkpoints_dir  # BLAKE3: only when needed

    where = Path(home) if home is not None else None
    return (checkpoints_dir(path, where) / "data.mdb").exists()


def _mark(
    path: str, home: str | os.PathLike[str] | None, served: Callable[[str], bool] | None
) -> str | None:
    if os.path.lexists(os.path.join(path, GIT)):
        return "git"
    if os.path.isfile(os.path.join(path, EARSHOTIGNORE)):
        return "earshotignore"
    if os.path.isfile(os.path.join(path, SETTINGS)):
        return "settings"
    if (served is not None and served(path)) or _has_store(path, home):
        return "store"
    return None


def find_root(
    start: str,
    home: str | os.PathLike[str] | None = None,
    served: Callable[[str], bool] | None = None,
) -> Found:
    """The root ``start`` (a directory) means. RootTooWide when that would be
    ``/``, the home directory, or a file system's top with no mark.

    ``served``: a cheaper sign that a directory has a store, asked first (the
    thin client's: a daemon serves it), so a call from a served root never
    imports BLAKE3.
    """
    here = os.path.realpath(start)
    never = {"/", _home()}
    path = here
    while True:
        if path not in never:
            why = _mark(path, home, served)
            if why is not None:
                return Found(path, why)
        parent = os.path.dirname(path)
        if parent == path:
            break
        path = parent
    what = too_wide(here)
    if what is not None:
        raise RootTooWide(here, what)
    return Found(here, "here")
