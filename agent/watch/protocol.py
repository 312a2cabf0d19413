"""What a client and the watch daemon agree on, in the standard library alone.

The thin client (``earshot.cli.entry``) imports this before it knows whether
a daemon answers, so it imports nothing but the standard library.

- ``PROTOCOL``: the request format. Every reply carries it as ``"v"``; a
  client that gets another (or none: a daemon older than this field) stops
  that daemon and works in-process, and the next command starts a new one.
- ``build_id()``: names the code a process runs (the protocol, and the
  modification time and size of every module). A daemon started before an
  upgrade, or before any module was edited, answers with another build and
  is replaced.
- ``alias_path(home, root)``: where the daemon of a root puts a symlink to
  its socket, named by a SHA-256 of the root's real path, so the client can
  find it without the store's BLAKE3 root key.
"""

from __future__ import annotations

import os
import sys

# typing costs the thin client a few ms; annotations are not evaluated here.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

# The builtin module: hashlib loads OpenSSL first, a few ms of every call.
if sys.version_info >= (3, 12):
    from _sha2 import sha256
else:
    from _sha256 import sha256  # type: ignore[import-not-found,unused-ignore]

PROTOCOL = 2

#: The packages whose code a hosted call runs, relative to the package root
#: (``earshot/``): every module in them is part of the build.
_BUILD_PACKAGES = ("cas", "agent", "cli")


def build_id() -> str:
    """The protocol and every module's modification time and size, as one string.

    A change to any module (an upgrade, an edit) names another build: a
    daemon of the old one is replaced, never asked to run new callers'
    calls with old code. About 130 stats, 0.6 ms here: every hook event
    pays it, so a plain scandir, no os.walk.
    """
    top = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    stamps: list[str] = []
    stack = [os.path.join(top, package) for package in _BUILD_PACKAGES]
    while stack:
        with os.scandir(stack.pop()) as entries:
            for entry in entries:
                if entry.name.endswith(".py"):
                    try:
                        st = entry.stat()
                    except OSError:
                        continue
                    stamps.append(f"{entry.path[len(top) :]}:{st.st_mtime_ns}:{st.st_size}")
                elif entry.name != "__pycache__" and entry.is_dir(follow_symlinks=False):
                    stack.append(entry.path)
    stamps.sort()
    digest: str = sha256("\n".join(stamps).encode()).hexdigest()
    return f"{PROTOCOL}:{digest[:32]}"


def data_home(environ: os._Environ[str] | dict[str, str] | None = None) -> str:
    """$EARSHOT_HOME, else $XDG_DATA_HOME/earshot, else ~/.local/share/earshot."""
    env = os.environ if environ is None else environ
    explicit = env.get("EARSHOT_HOME")
    if explicit:
        return os.path.abspath(os.path.expanduser(explicit))
    xdg = env.get("XDG_DATA_HOME")
    if xdg:
        return os.path.join(os.path.abspath(os.path.expanduser(xdg)), "earshot")
    return os.path.join(os.path.expanduser("~"), ".local", "share", "earshot")


def alias_path(home: str, real_root: str) -> str:
    """The symlink to the socket of ``real_root``'s daemon (it may not exist)."""
    key = sha256(os.fsencode(real_root)).hexdigest()[:32]
    return os.path.join(home, "run", key)


#: ``SOL_SOCKET`` and ``SO_PEERCRED`` on Linux (``socket`` costs the thin client an import).
_SOL_SOCKET = 1
_SO_PEERCRED = 17


def peer_uid(sock: Any) -> int:
    """The uid of the process at the other end of a unix socket (``SO_PEERCRED``:
    struct ucred {pid, uid, gid}); ``OSError`` if it cannot be told."""
    creds = sock.getsockopt(_SOL_SOCKET, _SO_PEERCRED, 12)
    return int.from_bytes(creds[4:8], sys.byteorder)
