"""Locks on a remote: only pruning needs one alone, as in restic.

A push holds a *shared* lock while it sends (``locks/<id>``, sealed: who,
when); ``gc --remote`` takes an *exclusive* one. Each writes its lock first,
then lists the others: a push that finds an exclusive lock, or a gc that
finds any other lock, takes its own away again and waits (a push, up to
``WAIT_S``) or refuses (a gc). Two that start at once both see each other
and both back off; neither goes on while the other may.

A lock is live for ``LEASE_S`` after its last refresh; a push refreshes
its lock after each pack once a third of the lease has passed. A lock older
than the lease belongs to a process that died: it is ignored and a gc takes
it away. A lock of this machine whose process is gone (pid no longer
running, in this boot and pid namespace) is taken away at once. gc also never deletes a
pack younger than its grace period (``prune``), so even a push whose lock
lapsed (a laptop asleep mid-push) keeps what it sent.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from earshot.cas.errors import EarshotError

from .crypto import Tampered
from .repository import Repository

LEASE_S = 30 * 60
#: How long a push waits for a gc to finish before it gives up.
WAIT_S = 120.0
_AAD = b"earshot lock"


class RemoteBusy(EarshotError):
    exit_code = 75  # EX_TEMPFAIL: try again later

    def __init__(self, url: str, holder: dict[str, Any]) -> None:
        kind = "a gc" if holder.get("kind") == "exclusive" else "a push"
        super().__init__(
            f"{url}: {kind} from {holder.get('host', '?')} (pid {holder.get('pid', '?')}) "
            "holds the remote; nothing was changed. Try again when it is done (a lock of "
            f"a process that died elsewhere lapses {LEASE_S // 60} minutes after it was taken)"
        )


class Lock:
    """One lock file of ours; ``refresh`` keeps it live."""

    def __init__(self, repo: Repository, kind: str) -> None:
        self.repo = repo
        self.kind = kind
        self.path = f"locks/{secrets.token_hex(16)}"
        self.written = 0.0
        #: It went unrefreshed past its lease once (a machine asleep mid-push):
        #: a gc may have run meanwhile.
        self.lapsed = False

    def write(self) -> None:
        doc = {"kind": self.kind, "host": socket.gethostname(), "pid": os.getpid()}
        doc["space"] = _pid_space()
        doc["time"] = time.time()
        sealed = self.repo.key.seal(json.dumps(doc).encode(), _AAD)
        self.repo.storage.put(self.path, sealed)
        self.written = _clock()

    def refresh(self) -> None:
        since = _clock() - self.written
        self.lapsed = self.lapsed or since > LEASE_S
        if since > LEASE_S / 3:
            self.write()

    def remove(self) -> None:
        self.repo.storage.delete([self.path])


def _pid_space() -> str | None:
    """Where a pid names a process: this boot and this pid namespace (two
    containers may share a host name, never both of these)."""
    try:
        with open("/proc/sys/kernel/random/boot_id") as boot:
            return f"{boot.read().strip()}/{os.stat('/proc/self/ns/pid').st_ino}"
    except OSError:
        return None


def _clock() -> float:
    """Seconds that count a machine's sleep too (CLOCK_BOOTTIME): a push asleep
    past its lease must know it was."""
    return time.clock_gettime(time.CLOCK_BOOTTIME)


def others(repo: Repository, mine: str) -> list[tuple[str, dict[str, Any]]]:
    """The live locks on the remote but ``mine``; a stale or unreadable one is
    passed over (an unreadable one as an exclusive lock: safer)."""
    found = []
    now = time.time()
    for listed in repo.storage.listing("locks"):
        if listed.name == mine:
            continue
        data = repo.storage.get(listed.name)
        if data is None:
            continue  # taken away meanwhile
        try:
            doc = json.loads(repo.key.open(data, _AAD, listed.name))
            stale = now - float(doc["time"]) > LEASE_S
        except (Tampered, ValueError, KeyError, TypeError):
            doc, stale = {"kind": "exclusive", "host": "an unreadable lock"}, False
        if not stale and _died_here(doc):
            repo.storage.delete([listed.name])  # its process was killed: taken away
            continue
        if not stale:
            found.append((listed.name, doc))
    return found


def _died_here(doc: dict[str, Any]) -> bool:
    """A lock of a process of this machine that is gone (killed mid-push or
    mid-gc): no need to wait out its lease."""
    if doc.get("host") != socket.gethostname() or not isinstance(doc.get("pid"), int):
        return False
    if doc.get("space") != _pid_space() or _pid_space() is None:
        return False  # another boot, or another pid namespace: its pid means nothing here
    try:
        os.kill(doc["pid"], 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


def stale_locks(repo: Repository) -> list[str]:
    now = time.time()
    out = []
    for listed in repo.storage.listing("locks"):
        if now - listed.modified_s > LEASE_S:
            out.append(listed.name)
    return out


@contextmanager
def shared(repo: Repository, wait_s: float = WAIT_S) -> Iterator[Lock]:
    """A push's lock: waits while a gc holds the remote."""
    deadline = time.monotonic() + wait_s
    delay = 0.5
    while True:
        lock = Lock(repo, "shared")
        lock.write()
        blocking = [doc for _, doc in others(repo, lock.path) if doc.get("kind") != "shared"]
        if not blocking:
            break
        lock.remove()
        if time.monotonic() + delay > deadline:
            raise RemoteBusy(repo.storage.url, blocking[0])
        time.sleep(delay)
        delay = min(delay * 2, 10.0)
    try:
        yield lock
    except BaseException:
        with contextlib.suppress(EarshotError):  # the first error is the one to tell
            lock.remove()
        raise
    lock.remove()


@contextmanager
def exclusive(repo: Repository) -> Iterator[Lock]:
    """gc's lock: refused while anyone else holds one."""
    lock = Lock(repo, "exclusive")
    lock.write()
    found = others(repo, lock.path)
    if found:
        lock.remove()
        raise RemoteBusy(repo.storage.url, found[0][1])
    try:
        yield lock
    except BaseException:
        with contextlib.suppress(EarshotError):
            lock.remove()
        raise
    lock.remove()
