"""The soak's end: the daemon's memory judged, and what must not be left behind.

Each returns what it found and the problems (each a violation of the soak);
the waits are on events (a process's exit on its pidfd, a lock let go), with
a generous deadline only as a guard against a hang.
"""

from __future__ import annotations

import fcntl
import json
import os
import select
import subprocess
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

#: How much a daemon's RSS may grow from the end of its warm-up to its last
#: sample. The full run (4 x 100 batches) starts about 1,600 earshot
#: processes, each asking the daemon at least once (about 800 run in its
#: workers), some 1,200 of them after warm-up: a leak of 7 KiB a process
#: would pass the bound. The growth measured there is 0.26 MiB, from 35.4 MiB.
RSS_BOUND_MIB = 8.0
#: A daemon's warm-up: this share of the run's batches after its first sample.
WARM_UP = 0.1
#: A failure guard, never a pass condition: how long a process may take to go.
GONE_WITHIN_S = 120.0

#: Runs ``earshot ARGS`` in the root with the soak's environment.
Earshot = Callable[..., subprocess.CompletedProcess[str]]


def judge_memory(
    samples: Sequence[tuple[int, int, int]], total: int
) -> tuple[dict[str, Any], list[str]]:
    """Per daemon (``samples``: batches done, pid, VmRSS KiB, one per batch): its
    first sample, the one after warm-up, its last, and the growth between the two."""
    out: dict[str, Any] = {"bound_mib": RSS_BOUND_MIB, "daemons": []}
    problems = []
    for pid in dict.fromkeys(p for _, p, _ in samples):
        mine = [(done, kib) for done, p, kib in samples if p == pid]
        first, last = mine[0], mine[-1]
        warm = next((x for x in mine if x[0] >= first[0] + WARM_UP * total), None)
        entry: dict[str, Any] = {
            "pid": pid,
            "first": {"batch": first[0], "mib": round(first[1] / 1024, 1)},
            "last": {"batch": last[0], "mib": round(last[1] / 1024, 1)},
            "peak_mib": round(max(k for _, k in mine) / 1024, 1),
            "samples": len(mine),
        }
        if warm is not None:
            growth = (last[1] - warm[1]) / 1024
            entry["warm"] = {"batch": warm[0], "mib": round(warm[1] / 1024, 1)}
            entry["growth_mib"] = round(growth, 2)
            if growth > RSS_BOUND_MIB:
                problems.append(
                    f"daemon {pid} grew {growth:.1f} MiB from batch {warm[0]} to {last[0]} "
                    f"(bound {RSS_BOUND_MIB:g} MiB)"
                )
        out["daemons"].append(entry)
    if not any("warm" in d for d in out["daemons"]):
        problems.append("no daemon served long enough to judge its memory")
    return out, problems


def leftovers(
    earshot: Earshot, root: Path, home: Path, sessions: Sequence[str], daemon: int | None
) -> tuple[dict[str, Any], list[str]]:
    """Stop the daemon; then nothing of earshot's may be left: a process, a temp
    file, a socket, a held lock, a pending intent, a problem fsck or the session
    check finds, a change recorded outside any call (every change was a call's)."""
    found: dict[str, Any] = {}
    problems = []
    stop = earshot("watch", "--stop")
    if stop.returncode != 0:
        problems.append(f"watch --stop -> {stop.returncode}: {stop.stderr}")
    if daemon is not None and not wait_gone(daemon):
        problems.append(f"the daemon {daemon} outlived 'earshot watch --stop'")
    left = [p for p in our_processes(root, home) if not wait_gone(p)]
    found["processes"] = [describe(p) for p in left]
    if left:
        problems.append(f"processes left after the daemon stopped: {found['processes']}")
    temps = [*root.rglob(".earshot-tmp-*"), *home.rglob(".earshot-tmp-*"), *home.rglob("*.tmp")]
    found["temp_files"] = [str(p) for p in temps]
    if temps:
        problems.append(f"temp files left: {found['temp_files'][:5]}")
    for sock in [*home.glob("checkpoints/*/watch.sock"), *home.glob("run/*")]:
        problems.append(f"the daemon's socket is left: {sock}")
    locks = list(home.rglob("*.lock"))
    found["lock_files"] = len(locks)
    found["locks_held"] = [str(p) for p in locks if not lock_free(p)]
    if found["locks_held"]:
        problems.append(f"lock files still held: {found['locks_held']}")
    outside: list[Any] = []
    for session in sessions:
        done = earshot("log", "--session", session, "--json")
        doc = json.loads(done.stdout) if done.returncode == 0 else {}
        if done.returncode != 0 or doc.get("pending"):
            problems.append(f"log of session {session} -> {done.returncode}: {done.stdout[-400:]}")
        outside = doc.get("outside") or outside
    if outside:
        seqs = [b["seq"] for b in outside]
        problems.append(f"changes recorded as made outside any call: batches {seqs}")
    found["intents"] = pending_intents(root, home)
    if found["intents"]:
        problems.append(f"intents left: {found['intents']}")
    fsck = earshot("fsck", "--json")
    found["fsck"] = "clean" if fsck.returncode == 0 else fsck.stdout[-800:]
    if fsck.returncode != 0:
        problems.append(f"fsck -> {fsck.returncode}: {fsck.stdout[-800:]}")
    check = earshot("sessions", "check", "--json")
    if check.returncode != 0:
        problems.append(f"sessions check -> {check.returncode}: {check.stdout[-800:]}")
    if daemon_pid(home) is not None:  # none of these records: none starts it again
        problems.append("a command that only reads started the daemon again")
    return found, problems


def pending_intents(root: Path, home: Path) -> list[dict[str, Any]]:
    """Every intent the store holds (an operation begun and not ended)."""
    from earshot.agent.core.records import TABLES
    from earshot.cas.project import Project

    with Project(root, home=home, extra_tables=TABLES) as project:
        return [i.to_json() for i in project.intents.pending()]


def daemon_pid(home: Path) -> int | None:
    """The root's daemon, from the pid its lock file holds (checked to be this home's)."""
    for lock in home.glob("checkpoints/*/watch.lock"):
        try:
            pid = int(lock.read_text().split()[0])
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except (OSError, ValueError, IndexError):
            continue
        if str(home).encode() in cmdline and b"--root" in cmdline:
            return pid
    return None


def our_processes(root: Path, home: Path) -> list[int]:
    """The daemon and its workers (their command line names ``home``), and anything
    working in ``root``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
            cwd = os.readlink(entry / "cwd")
        except OSError:
            continue
        if str(home).encode() in cmdline or cwd == str(root) or cwd.startswith(f"{root}/"):
            found.append(int(entry.name))
    return found


def describe(pid: int) -> str:
    try:
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        cmd = "?"
    return f"{pid}: {cmd[:160]}"


def rss_kib(pid: int) -> int | None:
    """A process's resident set (VmRSS), in KiB; None once it is gone."""
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def wait_gone(pid: int, timeout: float = GONE_WITHIN_S) -> bool:
    """Wait for a process (not necessarily a child) to exit, on its pidfd."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    try:
        ready, _, _ = select.select([fd], [], [], timeout)
        return bool(ready) or _zombie(pid)
    finally:
        os.close(fd)


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def lock_free(path: Path) -> bool:
    """Whether no process holds a flock on ``path``."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return True
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False
    finally:
        os.close(fd)


def wait_lock_free(path: Path, timeout: float = GONE_WITHIN_S) -> None:
    """Block until the flock on ``path`` can be taken (then let it go at once)."""
    done = threading.Event()

    def take() -> None:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
        finally:
            os.close(fd)
            done.set()

    threading.Thread(target=take, daemon=True).start()
    done.wait(timeout)
