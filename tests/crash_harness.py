"""Crash harness: kill earshot at random instants of each mutating operation; lose nothing.

Runs ``snapshot``, a ``bash`` batch, an ``exec`` batch of many writes,
``undo``, ``redo`` and ``restore --force`` through the real CLI on a tree of
thousands of files, and sends SIGKILL after a random delay (seeded: the same
seed gives the same plan). A run that ended before its kill does not count
as a kill. After each kill it checks:

1. a read-only command (``log``) reports what was interrupted, and changes nothing;
2. the next mutating command finishes it: no intent left, no temp file in the tree;
3. the operation converged: an undo, redo or restore left the tree either
   untouched or exactly at its target; a killed batch is recorded, and its
   undo restores every file it changed, deleting only what it can prove a
   call made (what it keeps is reported, and nothing else differs);
4. ``fsck`` is clean (objects, references, records, stat cache);
5. every listed snapshot and every batch's states are restorable byte for
   byte (every blob read back and verified against its digest);
6. a fresh batch after it, and its undo, restore the tree exactly.

    python tests/crash_harness.py --kills 240 --seed 1     # the full run

prints the count of kills and of violations (exit 1 if any). The test suite
runs a small seeded subset (tests/agent/core/test_crash_harness.py).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

EARSHOT = Path(sys.executable).parent / "earshot"
OPERATIONS = ("snapshot", "bash", "exec", "undo", "redo", "restore")
Picture = dict[str, tuple[object, ...]]


def picture(root: Path) -> Picture:
    """Every entry under ``root``: kind, mode, content or link target."""
    out: Picture = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in [*dirnames, *filenames]:
            path = Path(dirpath) / name
            rel = path.relative_to(root).as_posix()
            st = path.lstat()
            if stat.S_ISLNK(st.st_mode):
                out[rel] = ("link", os.readlink(path))
            elif stat.S_ISDIR(st.st_mode):
                out[rel] = ("dir", stat.S_IMODE(st.st_mode))
            else:
                out[rel] = ("file", stat.S_IMODE(st.st_mode), path.read_bytes())
    return out


@dataclass
class Report:
    kills: int = 0
    finished_before_kill: int = 0
    by_operation: dict[str, int] = field(default_factory=dict)
    violations: list[str] = field(default_factory=list)


class Harness:
    """One root, one store, one session; operations run, killed and checked."""

    def __init__(self, work: Path, files: int, seed: int) -> None:
        self.work = work
        self.root = work / "root"
        self.home = work / "home"
        self.rng = random.Random(seed)
        self.files = files
        self.verified: set[bytes] = set()
        self.report = Report()
        self.verbose = False
        #: Checked after a power cut, not a kill: a command's own writes may be lost.
        self.power_cut = False
        #: A log of every command and what it said (``--trace``).
        self.trace: Any = None
        self.session = ""
        self.fresh = 0
        self.changes = 0
        self.root.mkdir(parents=True)
        for i in range(files):
            path = self.root / f"d{i % 50}" / f"f{i}.txt"
            path.parent.mkdir(exist_ok=True)
            path.write_text(f"file {i}\n" * (1 + i % 40))
        # Rewritten by every bash batch with the bytes it holds: a batch
        # records no change there, so only a sync before the record keeps a
        # power cut from leaving it truncated where no undo looks.
        (self.root / "same").mkdir()
        for i in range(1, 21):
            (self.root / "same" / str(i)).write_text(f"the same {i}\n")
        (self.root / "big.bin").write_bytes(random.Random(seed).randbytes(3 << 20))
        (self.root / "link").symlink_to("d1/f1.txt")
        self.session = self.json("session", "new")["id"]
        self.durations: dict[str, float] = {}

    # -- running earshot -------------------------------------------------------

    def env(self, **extra: str) -> dict[str, str]:
        env = dict(os.environ)
        env.pop("XDG_DATA_HOME", None)
        env.update(EARSHOT_HOME=str(self.home), EARSHOT_SESSION=self.session, EARSHOT_WATCH="never")
        env.update(extra)
        return env

    def run(self, *args: str, stdin: str | None = None, check: bool = True) -> Any:
        proc = self._run(*args, stdin=stdin)
        if self.trace is not None:
            self.trace.write(f"$ earshot {' '.join(args)} -> {proc.returncode}\n{proc.stderr}")
            self.trace.flush()
        if check and proc.returncode not in (0, 3):
            raise RuntimeError(f"earshot {' '.join(args)} -> {proc.returncode}\n{proc.stderr}")
        return proc

    def _run(self, *args: str, stdin: str | None = None) -> Any:
        return subprocess.run(
            [str(EARSHOT), *args],
            cwd=self.root,
            env=self.env(),
            input=stdin,
            capture_output=True,
            text=True,
            check=False,
            timeout=300,
        )

    def json(self, *args: str, stdin: str | None = None) -> Any:
        return json.loads(self.run(*args, "--json", stdin=stdin).stdout)

    # -- the operations -----------------------------------------------------------

    def _bash_script(self) -> str:
        """A command that changes many files, and surely one (else undo, rightly,
        would step over its batch and revert an older one)."""
        a, b = self.rng.randrange(50), self.rng.randrange(50)
        self.changes += 1
        return (
            f"for f in d{a}/*; do echo changed >> $f; done; rm -rf d{b}; "
            f"mkdir -p new{a}; for i in $(seq 300); do echo $i > new{a}/n$i; done; "
            # Directories of one file each: an undo cut off after deleting
            # some leaves them empty, and the finishing undo must remove them.
            f"for i in $(seq 40); do mkdir -p one{a}/s$i; echo $i > one{a}/s$i/f; done; "
            f"echo {self.changes} >> churn.txt; "
            f'for i in $(seq 20); do echo "the same $i" > same/$i; done'
        )

    def _exec_calls(self) -> str:
        base = self.rng.randrange(1000)
        calls = [
            {"tool": "write_file", "path": f"w{base % 7}/f{i}", "content": f"{base} {i}\n"}
            for i in range(600)
        ]
        calls.insert(300, {"tool": "bash", "command": f"rm -rf d{base % 50}"})
        return json.dumps(calls)

    def _touch_some(self, count: int) -> None:
        names = sorted(p for p in self.root.rglob("*.txt") if p.is_file())
        for path in self.rng.sample(names, min(count, len(names))):
            path.write_text(path.read_text() + "edit\n")

    def prepare(self, op: str) -> tuple[list[str], str | None, Picture | None]:
        """Set the scene for ``op``; return its argv, stdin, and its target picture."""
        if op == "snapshot":
            self._touch_some(200)
            return ["snapshot", "-m", "harness"], None, None
        if op == "bash":
            return ["bash", self._bash_script()], None, None
        if op == "exec":
            return ["exec"], self._exec_calls(), None
        if op == "undo":
            target = picture(self.root)
            self.run("bash", self._bash_script())
            return ["undo"], None, target
        if op == "redo":
            self.run("bash", self._bash_script())
            target = picture(self.root)
            self.run("undo")
            return ["redo"], None, target
        assert op == "restore"
        snap = self.json("snapshot", "-m", "restore target")["id"]
        target = picture(self.root)
        self._touch_some(150)
        dirs = sorted(self.root.glob("d*"))
        for path in self.rng.sample(dirs, min(3, len(dirs))):
            shutil.rmtree(path)
        (self.root / "stray").mkdir(exist_ok=True)
        (self.root / "stray" / "x.txt").write_text("x\n")
        return ["restore", snap, "--force"], None, target

    def calibrate(self) -> None:
        """How long each operation takes unkilled here: the range kills are drawn from."""
        for op in OPERATIONS:
            argv, stdin, _ = self.prepare(op)
            start = time.monotonic()
            self.run(*argv, stdin=stdin)
            self.durations[op] = time.monotonic() - start

    # -- one kill, and the checks ---------------------------------------------------

    def kill_once(self, op: str) -> bool:
        """Run ``op`` and kill it at a random instant; check everything. True if killed."""
        argv, stdin, target = self.prepare(op)
        before = picture(self.root)
        batches_before = len(self.json("log")["batches"])
        delay = self.rng.uniform(0.0, 1.1 * self.durations[op])
        proc = subprocess.Popen(
            [str(EARSHOT), *argv],
            cwd=self.root,
            env=self.env(),
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        assert proc.stdin is not None
        if stdin is not None:
            with contextlib.suppress(BrokenPipeError):
                proc.stdin.write(stdin)
        proc.stdin.close()
        deadline = time.monotonic() + delay
        while proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.002)
        if proc.poll() is not None:
            self.report.finished_before_kill += 1
            self.check_after(op, before, target, killed=False, batches_before=batches_before)
            return False
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        self.report.kills += 1
        self.report.by_operation[op] = self.report.by_operation.get(op, 0) + 1
        self.check_after(op, before, target, killed=True, batches_before=batches_before)
        return True

    def violation(self, op: str, what: str) -> None:
        line = f"kill {self.report.kills} ({op}): {what}"
        self.report.violations.append(line)
        if self.verbose:
            print(f"VIOLATION {line}", file=sys.stderr, flush=True)

    def _wait_for_leftovers(self, timeout: float = 20.0) -> None:
        """Wait until no process but this one works in the tree (cwd inside it)."""
        root = str(self.root.resolve())
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            busy = False
            with os.scandir("/proc") as processes:  # closed when left early too
                for entry in processes:
                    if not entry.name.isdigit() or int(entry.name) == os.getpid():
                        continue
                    try:
                        cwd = os.readlink(f"/proc/{entry.name}/cwd")
                    except OSError:
                        continue
                    if cwd == root or cwd.startswith(root + "/"):
                        busy = True
                        break
            if not busy:
                return
            time.sleep(0.02)

    def _pending(self) -> list[dict[str, Any]]:
        from earshot.agent.core.records import TABLES
        from earshot.cas.project import Project

        with Project(self.root, home=self.home, extra_tables=TABLES) as project:
            return [i.to_json() for i in project.intents.pending()]

    def check_after(
        self,
        op: str,
        before: Picture,
        target: Picture | None,
        killed: bool,
        batches_before: int,
    ) -> None:
        pending = self._pending()
        # 1. A reader reports it and changes nothing. The killed command's own
        # children (an rm the shell started) may still be finishing: they are
        # the command's doing, not the reader's, so the tree is pictured once
        # they are gone (the next mutating command would kill them).
        self._wait_for_leftovers()
        still = picture(self.root)
        reader = self.run("log", "--json", check=False)
        if reader.returncode != 0:
            self.violation(op, f"log failed: {reader.stderr.strip()}")
            return
        if picture(self.root) != still:
            self.violation(op, "a read-only command changed the tree")
        if pending and "interrupted" not in reader.stderr:
            self.violation(op, f"log did not report the interrupted {pending[0]['kind']}")
        recorded = len(json.loads(reader.stdout)["batches"]) > batches_before
        # 2. The next mutating command finishes it. Undo and redo are run again, as a
        # person would: that finishes an interrupted one, or runs one never started.
        rerun = op in ("undo", "redo") and not recorded
        again = op if rerun else "snapshot"
        finisher = self.run(again, check=False)
        if finisher.returncode not in (0, 3):
            self.violation(op, f"{again} after the kill failed: {finisher.stderr.strip()}")
        said = "finished an interrupted" in finisher.stderr or "recorded interrupted" in (
            finisher.stderr
        )
        if pending and not said:
            self.violation(op, f"{again} did not say it finished what was interrupted")
        if self._pending():
            self.violation(op, f"intents left after {again}: {self._pending()}")
        temps = list(self.root.rglob(".earshot-tmp-*"))
        if temps:
            self.violation(op, f"temp files left: {temps[:3]}")
        # 3. It converged.
        now = picture(self.root)
        if op in ("undo", "redo") and target is not None and now != target:
            self.violation(op, f"{op} did not converge: {_delta(target, now)}")
        # Untouched is fine for a restore only if it never began.
        if op == "restore" and target is not None and now != target and (pending or now != before):
            self.violation(op, f"restore did not converge: {_delta(target, now)}")
        if op in ("bash", "exec", "hook") and killed:
            batches = self.json("log")["batches"]
            if len(batches) == batches_before + 1:
                self._check_batch_undo(op, before, batches[-1])
            elif len(batches) != batches_before or now != before:
                self.violation(op, "a killed batch was neither recorded nor without effect")
        # 4. fsck, with records.
        fsck = self.run("fsck", "--json", check=False)
        if fsck.returncode != 0:
            self.violation(op, f"fsck: {fsck.stdout[-500:]}")
        # 5. Everything listed is restorable byte for byte.
        self._verify_all(op)
        # 6. A fresh batch (one that surely changes something) and its undo are exact.
        clean = picture(self.root)
        self.fresh += 1
        fresh = self.json("bash", f"{self._bash_script()}; echo {self.fresh} > fresh.txt")
        undo = self.json("undo")
        if undo["batches"] != [fresh["batch"]]:
            self.violation(op, f"undo after a fresh batch undid {undo['batches']}")
        if picture(self.root) != clean:
            delta = _delta(clean, picture(self.root))
            self.violation(op, f"a fresh batch's undo was not exact: {delta}")

    def _check_batch_undo(self, op: str, before: Picture, batch: dict[str, Any]) -> None:
        """A killed batch, once recorded, is undone: every file it changed comes back,
        and only what undo reports as kept (unproven creations) stays."""
        if not batch["changes"]:
            return  # killed before it changed anything: undo steps over it, rightly
        undo = self.run("undo", "--json", check=False)
        if undo.returncode not in (0, 3):
            self.violation(op, f"undo of the killed batch failed: {undo.stderr.strip()}")
            return
        doc = json.loads(undo.stdout)
        if doc["batches"] != [batch["seq"]]:
            self.violation(op, f"undo of killed batch {batch['seq']} undid {doc['batches']}")
            return
        kept = {k["path"] for k in doc["kept"]}
        if self.power_cut:
            # What the command wrote and no one made durable may be gone, so
            # its files may differ from what the batch recorded: undo keeps
            # them and says why (a conflict); the person's files come back.
            kept |= set(doc["conflicts"])
        now = picture(self.root)
        for path, entry in before.items():
            if entry[0] == "file" and now.get(path) != entry:
                self.violation(op, f"undo of the killed batch did not restore {path}")
                return
        extra = {p for p, e in now.items() if e[0] != "dir" and p not in before}
        if extra - kept:
            self.violation(op, f"undo left unreported files: {sorted(extra - kept)[:3]}")
        if doc["conflicts"] and not self.power_cut:
            self.violation(op, f"undo of the killed batch had conflicts: {doc['conflicts'][:3]}")
        # Put the tree back as it was for the next round.
        for path in sorted(extra, reverse=True):
            (self.root / path).unlink()
        self.run("snapshot")

    def _verify_all(self, op: str) -> None:
        from earshot.agent.core.records import TABLES, session_batches
        from earshot.cas.digest import Digest
        from earshot.cas.errors import EarshotError
        from earshot.cas.project import Project
        from earshot.cas.tree import Kind

        with Project(self.root, home=self.home, extra_tables=TABLES) as project:
            snaps = [d for d, _ in project.snapshots()]
            with project.store.backend.read() as view:
                for batch in session_batches(view, self.session):
                    snaps += [d for d in (batch.before, batch.after) if d is not None]
            with project.store.reader() as reader:
                for snap in snaps:
                    try:
                        stack = [reader.read_snapshot(Digest(snap)).tree]
                        while stack:
                            tree = stack.pop()
                            if tree in self.verified:
                                continue
                            for entry in reader.read_tree(tree):
                                if entry.digest is None or entry.digest in self.verified:
                                    continue
                                if entry.kind is Kind.DIR:
                                    stack.append(entry.digest)
                                    continue
                                for _ in reader.iter_blob(entry.digest):
                                    pass
                                self.verified.add(entry.digest)
                            self.verified.add(tree)
                    except EarshotError as exc:
                        self.violation(op, f"snapshot {bytes(snap).hex()[:12]}: {exc}")


def _delta(want: Picture, got: Picture) -> str:
    missing = sorted(set(want) - set(got))[:3]
    extra = sorted(set(got) - set(want))[:3]
    differ = sorted(p for p in set(want) & set(got) if want[p] != got[p])[:3]
    return f"missing {missing}, extra {extra}, differ {differ}"


def run_harness(
    kills: int,
    seed: int,
    files: int,
    work: Path | None = None,
    verbose: bool = False,
    operations: tuple[str, ...] = OPERATIONS,
    trace: Path | None = None,
    stop_at_violation: bool = False,
) -> Report:
    """Kill until ``kills`` operations were really cut off; return the report."""
    with tempfile.TemporaryDirectory(dir=work) as tmp:
        harness = Harness(Path(tmp), files, seed)
        harness.verbose = verbose
        if trace is not None:
            harness.trace = open(trace, "w")  # noqa: SIM115 - open for the whole run
        harness.calibrate()
        i = 0
        attempts = 0
        while harness.report.kills < kills and attempts < kills * 4:
            op = operations[i % len(operations)]
            if harness.trace is not None:
                harness.trace.write(f"=== {op} (kill {harness.report.kills + 1})\n")
            if harness.kill_once(op):
                i += 1
            attempts += 1
            if stop_at_violation and harness.report.violations:
                kept = Path(tempfile.mkdtemp(dir=work, prefix="violation-"))
                shutil.copytree(Path(tmp), kept / "work", symlinks=True)
                print(
                    f"stopped at the first violation; its tree and store: {kept}", file=sys.stderr
                )
                break
            if attempts % len(operations) == 0:
                print(
                    f"kills {harness.report.kills}, violations {len(harness.report.violations)}",
                    file=sys.stderr,
                    flush=True,
                )
        return harness.report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kills", type=int, default=240)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--files", type=int, default=3000)
    parser.add_argument("--work", type=Path, default=None)
    parser.add_argument("--ops", default=",".join(OPERATIONS), help="operations to kill")
    parser.add_argument("--trace", type=Path, help="log every command and its stderr here")
    parser.add_argument("--stop", action="store_true", help="stop at the first violation")
    args = parser.parse_args()
    start = time.monotonic()
    report = run_harness(
        args.kills,
        args.seed,
        args.files,
        args.work,
        verbose=True,
        operations=tuple(args.ops.split(",")),
        trace=args.trace,
        stop_at_violation=args.stop,
    )
    print(f"kills: {report.kills}")
    print(f"kills by operation: {json.dumps(report.by_operation, sort_keys=True)}")
    print(f"runs that finished before their kill: {report.finished_before_kill}")
    print(f"violations: {len(report.violations)}")
    for line in report.violations:
        print(f"  {line}")
    print(f"seconds: {time.monotonic() - start:.0f}")
    sys.exit(1 if report.violations else 0)


if __name__ == "__main__":
    main()
