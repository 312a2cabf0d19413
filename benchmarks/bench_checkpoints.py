"""Per-call checkpoint cost and undo, earshot against shadow git, side by side.

The peer checkpoints an agent's call the way shadow-git tools do: after the
call, ``git add -A`` + ``git commit`` with GIT_DIR outside the tree; it undoes
a call with ``git reset --hard HEAD~1`` + ``git clean -fdq``. earshot runs the
same call through its CLI (``earshot bash``, ``earshot write``) in a session,
and undoes it with ``earshot undo``. Each figure is a whole command (or the
peer's command sequence) timed with ``time.perf_counter``, tools alternating.

    python benchmarks/bench_checkpoints.py --files 10000 100000 --repeat 5 \\
        --out benchmarks/results-checkpoints.json

With ``--watch never`` every earshot CLI call is the first mutating call of
its process, so it restages the whole tree first (the snapshot policy); with
``--watch always`` the watch daemon vouches for the tree and a call restages
only what changed, and runs it in a worker forked from the daemon (the thin
client). ``--watch never always`` times both, each on its own copy of the
tree, against the same git runs.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import gen_tree
import shapes
from bench_store import (
    BENCH_DIR,
    Scenario,
    default_earshot,
    log,
    machine_info,
    machine_markdown,
    markdown_table,
    summarize,
    timed,
)
from shadow_git import ShadowGit


class EarshotCalls:
    """The earshot CLI in one session on its own copy of the tree."""

    name = "earshot"

    def __init__(self, exe: str, tree: Path, home: Path, watch: str, name: str = "earshot") -> None:
        self.name = name
        self.mode = watch
        self.exe = exe
        self.tree = tree
        self.env = dict(os.environ, EARSHOT_HOME=str(home), EARSHOT_WATCH=watch)

    def _run(self, *argv: str, stdin: bytes | None = None, ok: Sequence[int] = (0,)) -> str:
        out = subprocess.run(
            [self.exe, *argv],
            cwd=self.tree,
            env=self.env,
            input=stdin,
            capture_output=True,
            check=False,
        )
        if out.returncode not in ok:
            raise RuntimeError(f"earshot {' '.join(argv)}: {out.stderr.decode()}")
        return out.stdout.decode()

    def setup(self) -> None:
        self.env["EARSHOT_SESSION"] = self._run("session", "new").strip()
        self._run("snapshot", "-m", "start")

    def bash(self, command: str) -> None:
        self._run("bash", command)

    def write(self, path: str, data: bytes) -> None:
        self._run("write", path, stdin=data)

    def exec_writes(self, paths: list[str], data: bytes) -> None:
        calls = [{"tool": "write_file", "path": p, "content": data.decode()} for p in paths]
        self._run("exec", stdin=json.dumps(calls).encode())

    def undo(self) -> None:
        self._run("undo", ok=(0, 3))

    def snapshot(self) -> str:
        doc = json.loads(self._run("snapshot", "--json"))
        return str(doc["id"])

    def restore(self, ref: str) -> None:
        self._run("restore", ref, "--force", ok=(0, 3))

    def close(self) -> None:
        self._run("watch", "--stop", ok=(0, 1))


class GitCalls:
    """Shadow git: the call, then add -A + commit; undo by reset --hard + clean."""

    name = "git"

    def __init__(self, tree: Path, git_dir: Path) -> None:
        self.tree = tree
        self.git = ShadowGit(tree, git_dir)

    def setup(self) -> None:
        self.git.init()
        self.git.snapshot("start")

    def bash(self, command: str) -> None:
        subprocess.run(["sh", "-c", command], cwd=self.tree, check=True)
        self.git.snapshot("call")

    def write(self, path: str, data: bytes) -> None:
        (self.tree / path).write_bytes(data)
        self.git.snapshot("call")

    def exec_writes(self, paths: list[str], data: bytes) -> None:
        for path in paths:
            (self.tree / path).write_bytes(data)
        self.git.snapshot("call")

    def undo(self) -> None:
        head = self.git.git("rev-parse", "HEAD~1").strip()
        self.git.restore_reset_clean(head)

    def snapshot(self) -> str:
        return self.git.snapshot("snapshot")

    def restore(self, ref: str) -> None:
        self.git.restore_reset_clean(ref)

    def close(self) -> None:
        return None


Tool = EarshotCalls | GitCalls


def edit_ten(tree: Path, names: list[str], round_: int) -> str:
    """A shell command that appends a line to ten files (the undo scenario's call)."""
    targets = " ".join(f"'{n}'" for n in names)
    return f"for f in {targets}; do echo 'edit {round_}' >> \"$f\"; done"


def make_tree(tree: Path, files: int, args: argparse.Namespace) -> None:
    """The tree of one tool: a copy of ``--tree``, a ``--shape``, or the generated tree."""
    if args.tree:
        log(f"copying {args.tree} into {tree}")
        subprocess.run(["cp", "-a", str(args.tree), str(tree)], check=True)
    elif args.shape != "generated":
        log(f"making a {args.shape} tree of {files:,} files in {tree}")
        shapes.SHAPES[args.shape](tree, files, args.seed)
    else:
        log(f"generating {files:,} files into {tree}")
        gen_tree.generate(tree, files, args.seed)


def bench_size(files: int, args: argparse.Namespace, exe: str) -> list[dict[str, Any]]:
    """One tree size: an entry per earshot watch mode, against the same git runs."""
    work = Path(args.work) / f"calls-{args.shape}-{files}"
    trees = {mode: work / f"tree-earshot-{mode}" for mode in args.watch}
    if args.base:
        trees |= {f"base-{mode}": work / f"tree-base-{mode}" for mode in args.watch}
    trees["git"] = work / "tree-git"
    if work.exists():
        subprocess.run(["rm", "-rf", str(work)], check=True)
    work.mkdir(parents=True)
    for tree in trees.values():
        make_tree(tree, files, args)
    earshots = [
        EarshotCalls(exe, trees[mode], work / f"earshot-home-{mode}", mode) for mode in args.watch
    ]
    if args.base:  # the code before a change, on its own tree, in the same run
        earshots += [
            EarshotCalls(
                args.base, trees[f"base-{mode}"], work / f"base-home-{mode}", mode, name="base"
            )
            for mode in args.watch
        ]
    tools: list[Tool] = [*earshots, GitCalls(trees["git"], work / "shadow.git")]
    for tool in tools:
        log(f"setting up {tool.name}")
        tool.setup()
    time.sleep(2.5)  # let fresh files age past the racy-entry margin, as real trees are
    first = trees[args.watch[0]]
    names = (
        sorted(
            str(p.relative_to(first))
            for p in first.rglob("*")
            if p.is_file()
            and p.suffix in (".c", ".h", ".js", ".py", ".txt", ".md")
            and "node_modules" not in p.parts
        )[::997][:10]
        if args.tree or args.shape != "generated"
        else (gen_tree.choose_mutation_targets(first, 10, args.seed + 7))
    )

    def scenarios() -> list[Scenario]:
        return [
            Scenario("bash_true", "per call: `bash 'true'` (git: add -A + commit)", "s"),
            Scenario("write_one", "per call: one-file write_file batch", "s"),
            Scenario("bash_ten", "per call: `bash` creating 10 files", "s"),
            Scenario("exec_ten", "per call: an exec batch of 10 write_file calls", "s"),
            Scenario("undo_ten", "undo a 10-file batch (git: reset --hard + clean)", "s"),
            Scenario("snapshot_same", "`snapshot`, nothing changed (git: add -A + commit)", "s"),
            Scenario(
                "restore_ten", "`restore --force`, 10 files differ (git: reset --hard + clean)", "s"
            ),
            Scenario(
                "outside_ten",
                "`bash 'true'` after 10 files changed outside any call (git: add -A + commit)",
                "s",
            ),
        ]

    by_mode = {mode: {s.key: s for s in scenarios()} for mode in args.watch}

    def add(tool: Tool, key: str, value: float) -> None:
        # git's samples count against every mode; an earshot's against its own.
        for mode, by_key in by_mode.items():
            if isinstance(tool, GitCalls) or tool.mode == mode:
                by_key[key].add(tool, value)  # type: ignore[arg-type]

    for repeat in range(args.repeat):
        order = tools if repeat % 2 == 0 else tools[::-1]
        for tool in order:
            label = tool.name if isinstance(tool, GitCalls) else f"{tool.name} ({tool.mode})"
            log(f"{files:,} files, repeat {repeat + 1}/{args.repeat}: {label}")
            runs: list[tuple[str, Callable[[], None]]] = [
                ("bash_true", lambda t=tool: t.bash("true")),
                ("write_one", lambda t=tool, r=repeat: t.write(f"note-{r}.txt", b"x\n" * 40)),
                (
                    "bash_ten",
                    lambda t=tool, r=repeat: t.bash(
                        f"mkdir -p new-{r} && for i in 0 1 2 3 4 5 6 7 8 9; "
                        f"do echo $i > new-{r}/f$i.txt; done"
                    ),
                ),
                (
                    "exec_ten",
                    lambda t=tool, r=repeat: t.exec_writes(
                        [f"batch-{r}-{i}.txt" for i in range(10)], b"y\n" * 30
                    ),
                ),
            ]
            for key, action in runs:
                add(tool, key, timed(action, args.sync))
            tool.bash(edit_ten(tool.tree, names, repeat))  # the batch to undo, untimed
            add(tool, "undo_ten", timed(tool.undo, args.sync))
            add(tool, "snapshot_same", timed(tool.snapshot, args.sync))
            target = tool.snapshot()
            tool.bash(edit_ten(tool.tree, names, repeat + 100))  # what the restore undoes
            add(tool, "restore_ten", timed(lambda t=tool, s=target: t.restore(s), args.sync))
            tool.bash("true")  # a batch ends on the tree as it is: the settled state
            for name in names:  # the person edits ten files between two calls
                with open(tool.tree / name, "a") as f:
                    f.write(f"by hand {repeat}\n")
            add(tool, "outside_ten", timed(lambda t=tool: t.bash("true"), args.sync))
    for tool in tools:
        tool.close()
    # What no Python client can go below: the interpreter and the modules the
    # thin client needs, started the same way.
    floor = summarize(
        [
            timed(
                lambda: subprocess.run(
                    [sys.executable, "-c", "import socket, json, subprocess"], check=True
                ),
                False,
            )
            for _ in range(args.repeat)
        ]
    )
    on_disk = [p for p in trees["git"].rglob("*") if p.is_file() and ".git" not in p.parts]
    tree_bytes = sum(p.stat().st_size for p in on_disk)
    if args.tree:  # a real tree: its own count, not --files
        files = len(on_disk)
    return [
        {
            "python_floor_s": floor,
            "files": files,
            "shape": str(args.tree) if args.tree else args.shape,
            "watch": mode,
            "tree": {"bytes": tree_bytes},
            "scenarios": [s.to_json() for s in by_mode[mode].values()],
        }
        for mode in args.watch
    ]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, nargs="+", default=[10_000])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--work", default=str(BENCH_DIR / "work"))
    parser.add_argument("--out", default=str(BENCH_DIR / "results-checkpoints.json"))
    parser.add_argument("--no-sync", dest="sync", action="store_false")
    parser.add_argument(
        "--watch",
        nargs="+",
        choices=("never", "always"),
        default=["never"],
        help="EARSHOT_WATCH for earshot's calls: never (no daemon), always, or both",
    )
    parser.add_argument("--tree", type=Path, default=None, help="a real tree to copy and use")
    parser.add_argument(
        "--shape",
        choices=("generated", *sorted(shapes.SHAPES)),
        default="generated",
        help="the tree's shape when no --tree is given (--files counts its files)",
    )
    parser.add_argument(
        "--earshot", default=default_earshot(), help="the earshot executable (a regular install)"
    )
    parser.add_argument(
        "--base",
        default=None,
        help="another earshot (the code before a change) timed in the same run, on its own tree",
    )
    args = parser.parse_args(argv)
    exe = args.earshot
    if exe is None:
        print("earshot is not installed beside this python", file=sys.stderr)
        return 2
    Path(args.work).mkdir(parents=True, exist_ok=True)
    machine = machine_info(Path(args.work), exe)
    sizes = [entry for files in args.files for entry in bench_size(files, args, exe)]
    doc = {"machine": machine, "sizes": sizes}
    Path(args.out).write_text(json.dumps(doc, indent=2) + "\n")
    print(machine_markdown(machine))
    for size in sizes:
        print()
        print(f"EARSHOT_WATCH={size['watch']}, shape {size['shape']}")
        print(markdown_table(size))
        floor = size["python_floor_s"]["median"]
        print(f"python3 -c 'import socket, json, subprocess': {floor * 1000:.0f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
