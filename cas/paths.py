"""Where earshot keeps its data, and the stable key of a root.

``$EARSHOT_HOME``, else ``$XDG_DATA_HOME/earshot``, else
``~/.local/share/earshot``. Under it, per root: ``checkpoints/<root-key>/``
(the LMDB store) and ``sessions/<root-key>/`` (the conversation logs).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import blake3


def data_home() -> Path:
    """The data directory, from the environment; not created here."""
    explicit = os.environ.get("EARSHOT_HOME")
    if explicit:
        return Path(explicit).expanduser().absolute()
    xdg = os.environ.get("XDG_DATA_HOME")
    if xdg:
        return Path(xdg).expanduser().absolute() / "earshot"
    return Path.home() / ".local" / "share" / "earshot"


def real_root(root: str | os.PathLike[str]) -> Path:
    """The real path of a root: symlinks resolved, so one tree has one key."""
    return Path(os.path.realpath(root))


_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def root_key(root: str | os.PathLike[str]) -> str:
    """A directory name stable for the root's real path: ``<name>-<16 hex>``.

    The readable part helps a person find the project on disk; the digest of
    the full real path makes the key unique.
    """
    real = real_root(root)
    digest = blake3.blake3(os.fsencode(real)).hexdigest()[:16]
    name = _UNSAFE.sub("_", real.name)[:40] or "root"
    return f"{name}-{digest}"


def checkpoints_dir(root: str | os.PathLike[str], home: Path | None = None) -> Path:
    """The store directory of a root's project."""
    return (home or data_home()) / "checkpoints" / root_key(root)


def sessions_dir(root: str | os.PathLike[str], home: Path | None = None) -> Path:
    """The directory of a root's session logs."""
    return (home or data_home()) / "sessions" / root_key(root)
