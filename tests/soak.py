"""Soak: sessions side by side on one root, each a hundred batches, through the daemon.

Each session owns a directory of the root (``s0/``, ``s1/``, ...) and reads
a few shared files (``shared/``) that none writes; its batches change its
directory in every way a tool can (tests/soak_plans.py). The sessions run at
once, each the way one kind of agent reaches earshot (tests/soak_agents.py):
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
   ambiguous (another session's change among them) and lists it; where
   that brought back a file this session moved away, the move's other half
   is kept by this session's undo, and listed as kept. Nothing else may
   differ; the shared files never change; an undo restores or deletes
   outside the session's directory only what its undone batches' ledgers
   hold as ambiguous.
2. The daemon's memory stays flat: its VmRSS is sampled after every batch;
   from the end of its warm-up (the first tenth of the run's batches it
   served) to its last sample it may grow by at most ``RSS_BOUND_MIB``
   (tests/soak_checks.py says why that much).
3. Nothing is left behind (tests/soak_checks.py): no earshot temp file in
   the tree or the store, no pending intent (``log --json`` and the store's
   intents), ``fsck`` and ``sessions check`` clean, no daemon, worker or
   command process once the daemon is stopped, no socket, every lock file
   free, and no change recorded as made outside any call (every change was
   a session's call).

    python tests/soak.py --sessions 4 --batches 100      # the full run

prints the counts, the daemon's memory and the violations (exit 1 if any);
``--json`` prints them as one document. The suite runs a short one
(tests/cli/test_soak.py).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
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
from soak_agents import ROLE_CLASSES, ROLES, Role
from soak_checks import (
    RSS_BOUND_MIB,
    daemon_pid,
    judge_memory,
    leftovers,
    rss_kib,
    wait_gone,
    wait_lock_free,
)
from soak_plans import SHARED, SHARED_TEXT, Planner, Tree

#: When (shares of all the run's batches done) each thing happens along the way.
RESTART_AT, FORGET_AT, GC_AT = 0.15, 0.3, 0.45


@dataclass
class Report:
    sessions: int = 0
    roles: list[str] = field(default_factory=list)
    batches: int = 0
    calls: int = 0
    #: Agents' tool calls that failed: an edit whose line another session's undo
    #: took back (the agent is told, as its tool would say).
    failed_calls: int = 0
    #: ``earshot`` processes run (hook events, commands, checks): the daemon's load.
    processes: int = 0
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
        with self.lock:
            self.report.processes += 1
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

    def sample(self) -> None:
        pid = daemon_pid(self.home)
        kib = None if pid is None else rss_kib(pid)
        if pid is not None and kib is not None:
            self.samples.append((self.done, pid, kib))

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
        pid = daemon_pid(self.home)
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
            # Never while another session's undo applies: its staged files (an
            # .earshot-tmp- name, renamed into place a moment later) are no state.
            with self.undo_lock:
                pictures[j] = (time.monotonic(), self.own_picture(s))

        s.role.window(plans, mark)
        self.batch_done(size - counted)
        s.done += size
        with self.lock:
            self.report.windows += 1
        self.check_undo(s, size, pictures)

    def check_undo(
        self, s: SessionRun, size: int, pictures: dict[int, tuple[float, Picture]]
    ) -> None:
        """Undo the last few of the window's batches (as many as a picture was taken
        before); the session's directory must be that picture, but for what differs
        by design and is said."""
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
        # Another session's undo brought back what these batches moved away (an
        # ambiguous deletion of its ledger): the move's other half is kept, and
        # said (deleted only where a call is proven to have made it).
        back = {now[p][2] for p in now if _near(p, elsewhere) and now[p][0] == "file"}
        halves = {
            k["path"]
            for k in doc["kept"]
            if k["path"] not in before and now.get(k["path"], ("",))[0] == "file"
            if now[k["path"]][2] in back
        }
        for path in sorted(set(before) | set(now)):
            if before.get(path) == now.get(path):
                continue
            if path in kept and path not in before and path in named:
                with self.lock:
                    self.report.kept_ambiguous += 1
                continue
            if path not in before and now[path][0] == "dir" and _holds(path, kept | halves):
                continue  # a folder the batches made, kept for what is kept in it
            if _near(path, elsewhere) or path in halves:
                with self.lock:
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
            self.report.failed_calls += s.role.failed
            self.report.processes += s.role.processes
            self.report.warnings += [f"s{s.index}: {m}" for m in s.role.messages]
        self.report.batches = self.done
        with self.lock:
            self.sample()
        self.report.rss, problems = judge_memory(self.samples, self.total)
        for problem in problems:
            self.violation(problem)
        status = self.earshot("watch", "--status", "--json")
        doc = json.loads(status.stdout) if status.returncode == 0 else {}
        self.report.restart.update(
            started=doc.get("pid"), hosted_calls=doc.get("hosted_calls"), gaps=doc.get("gaps")
        )
        if not doc.get("running"):
            self.violation("no daemon ran at the end: the restart never started one again")
        elif doc.get("pid") == self.report.restart.get("stopped"):
            self.violation("the daemon at the end is the one stopped")
        sessions = [s.role.session for s in self.runs]
        found, problems = leftovers(self.earshot, self.root, self.home, sessions, doc.get("pid"))
        self.report.leftovers = found
        for problem in problems:
            self.violation(problem)


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
    yield (
        f"batches: {report.batches} ({report.calls} calls, {report.failed_calls} failed,"
        f" {report.windows} windows)"
    )
    yield f"earshot processes: {report.processes}"
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
