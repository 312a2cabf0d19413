"""Soak: sessions side by side on one root, each a hundred batches, through the daemon.

Each session owns a directory of the root (``s0/``, ``s1/``, ...) and reads
a few shared files (``shared/``) that none writes. The sessions run at once,
each the way one kind of agent reaches earshot (tests/soak_agents.py):
Claude Code's, Gemini CLI's and Codex CLI's hook events, ``earshot bash``,
and ``earshot chat -p`` against a scripted model server. The watch daemon is
started by the first command that records, as ``EARSHOT_WATCH=auto`` does.
Along the way, while the sessions run: the daemon is stopped
(``earshot watch --stop``) and the next command starts it again; the
snapshot taken before the run is forgotten; ``gc`` is tried beside the
sessions, then run while they wait between two batches.

Checked:

1. Undo is exact. A session's batches come in windows of a few; after each,
   the session undoes the last few of them and its directory must be what
   it was before them. Two things differ by design (README, "Two sessions
   at once"), and each must be said: a creation a batch beside another
   session's made is *ambiguous* (kept, listed as such by the undo), and an
   undo of another session restores what its own batches' ledgers hold as
   ambiguous (another session's change among them) and lists it. Nothing
   else may differ; the shared files never change; an undo restores or
   deletes outside the session's directory only what its undone batches'
   ledgers hold as ambiguous.
2. The daemon's memory stays flat: its VmRSS is sampled after every batch;
   from the end of its warm-up (the first tenth of the run's batches it
   served) to its last sample it may grow by at most ``RSS_BOUND_MIB``.
3. Nothing is left behind: no earshot temp file in the tree or the store,
   no pending intent (``log --json`` and the store's intents), ``fsck`` and
   ``sessions check`` clean, no daemon, worker or command process once the
   daemon is stopped, no socket, and every lock file free.

    python tests/soak.py --sessions 4 --batches 100      # the full run

prints the counts, the daemon's memory and the violations (exit 1 if any);
``--json`` prints them as one document. The suite runs a short one
(tests/cli/test_soak.py).
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import random
import select
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from crash_harness import EARSHOT, Picture, picture
from soak_agents import ROLE_CLASSES, ROLES, SHARED, SHARED_TEXT, Op, Planner, Role, Tree

#: How much the daemon's RSS may grow from its warm-up to its last sample.
#: A leak of 8 KiB per hosted call would pass it over 4 x 100 batches (some
#: 2,000 calls and events); the noise measured is 1-2 MiB.
RSS_BOUND_MIB = 16.0
#: A daemon's warm-up: this share of the run's batches after it began serving.
WARM_UP = 0.1
#: When (shares of all the run's batches done) each thing happens along the way.
RESTART_AT, FORGET_AT, GC_AT = 0.15, 0.3, 0.45
#: A failure guard, never a pass condition: how long a process may take to go.
GONE_WITHIN_S = 120.0


@dataclass
class Report:
    sessions: int = 0
    roles: list[str] = field(default_factory=list)
    batches: int = 0
    calls: int = 0
    windows: int = 0
    undos: int = 0
    batches_undone: int = 0
    #: Paths an undo kept as ambiguous creations (said in its ``ambiguous``).
    kept_ambiguous: int = 0
    #: Paths of a session another session's undo restored (said in its impact).
    restored_by_others: int = 0
    gc: dict[str, Any] = field(default_factory=dict)
    forgotten: str = ""
    restart: dict[str, Any] = field(default_factory=dict)
    rss: dict[str, Any] = field(default_factory=dict)
    leftovers: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    seconds: float = 0.0
    violations: list[str] = field(default_factory=list)


@dataclass
class Touch:
    """What one undo restored or deleted, and when: another session's paths among
    them differ by design."""

    start: float
    end: float
    session: int
    paths: frozenset[str]


@dataclass
class SessionRun:
    index: int
    role: Role
    own: str
    planner: Planner
    rng: random.Random
    done: int = 0
    last_seq: int = 0


class Soak:
    """One root, one home, sessions at once; the checks as they go and at the end."""

    def __init__(
        self, work: Path, sessions: int, batches: int, seed: int, roles: tuple[str, ...]
    ) -> None:
        self.work = work
        self.root = work / "root"
        self.home = work / "home"
        self.batches = batches
        self.total = sessions * batches
        self.rng = random.Random(seed)
        self.report = Report(sessions=sessions, roles=list(roles))
        self.verbose = False
        self.lock = threading.Condition()
        self.touches: list[Touch] = []
        self.undo_lock = threading.Lock()
        self.done = 0
        self.paused = False
        self.parked = 0
        self.running = sessions
        #: (batches done, daemon pid, VmRSS KiB), one per batch.
        self.samples: list[tuple[int, int, int]] = []
        self.started = time.monotonic()
        #: The snapshot taken mid-run, which gc must keep.
        self.mid = ""
        (self.root / SHARED).mkdir(parents=True)
        for path, text in SHARED_TEXT.items():
            (self.root / path).write_text(text)
        self.shared = picture(self.root / SHARED)
        self.runs: list[SessionRun] = []
        for i in range(sessions):
            own = f"s{i}"
            for d in range(3):
                (self.root / own / f"d{d}").mkdir(parents=True)
                for f in range(4):
                    (self.root / own / f"d{d}" / f"seed{f}.txt").write_text(f"{own} seed {d} {f}\n")
            (self.root / own / "top.txt").write_text(f"{own} top\n")
            role = ROLE_CLASSES[roles[i % len(roles)]](self.root, self.env(), i, work)
            planner = Planner(own, sorted(SHARED_TEXT), seed * 1000 + i)
            self.runs.append(SessionRun(i, role, own, planner, random.Random(seed * 7 + i)))

    # -- running earshot --------------------------------------------------------

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        for name in ("XDG_DATA_HOME", "EARSHOT_SESSION", "EARSHOT_FAULTS"):
            env.pop(name, None)
        env.update(
            EARSHOT_HOME=str(self.home),
            XDG_CONFIG_HOME=str(self.home / "config"),
            EARSHOT_WATCH="auto",  # started by the first command that records, as by default
        )
        return env

    def earshot(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(EARSHOT), *args],
            cwd=self.root,
            env=self.env(),
            capture_output=True,
            text=True,
            check=False,
            timeout=600,
        )

    def json(self, *args: str) -> Any:
        done = self.earshot(*args, "--json")
        if done.returncode not in (0, 3):
            raise RuntimeError(f"earshot {' '.join(args)} -> {done.returncode}: {done.stderr}")
        return json.loads(done.stdout)

    def violation(self, what: str) -> None:
        with self.lock:
            self.report.violations.append(what)
        if self.verbose:
            print(f"VIOLATION {what}", file=sys.stderr, flush=True)

    # -- the daemon -------------------------------------------------------------

    def store(self) -> Path | None:
        found = sorted((self.home / "checkpoints").glob("*/"))
        return found[0] if found else None

    def daemon_pid(self) -> int | None:
        """The root's daemon, from the pid its lock file holds (checked to be ours)."""
        store = self.store()
        if store is None:
            return None
        try:
            pid = int((store / "watch.lock").read_text().split()[0])
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except (OSError, ValueError, IndexError):
            return None
        return pid if str(self.home).encode() in cmdline and b"--root" in cmdline else None

    def sample(self) -> None:
        pid = self.daemon_pid()
        if pid is None:
            return
        kib = rss_kib(pid)
        if kib is not None:
            self.samples.append((self.done, pid, kib))

    def ours(self) -> list[int]:
        """Processes of this soak's earshot: the daemon and its workers (their
        command line names this home), and anything working in the root."""
        root = str(self.root)
        found = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit() or int(entry.name) == os.getpid():
                continue
            try:
                cmdline = (entry / "cmdline").read_bytes()
                cwd = os.readlink(entry / "cwd")
            except OSError:
                continue
            if str(self.home).encode() in cmdline or cwd == root or cwd.startswith(f"{root}/"):
                found.append(int(entry.name))
        return found

    # -- progress, and what happens along the way -----------------------------------

    def batch_done(self, count: int) -> None:
        with self.lock:
            self.done += count
            self.sample()
            self.lock.notify_all()

    def park(self) -> None:
        """Between two batches: wait here while the run is paused (for gc)."""
        with self.lock:
            if not self.paused:
                return
            self.parked += 1
            self.lock.notify_all()
            while self.paused:
                self.lock.wait()
            self.parked -= 1

    def wait_for(self, share: float) -> bool:
        """Until ``share`` of all batches are done (False: the sessions ended first)."""
        with self.lock:
            while self.done < share * self.total and self.running:
                self.lock.wait()
            return self.done >= share * self.total

    def along_the_way(self) -> None:
        """The daemon restarted, a snapshot forgotten, gc: while the sessions run."""
        old = self.json("snapshot", "-m", "before the soak")["id"]
        for session in self.runs:
            threading.Thread(target=self.session_main, args=(session,), daemon=True).start()
        try:
            if self.wait_for(RESTART_AT):
                self.restart_daemon()
            if self.wait_for(FORGET_AT):
                self.report.forgotten = old
                self.json("forget", old)
                self.mid = self.json("snapshot", "-m", "in the soak")["id"]
            if self.wait_for(GC_AT):
                self.collect(old)
        except Exception as exc:  # said, and the sessions still run to their end
            self.violation(f"along the way: {type(exc).__name__}: {exc}")
        with self.lock:
            while self.running:
                self.lock.wait()

    def restart_daemon(self) -> None:
        pid = self.daemon_pid()
        if pid is None:
            self.violation("no daemon ran before the restart (EARSHOT_WATCH=auto starts one)")
            return
        stopped = self.json("watch", "--stop")
        if not wait_gone(pid):
            self.violation(f"the daemon {pid} outlived 'earshot watch --stop'")
        self.report.restart = {"stopped": pid, "said": stopped, "at_batch": self.done}

    def collect(self, forgotten: str) -> None:
        """gc beside the sessions (it may find the store busy), then between batches."""
        beside = self.earshot("gc", "--json")
        if beside.returncode not in (0, 1) or (
            beside.returncode == 1 and '"store_busy"' not in beside.stdout
        ):
            self.violation(f"gc beside the sessions -> {beside.returncode}: {beside.stderr}")
        self.report.gc["beside_sessions"] = "ran" if beside.returncode == 0 else "store busy"
        with self.lock:
            self.paused = True
            while self.parked < self.running:
                self.lock.wait()
        try:
            for attempt in range(1, 6):
                ran = self.earshot("gc", "--json")
                if ran.returncode == 0:
                    self.report.gc.update(json.loads(ran.stdout), attempts=attempt)
                    break
                if '"store_busy"' not in ran.stdout:
                    self.violation(f"gc -> {ran.returncode}: {ran.stderr}")
                    break
                # Another process still has the store open: wait for it to close it.
                store = self.store()
                assert store is not None
                wait_lock_free(store / "open.lock")
            else:
                self.violation("gc found the store busy five times with every session waiting")
            fsck = self.earshot("fsck", "--json")
            if fsck.returncode != 0:
                self.violation(f"fsck after gc -> {fsck.returncode}: {fsck.stdout[-800:]}")
            listed = [s["id"] for s in self.json("snapshots")["snapshots"]]
            if forgotten in listed or self.mid not in listed:
                self.violation(f"after forget and gc the snapshots listed are {listed}")
            self.report.gc["at_batch"] = self.done
        finally:
            with self.lock:
                self.paused = False
                self.lock.notify_all()

    # -- a session --------------------------------------------------------------------

    def session_main(self, s: SessionRun) -> None:
        try:
            while s.done < self.batches:
                self.window(s)
        except Exception as exc:  # a session's failure is a violation, and it stops
            self.violation(f"session {s.index} ({s.role.name}): {type(exc).__name__}: {exc}")
        finally:
            with self.lock:
                self.running -= 1
                self.lock.notify_all()

    def own_picture(self, s: SessionRun) -> Picture:
        return {f"{s.own}/{k}": v for k, v in picture(self.root / s.own).items()}

    def window(self, s: SessionRun) -> None:
        """A few batches, then an undo of the last few, checked."""
        size = min(s.rng.randint(3, 8), self.batches - s.done)
        tree = Tree.read(self.root, s.own)
        plans = [s.planner.batch(tree, s.done + j + 1) for j in range(size)]
        pictures: dict[int, tuple[float, Picture]] = {}
        counted = 0

        def mark(j: int) -> None:
            nonlocal counted
            if j > counted:
                self.batch_done(j - counted)
                counted = j
            self.park()
            pictures[j] = (time.monotonic(), self.own_picture(s))

        s.role.window(plans, mark)
        self.batch_done(size - counted)
        s.done += size
        with self.lock:
            self.report.windows += 1
        self.check_undo(s, size, pictures, plans)

    def check_undo(
        self,
        s: SessionRun,
        size: int,
        pictures: dict[int, tuple[float, Picture]],
        plans: list[list[Op]],
    ) -> None:
        who = f"session {s.index} ({s.role.name}) window ending at batch {s.done}"
        log = self.json("log", "--session", s.role.session)
        made = [b for b in log["batches"] if b["seq"] > s.last_seq and b["kind"] == "calls"]
        s.last_seq = max([s.last_seq, *(b["seq"] for b in log["batches"])])
        if len(made) != size:
            seqs = [b["seq"] for b in made]
            self.violation(f"{who}: {size} batches made {len(made)} records {seqs}")
            return
        for b in made:
            if not any(c["path"].startswith(f"{s.own}/") for c in b["changes"]):
                self.violation(f"{who}: batch {b['seq']} holds no change of {s.own}/")
        # How many to undo: any number of the last batches a picture was taken before.
        k = s.rng.choice([size - j for j in pictures])
        undone = made[-k:]
        ambiguous = {c["path"] for b in undone for c in b["changes"] if c.get("ambiguous")}
        named = {c["path"] for b in undone for c in b["changes"]}
        taken, before = pictures[size - k]
        # One undo at a time (a second at once is refused), and the tree pictured
        # before another may begin: what another session's undo changes here is
        # known from its impact, which is in ``touches`` before the next begins.
        with self.undo_lock:
            start = time.monotonic()
            ran = self.earshot("undo", str(k), "--session", s.role.session, "--json")
            now = self.own_picture(s)
            if ran.returncode not in (0, 3):
                self.violation(f"{who}: undo {k} -> {ran.returncode}: {ran.stderr.strip()}")
                return
            doc = json.loads(ran.stdout)
            moved = [m["from"] for m in doc["moved"]] + [m["to"] for m in doc["moved"]]
            touched = [*doc["restored"], *doc["deleted"], *doc["removed_dirs"], *moved]
            with self.lock:
                self.touches.append(Touch(start, time.monotonic(), s.index, frozenset(touched)))
                self.report.undos += 1
                self.report.batches_undone += k
        if doc["batches"] != [b["seq"] for b in reversed(undone)]:
            self.violation(f"{who}: undo {k} undid {doc['batches']}, not the last {k}")
        for path in touched:
            if path.startswith(f"{SHARED}/") or path == SHARED:
                self.violation(f"{who}: the undo touched a shared file {path}")
            elif not path.startswith(f"{s.own}/") and path not in ambiguous:
                self.violation(f"{who}: the undo touched {path}, not an ambiguous line of its own")
        elsewhere = self.restored_by_others(s, taken)
        kept = set(doc["ambiguous"])
        for path in sorted(set(before) | set(now)):
            if before.get(path) == now.get(path):
                continue
            if path in kept and path not in before and path in named:
                self.report.kept_ambiguous += 1
                continue
            if path not in before and now[path][0] == "dir" and _holds(path, kept):
                continue  # a folder the batches made, kept for an ambiguous creation in it
            if _near(path, elsewhere):
                self.report.restored_by_others += 1
                continue
            was, got = _short(before.get(path)), _short(now.get(path))
            self.violation(f"{who}: undo {k} left {path} as {got}, was {was} ({doc})")
        stray = set(doc["conflicts"]) - kept
        for path in sorted(p for p in stray if p.startswith(f"{s.own}/")):
            if not _near(path, elsewhere):
                self.violation(f"{who}: undo {k} called {path} a conflict")
        if picture(self.root / SHARED) != self.shared:
            self.violation(f"{who}: the shared files changed")

    def restored_by_others(self, s: SessionRun, since: float) -> set[str]:
        """What other sessions' undos changed in ``s``'s directory since ``since``."""
        with self.lock:
            return {
                p
                for t in self.touches
                if t.session != s.index and t.end >= since
                for p in t.paths
                if p.startswith(f"{s.own}/")
            }

    # -- the end ------------------------------------------------------------------------

    def finish(self) -> None:
        for s in self.runs:
            try:
                s.role.close()
            except Exception as exc:
                self.violation(f"session {s.index} ({s.role.name}) end: {exc}")
            self.report.calls += s.role.calls
            self.report.warnings += [f"s{s.index}: {m}" for m in s.role.messages]
        self.report.batches = self.done
        with self.lock:
            self.sample()
        self.report.rss = self.memory()
        status = self.earshot("watch", "--status", "--json")
        doc = json.loads(status.stdout) if status.returncode == 0 else {}
        self.report.restart.update(
            started=doc.get("pid"), hosted_calls=doc.get("hosted_calls"), gaps=doc.get("gaps")
        )
        if not doc.get("running"):
            self.violation("no daemon ran at the end: the restart never started one again")
        elif doc.get("pid") == self.report.restart.get("stopped"):
            self.violation("the daemon at the end is the one stopped")
        self.leftovers(doc.get("pid"))

    def memory(self) -> dict[str, Any]:
        """Per daemon: its first sample, its sample after warm-up, its last; the growth."""
        out: dict[str, Any] = {"bound_mib": RSS_BOUND_MIB, "daemons": []}
        for pid in dict.fromkeys(p for _, p, _ in self.samples):
            mine = [(done, kib) for done, p, kib in self.samples if p == pid]
            first = mine[0]
            warm = next((x for x in mine if x[0] >= first[0] + WARM_UP * self.total), None)
            last = mine[-1]
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
                    self.violation(
                        f"daemon {pid} grew {growth:.1f} MiB from batch {warm[0]} to {last[0]} "
                        f"(bound {RSS_BOUND_MIB:g} MiB)"
                    )
            out["daemons"].append(entry)
        judged = [d for d in out["daemons"] if "warm" in d]
        if not judged:
            self.violation("no daemon served long enough to judge its memory")
        return out

    def leftovers(self, pid: int | None) -> None:
        found: dict[str, Any] = {}
        stop = self.earshot("watch", "--stop")
        if stop.returncode != 0:
            self.violation(f"watch --stop -> {stop.returncode}: {stop.stderr}")
        if pid is not None and not wait_gone(pid):
            self.violation(f"the daemon {pid} outlived 'earshot watch --stop'")
        left = [p for p in self.ours() if not wait_gone(p)]
        found["processes"] = [_describe(p) for p in left]
        if left:
            self.violation(f"processes left after the daemon stopped: {found['processes']}")
        store = self.store()
        assert store is not None
        temps = [*self.root.rglob(".earshot-tmp-*"), *self.home.rglob(".earshot-tmp-*")]
        temps += [p for p in self.home.rglob("*.tmp")]
        found["temp_files"] = [str(p) for p in temps]
        if temps:
            self.violation(f"temp files left: {found['temp_files'][:5]}")
        for sock in [store / "watch.sock", *(self.home / "run").glob("*")]:
            if sock.exists() or sock.is_symlink():
                self.violation(f"the daemon's socket is left: {sock}")
        held = [str(p) for p in self.home.rglob("*.lock") if not lock_free(p)]
        found["locks_held"] = held
        found["lock_files"] = len(list(self.home.rglob("*.lock")))
        if held:
            self.violation(f"lock files still held: {held}")
        outside: list[Any] = []
        for s in self.runs:
            doc = self.json("log", "--session", s.role.session)
            if doc.get("pending"):
                self.violation(f"session {s.index}: log says pending {doc['pending']}")
            outside = doc.get("outside") or []
        # Every change was made inside a call of some session: none is the person's.
        if outside:
            seqs = [b["seq"] for b in outside]
            self.violation(f"changes recorded as made outside any call: batches {seqs}")
        found["intents"] = self.pending()
        if found["intents"]:
            self.violation(f"intents left: {found['intents']}")
        fsck = self.earshot("fsck", "--json")
        found["fsck"] = "clean" if fsck.returncode == 0 else fsck.stdout[-800:]
        if fsck.returncode != 0:
            self.violation(f"fsck -> {fsck.returncode}: {fsck.stdout[-800:]}")
        check = self.earshot("sessions", "check", "--json")
        if check.returncode != 0:
            self.violation(f"sessions check -> {check.returncode}: {check.stdout[-800:]}")
        # What the commands just run started (none records: no daemon again).
        if self.daemon_pid() is not None:
            self.violation("a read-only command started the daemon again")
        self.report.leftovers = found

    def pending(self) -> list[dict[str, Any]]:
        from earshot.agent.core.records import TABLES
        from earshot.cas.project import Project

        with Project(self.root, home=self.home, extra_tables=TABLES) as project:
            return [i.to_json() for i in project.intents.pending()]


def _holds(folder: str, paths: set[str]) -> bool:
    return any(p.startswith(f"{folder}/") for p in paths)


def _near(path: str, paths: set[str]) -> bool:
    """``path`` is one of ``paths``, inside one (a folder), or holds one."""
    return any(p == path or path.startswith(f"{p}/") or p.startswith(f"{path}/") for p in paths)


def _short(entry: tuple[object, ...] | None) -> str:
    if entry is None:
        return "absent"
    if entry[0] == "file":
        return f"file {entry[1]:o} {entry[2]!r:.60}"
    return " ".join(str(x) for x in entry)


def _describe(pid: int) -> str:
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


def run_soak(
    sessions: int,
    batches: int,
    seed: int = 1,
    work: Path | None = None,
    roles: tuple[str, ...] = ROLES,
    verbose: bool = False,
    keep: bool = False,
) -> Report:
    """Run the soak in a fresh directory under ``work``; return the report."""
    tmp = Path(tempfile.mkdtemp(dir=work, prefix="soak-"))
    soak = Soak(tmp, sessions, batches, seed, roles)
    soak.verbose = verbose
    try:
        soak.along_the_way()
        soak.finish()
    finally:
        for s in soak.runs:  # a run cut short by an error still ends its agents
            with contextlib.suppress(Exception):
                s.role.close()
        with contextlib.suppress(Exception):
            soak.earshot("watch", "--stop")
        soak.report.seconds = round(time.monotonic() - soak.started, 1)
        if keep or soak.report.violations:
            print(f"the soak's tree and store: {tmp}", file=sys.stderr)
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    return soak.report


def lines(report: Report) -> Iterator[str]:
    yield f"sessions: {report.sessions} ({', '.join(report.roles[: report.sessions])})"
    yield f"batches: {report.batches} ({report.calls} calls, {report.windows} windows)"
    yield f"undos checked: {report.undos} ({report.batches_undone} batches undone)"
    yield (
        f"said and left by design: {report.kept_ambiguous} ambiguous creations kept, "
        f"{report.restored_by_others} paths restored by another session's undo"
    )
    yield f"gc: {json.dumps(report.gc, sort_keys=True)}"
    yield f"daemon restart: {json.dumps(report.restart, sort_keys=True)}"
    for d in report.rss.get("daemons", []):
        warm = d.get("warm", {})
        yield (
            f"daemon {d['pid']} RSS MiB: first {d['first']['mib']} (batch {d['first']['batch']}),"
            f" after warm-up {warm.get('mib', '-')} (batch {warm.get('batch', '-')}),"
            f" last {d['last']['mib']} (batch {d['last']['batch']}), peak {d['peak_mib']},"
            f" growth {d.get('growth_mib', '-')} (bound {RSS_BOUND_MIB:g})"
        )
    yield f"leftovers: {json.dumps(report.leftovers, sort_keys=True)}"
    yield f"warnings said: {len(report.warnings)}"
    yield f"violations: {len(report.violations)}"
    yield from (f"  {v}" for v in report.violations)
    yield f"seconds: {report.seconds:.0f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=4)
    parser.add_argument("--batches", type=int, default=100, help="per session")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--roles", default=",".join(ROLES), help=f"given in turn: {ROLES}")
    parser.add_argument("--work", type=Path, default=None)
    parser.add_argument("--keep", action="store_true", help="keep the tree and store")
    parser.add_argument("--json", action="store_true", help="print the report as one JSON document")
    args = parser.parse_args()
    report = run_soak(
        args.sessions,
        args.batches,
        args.seed,
        args.work,
        tuple(args.roles.split(",")),
        verbose=not args.json,
        keep=args.keep,
    )
    if args.json:
        print(json.dumps(report.__dict__))
    else:
        for line in lines(report):
            print(line)
    sys.exit(1 if report.violations else 0)


if __name__ == "__main__":
    main()
