"""Power-cut explorer: every mutating operation's crash states, each checked as after a kill.

A kill leaves every write in the page cache, and the kernel still writes
it out; a power cut loses what was not made durable, in any order the file
system allows. This runs each operation of the crash harness (snapshot, a
``bash`` batch, an ``exec`` batch of many writes, undo, redo, restore),
``gc``, ``session new``, ``fork`` and an agent's hook batch (Claude Code's
events around one Bash call, to the batch's end) under strace (tests/fs_trace.py),
builds the crash states the model in tests/crash_states.py allows at each
barrier of the run and at random points between, lays each one on disk in
place of the tree and the store, and checks it as the crash harness checks
a kill (tests/crash_harness.py ``check_after``): the next command finishes
what was interrupted, an undo, redo or restore converges, a batch cut off
is undone exactly, ``fsck`` is clean, every listed state is restorable byte
for byte, and a fresh batch and its undo are exact.

Before any crash state is checked, the run's whole list of operations is
replayed over the copy taken before it and must give the very state the
command left (a parser that missed a call fails here, not silently).

    python tests/powercut.py --states 1000 --jobs 2     # a thousand, two explorers at once

prints the count of distinct crash states checked and of violations (exit
1 if any). The suite runs a seeded sample (tests/agent/core/test_powercut.py).
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from crash_harness import EARSHOT, OPERATIONS, Harness, Picture, _delta, picture
from crash_states import CrashState, Persistence, digest, materialize
from fs_trace import Op, TraceError, Tree, record

POWER_OPERATIONS = (*OPERATIONS, "gc", "session", "fork", "hook")
#: The agent session of the hook batches (Claude Code's payloads).
AGENT_SESSION = "powercut-agent"


@dataclass
class Report:
    states: int = 0
    runs: int = 0
    ops_traced: int = 0
    barriers: int = 0
    by_operation: dict[str, int] = field(default_factory=dict)
    violations: list[str] = field(default_factory=list)


def _without_locks(p: Picture) -> Picture:
    return {k: v for k, v in p.items() if not k.endswith("lock.mdb")}


class Explorer:
    """The crash harness's scenes, run under strace, each cut at its crash states."""

    def __init__(
        self,
        work: Path,
        files: int,
        seed: int,
        names: str = "strict",
        variants: tuple[str, ...] = (),
        barriers_only: bool = False,
    ) -> None:
        self.harness = Harness(work / "live", files, seed)
        self.harness.power_cut = True
        self.rng = random.Random(seed)
        self.names = names
        self.variants = variants  # empty: every variant
        self.barriers_only = barriers_only
        self.base = work / "base"
        self.after = work / "after"
        self.trace = work / "trace"
        self.after.mkdir(parents=True)
        self.report = Report()
        self.seen: set[str] = set()
        self.snapshots_before = 0
        self.hooks = work / "hooks"
        self.hooks.mkdir()
        self.events = 0
        self.hook_session: str | None = None
        self.own_session: str | None = None
        self.verbose = False
        h = self.harness
        self.pairs = [(self.base / "root", h.root), (self.base / "home", h.home)]

    def to_base(self, path: str) -> str | None:
        for base, live in self.pairs:
            if path == str(live) or path.startswith(f"{live}/"):
                return str(base) + path[len(str(live)) :]
        return None

    def from_base(self, path: str) -> str | None:
        for base, live in self.pairs:
            if path == str(base) or path.startswith(f"{base}/"):
                return str(live) + path[len(str(base)) :]
        return None

    def tree(self) -> Tree:
        return Tree(self.to_base, self.from_base)

    def _copy(self, pairs: list[tuple[Path, Path]]) -> None:
        for src, dst in pairs:
            if dst.exists():
                shutil.rmtree(dst)
            shutil.copytree(src, dst, symlinks=True)

    def prepare(self, op: str) -> tuple[list[str], str | None, Picture | None]:
        """The whole command line to trace, its stdin, and the tree it must leave."""
        h = self.harness
        earshot = str(EARSHOT)
        if op == "gc":
            h.run("bash", h._bash_script())
            snapshots = h.json("snapshots")["snapshots"]
            if snapshots:
                h.run("forget", snapshots[-1]["id"])  # the oldest: gc has work to do
            return [earshot, "gc"], None, None
        if op == "session":
            return [earshot, "session", "new", "--json"], None, None
        if op == "fork":
            for n in range(2):
                h.run("prompt", f"prompt {n} of a fork")
            return [earshot, "fork", "--json"], None, None
        if op == "hook":
            return ["bash", "-c", self._hook_batch()], None, None
        argv, stdin, target = h.prepare(op)
        return [earshot, *argv], stdin, target

    def _hook(self, event: str, **fields: object) -> Path:
        """A hook event's payload, as Claude Code sends it, in a file outside the tree."""
        self.events += 1
        path = self.hooks / f"{self.events}-{event}.json"
        common = {"session_id": AGENT_SESSION, "cwd": str(self.harness.root)}
        common["transcript_path"] = str(self.hooks / "transcript.jsonl")
        path.write_text(json.dumps({**common, "hook_event_name": event, **fields}))
        return path

    def _hook_batch(self) -> str:
        """A script that runs one Bash call of an agent through its hooks, to the batch's end.

        The session is started (and a prompt sent) first, untraced; the
        harness then works on the session the hooks bound.
        """
        h = self.harness
        hook = f"{EARSHOT} hook claude"
        if self.hook_session is None:
            for event, fields in (
                ("SessionStart", {"source": "startup"}),
                ("UserPromptSubmit", {}),
            ):
                if event == "UserPromptSubmit":
                    fields = {"prompt": "power cuts", "prompt_id": "p-1"}
                subprocess.run(
                    f"{hook} < {self._hook(event, **fields)}", shell=True, check=True,
                    cwd=h.root, env=h.env(),
                )  # fmt: skip
            bound = [s for s in h.json("sessions")["sessions"] if s["agent"]]
            self.hook_session = bound[0]["id"]
        self.own_session, h.session = h.session, self.hook_session
        call = f"toolu_powercut_{self.events:06d}"
        command = f"rm -rf d{h.rng.randrange(50)}; mkdir -p hooked; echo {self.events} >> hooked/n"
        tool_input = {"command": command, "description": "a power cut's batch"}
        pre = self._hook("PreToolUse", tool_name="Bash", tool_input=tool_input, tool_use_id=call)
        post = self._hook(
            "PostToolUse", tool_name="Bash", tool_input=tool_input, tool_use_id=call,
            tool_response={},
        )  # fmt: skip
        end = self._hook("PostToolBatch", tool_calls=[])
        stop = self._hook("Stop", stop_hook_active=False, last_assistant_message="done")
        events = f"{hook} < {post} && {hook} < {end} && {hook} < {stop}"
        return f"{hook} < {pre} && {{ {command}; }} && {events}"

    def run_operation(self, op: str, budget: int) -> None:
        """Trace ``op`` once, then check up to ``budget`` of its distinct crash states."""
        h = self.harness
        argv, stdin, target = self.prepare(op)
        before = picture(h.root)
        batches_before = len(h.json("log")["batches"])
        self.snapshots_before = len(h.json("snapshots")["snapshots"])
        self._copy([(live, base) for base, live in self.pairs])
        proc, ops = record(
            argv,
            [str(h.root), str(h.home)],
            self.to_base,
            self.from_base,
            self.trace,
            cwd=h.root,
            env=h.env(),
            input=stdin,
        )
        if proc.returncode not in (0, 3):
            raise RuntimeError(f"{' '.join(argv)} -> {proc.returncode}\n{proc.stderr}")
        self.report.runs += 1
        self.report.ops_traced += len(ops)
        made = json.loads(proc.stdout)["id"] if op in ("session", "fork") else None
        model = Persistence(ops, self.names)
        self.report.barriers += len(model.barriers()) - 1
        for _base, live in self.pairs:
            aside = self.after / live.name
            if aside.exists():
                shutil.rmtree(aside)
            live.rename(aside)
        self._check_replay(ops)
        for state in self._choose(model, budget):
            self._check_state(op, model, state, before, target, batches_before, made)
        for _, live in self.pairs:
            shutil.rmtree(live)
            (self.after / live.name).rename(live)
        if self.own_session is not None:  # back to the harness's session after a hook batch
            h.session, self.own_session = self.own_session, None

    def _check_replay(self, ops: list[Op]) -> None:
        tree = self.tree()
        for op in ops:
            tree.apply(op)
        materialize(tree, self.pairs, self.to_base)
        for _, live in self.pairs:
            want = _without_locks(picture(self.after / live.name))
            got = _without_locks(picture(live))
            if want != got:
                raise TraceError(f"the replayed run differs from the real one: {_delta(want, got)}")

    def _choose(self, model: Persistence, budget: int) -> list[CrashState]:
        """Distinct states, up to the budget: those at the barriers first, then random cuts.

        At a barrier durability changes, so its states are the ones a missing
        sync shows in; the random cuts between find the rest.
        """
        at_barriers: list[CrashState] = []
        for cut in model.barriers():
            at_barriers += model.states(cut, self.rng)
        self.rng.shuffle(at_barriers)
        between: list[CrashState] = []
        for _ in range(0 if self.barriers_only else budget):
            between += model.states(self.rng.randrange(len(model.ops) + 1), self.rng)
        chosen: list[CrashState] = []
        for state in at_barriers + between:
            if len(chosen) >= budget:
                break
            if self.variants and state.variant not in self.variants:
                continue
            key = digest(model.build(state, self.tree()))
            if key not in self.seen:
                self.seen.add(key)
                chosen.append(state)
        return chosen

    def _check_state(
        self,
        op: str,
        model: Persistence,
        state: CrashState,
        before: Picture,
        target: Picture | None,
        batches_before: int,
        made: str | None,
    ) -> None:
        h = self.harness
        materialize(model.build(state, self.tree()), self.pairs, self.to_base)
        self.report.states += 1
        self.report.by_operation[op] = self.report.by_operation.get(op, 0) + 1
        h.verified = set()  # another state: verify every object again
        h.report.kills = self.report.states
        found = len(h.report.violations)
        if state.cut == len(model.ops):
            self._check_promise(op, target, batches_before)
            if made is not None:
                self._check_made(op, made)
        h.check_after(op, before, target, killed=True, batches_before=batches_before)
        for line in h.report.violations[found:]:
            self.report.violations.append(f"{line} [{state.describe()}]")
            if self.verbose:
                print(f"VIOLATION {line} [{state.describe()}]", file=sys.stderr, flush=True)

    def _check_promise(self, op: str, target: Picture | None, batches_before: int) -> None:
        """The command returned: what it said it did is on the disk, before anything runs."""
        h = self.harness
        if op == "snapshot" and len(h.json("snapshots")["snapshots"]) != self.snapshots_before + 1:
            h.violation(op, "the snapshot it said it took is gone")
        if op in ("bash", "exec", "undo", "redo", "hook"):
            batches = len(h.json("log")["batches"])
            if batches != batches_before + 1:
                h.violation(op, f"its batch is gone: {batches} batches, {batches_before} before")
        if op in ("undo", "redo", "restore") and target is not None:
            now = picture(h.root)
            if now != target:
                h.violation(op, f"the tree it said it restored is not there: {_delta(target, now)}")

    def _check_made(self, op: str, made: str) -> None:
        """The command returned: the session it printed is there, with its log's prompts."""
        h = self.harness
        listed = {s["id"]: s for s in h.json("sessions")["sessions"]}
        if made not in listed:
            h.violation(op, f"the session {op} made is gone: {made}")
        elif op == "fork" and (not listed[made]["has_log"] or listed[made]["prompts"] < 2):
            h.violation(op, f"the fork lost its conversation: {listed[made]}")


def explore(
    states: int,
    seed: int,
    files: int,
    work: Path | None = None,
    operations: tuple[str, ...] = POWER_OPERATIONS,
    per_run: int = 8,
    names: str = "strict",
    verbose: bool = False,
    variants: tuple[str, ...] = (),
    barriers_only: bool = False,
    runs: int | None = None,
) -> Report:
    """Check ``states`` distinct crash states, ``per_run`` at most from each traced run.

    ``variants`` (names from ``crash_states.Persistence.states``) and
    ``barriers_only`` narrow the choice, for a test aimed at one sync;
    ``runs`` stops after that many traced runs, whatever the count.
    """
    with tempfile.TemporaryDirectory(dir=work) as tmp:
        explorer = Explorer(Path(tmp), files, seed, names, variants, barriers_only)
        explorer.verbose = verbose
        i = 0
        while explorer.report.states < states:
            op = operations[i % len(operations)]
            explorer.run_operation(op, min(per_run, states - explorer.report.states))
            i += 1
            if verbose and i % len(operations) == 0:
                r = explorer.report
                print(f"states {r.states}, violations {len(r.violations)}", file=sys.stderr)
            if i > 50 * max(1, states) or (runs is not None and i >= runs):
                break
        return explorer.report


def _in_parallel(args: argparse.Namespace) -> Report:
    """``args.jobs`` explorers at once (seeds seed, seed+1, ...); their reports summed."""
    share = [args.states // args.jobs + (i < args.states % args.jobs) for i in range(args.jobs)]
    children = []
    for i, states in enumerate(share):
        argv = [sys.executable, __file__, "--states", str(states), "--seed", str(args.seed + i)]
        argv += ["--files", str(args.files), "--per-run", str(args.per_run)]
        argv += ["--names", args.names, "--ops", args.ops, "--json"]
        if args.work is not None:
            argv += ["--work", str(args.work)]
        children.append(subprocess.Popen(argv, stdout=subprocess.PIPE, text=True))
    total = Report()
    for child in children:
        out, _ = child.communicate()
        if not out.strip():
            raise RuntimeError(f"an explorer failed (exit {child.returncode})")
        doc = json.loads(out)
        total.states += doc["states"]
        total.runs += doc["runs"]
        total.ops_traced += doc["ops_traced"]
        total.barriers += doc["barriers"]
        for op, count in doc["by_operation"].items():
            total.by_operation[op] = total.by_operation.get(op, 0) + count
        total.violations += doc["violations"]
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--states", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--files", type=int, default=300)
    parser.add_argument("--per-run", type=int, default=8, help="crash states per traced run")
    parser.add_argument("--names", choices=("strict", "ext4"), default="strict")
    parser.add_argument("--work", type=Path, default=None)
    parser.add_argument("--ops", default=",".join(POWER_OPERATIONS))
    parser.add_argument("--json", action="store_true", help="print the report as one JSON document")
    parser.add_argument(
        "--jobs", type=int, default=1, help="explorers at once, each its own tree and seed"
    )
    args = parser.parse_args()
    start = time.monotonic()
    if args.jobs > 1:
        report = _in_parallel(args)
    else:
        report = explore(
            args.states,
            args.seed,
            args.files,
            args.work,
            tuple(args.ops.split(",")),
            args.per_run,
            args.names,
            verbose=not args.json,
        )
    seconds = time.monotonic() - start
    if args.json:
        doc = {**report.__dict__, "seconds": seconds, "seed": args.seed, "names": args.names}
        print(json.dumps(doc))
        sys.exit(1 if report.violations else 0)
    print(f"crash states checked: {report.states}")
    print(f"by operation: {json.dumps(report.by_operation, sort_keys=True)}")
    print(f"traced runs: {report.runs}, operations {report.ops_traced}, barriers {report.barriers}")
    print(f"violations: {len(report.violations)}")
    for line in report.violations:
        print(f"  {line}")
    print(f"seconds: {seconds:.0f}")
    sys.exit(1 if report.violations else 0)


if __name__ == "__main__":
    main()
