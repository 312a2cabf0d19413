"""Whether the thin client may trust the daemon it found: one user, one daemon.

A hosted call hands the daemon's worker the caller's whole environment (API
keys among it) and its stdin, stdout and stderr, and runs whatever command
the worker names. So before sending anything the client checks:

- the directories on the way to the socket (the alias's directory and the
  socket's own) belong to this user or to root, and no other user can
  write in them: not world-writable, and group-writable only by the user's
  own primary group (a umask of 002 with a group of one's own is common);
  a data home another user owns (``sudo -E earshot`` with the invoking
  user's HOME) is refused here;
- the process serving the socket runs as this user (``SO_PEERCRED``), which
  holds even if a directory check passed by a race.

Each check answers why it refuses, in words for a one-line notice; the call
then runs in-process, as with no daemon. Standard library only, and only
its C halves (``earshot.cli.lean``): the client runs on every hook event.
"""

from __future__ import annotations

import os

from earshot.agent.watch import protocol

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


def path_refusal(alias: str) -> str | None:
    """Why the socket behind ``alias`` (a symlink to it) must not be used; None: it may."""
    try:
        target = os.readlink(alias)
    except FileNotFoundError:
        return None  # no daemon: nothing to trust or refuse
    except OSError as exc:
        return f"{alias}: {exc.strerror}"
    if not os.path.isabs(target):
        target = os.path.join(os.path.dirname(alias), target)
    for directory in (os.path.dirname(alias), os.path.dirname(target)):
        why = _directory_refusal(directory)
        if why is not None:
            return why
    return None


def _directory_refusal(directory: str) -> str | None:
    try:
        st = os.lstat(directory)
    except OSError as exc:
        return f"{directory}: {exc.strerror}"
    uid = os.geteuid()
    if st.st_uid not in (uid, 0):
        return f"{directory} belongs to uid {st.st_uid}, not to you (uid {uid})"
    if st.st_mode & 0o002 or (st.st_mode & 0o020 and st.st_gid != os.getegid()):
        return f"{directory} is writable by other users (mode {st.st_mode & 0o7777:o})"
    if (st.st_mode & 0o170000) != 0o040000:
        return f"{directory} is not a directory"
    return None


def peer_refusal(sock: Any) -> str | None:
    """Why the process at the other end of ``sock`` must not be trusted; None: it is this user."""
    try:
        uid = protocol.peer_uid(sock)
    except OSError as exc:
        return f"cannot tell who serves the socket ({exc.strerror})"
    if uid != os.geteuid():
        return f"the process serving it runs as uid {uid}, not as you (uid {os.geteuid()})"
    return None
