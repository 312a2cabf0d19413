"""Undo fidelity: what each approach gives back after a bad agent run.

The tree is made a git repository with history and a developer's ignored
files (benchmarks/suite/badruns.py): an old commit and a newer one, a
``.env``, a local database, build output. Then eight scripted bad runs
(``rm -rf`` of a source directory, ``sed -i`` across 1,000 files, ``git
checkout`` of the old commit, ``git clean -fdx``, ``.env`` and the database
deleted, ``mv`` of a directory holding an ignored file, a build writing
ignored output, and a run of plain edits), each a few agent calls with the
person's hand edit between two of them: a tracked file no call touches
gets a paragraph, and a notes file of theirs appears. Each run starts from
the repository as it was made, for each peer in turn (one copy, put back
between runs by rewriting what differs, and checked), and the peer undoes
it its own way, as the agents do:

* ``earshot`` (``EARSHOT_WATCH=never``) and ``earshot-daemon`` (the default,
  the root's watch daemon started by the first call): every call through
  ``earshot bash`` / ``write`` / ``edit`` in one session; then ``earshot undo
  N``, N being the calls that changed something (what ``earshot log``
  lists; undo steps over the others). Exit 3, a conflict left alone, is a
  done undo. ``--quick`` runs the default only; both agreed on every run
  of the 10,000-file tree. On the kernel tree, without the daemon, a
  command not judged destructive is folded into the next snapshot and
  the undo steps around it (benchmarks/README.md, "Undo fidelity");
* ``shadow-git`` (Cline, Gemini CLI): ``add -A`` + ``commit`` into a
  repository outside the tree before each call; ``reset --hard`` +
  ``clean -fd`` to the first;
* ``opencode``: ``add .`` + ``write-tree`` before each call; ``read-tree`` +
  ``checkout-index -a -f`` of the first;
* ``file-backups`` (Claude Code's checkpoints, dsh-rewind): a copy of each
  file before a Write or Edit; shell commands unseen; the copies put back.

The restored tree is then held against what it should be: the tree before
the run plus the person's edits. Regular files and symlinks are compared
(content, kind, permission bits); ``.git`` is left out at every depth, the
project's own repository included: no peer restores it (earshot never
records ``.git``; the git peers keep their repository elsewhere), so a
``git checkout`` leaves HEAD at the old commit after every peer's restore,
which the row's detail says. The counts (benchmarks/suite/treestate.py):
files changed by the run, restored exactly, left wrong, the person's
files lost, and bytes lost: content that is neither anywhere in the
restored tree nor an object of the project's repository.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any, Protocol

from benchmarks.peers.earshot import EXIT_SKIPPED, EarshotError, EarshotPeer
from benchmarks.peers.file_backups import FileBackups
from benchmarks.peers.git import GitPeer
from benchmarks.suite import badruns, trees, treestate
from benchmarks.suite.badruns import Step
from benchmarks.suite.plan import Plan
from benchmarks.suite.progress import Progress
from benchmarks.suite.record import FidelityRow
from benchmarks.suite.runner import Context, Tree, alternate, tree_weight
from benchmarks.suite.trees import TreeSpec

NAME = "fidelity"
PEERS = ("earshot", "earshot-daemon", "shadow-git", "opencode", "file-backups")
#: --quick: earshot as it runs by default (the daemon) only; both modes agree.
QUICK_PEERS = PEERS[1:]
MAX_GENERATED = 10_000


class Undoer(Protocol):
    name: str

    def begin(self) -> None: ...

    def call(self, step: Step) -> None: ...

    def undo(self) -> str:
        """Undo the run the peer's own way; a note on how it went, or ""."""
        ...

    def close(self) -> None: ...


def do(tree: Path, step: Step, env: dict[str, str]) -> None:
    """An agent call made straight on disk, as an agent's own tools make it."""
    path = tree / step.arg
    if step.tool == "bash":
        subprocess.run(
            ["bash", "-c", step.arg], cwd=tree, env=env, capture_output=True, check=False
        )
    elif step.tool == "write":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(step.new)
    elif step.tool == "edit":
        text = path.read_text()
        if text.count(step.old) != 1:
            raise RuntimeError(f"edit of {step.arg}: the text to replace is not there once")
        path.write_text(text.replace(step.old, step.new))


class Checkpointed:
    """A git peer: a checkpoint before every call, the first one restored."""

    def __init__(self, name: str, tree: Path, store: Path, env: dict[str, str]) -> None:
        self.name = name
        self.tree, self.env = tree, env
        self.git = GitPeer(name, tree, store)
        self.first = ""

    def begin(self) -> None:
        self.git.init()
        # Borrow the project's objects (as `git clone --shared` does): the first
        # checkpoint then writes only what the project's repository lacks. The
        # restore is the same; only the untimed first checkpoint is cheaper.
        alternates = self.git.git_dir / "objects" / "info" / "alternates"
        alternates.write_text(f"{self.git.tree / '.git' / 'objects'}\n")

    def call(self, step: Step) -> None:
        ref = self.git.snapshot()
        self.first = self.first or ref
        do(self.tree, step, self.env)

    def undo(self) -> str:
        self.git.restore(self.first)
        return ""

    def close(self) -> None:
        self.git.destroy()


class Backups:
    """Per-file backups: Write and Edit seen, shell commands not."""

    name = "file-backups"

    def __init__(self, tree: Path, store: Path, env: dict[str, str]) -> None:
        self.tree, self.env = tree, env
        self.backups = FileBackups(tree, store)

    def begin(self) -> None:
        self.backups.init()

    def call(self, step: Step) -> None:
        if step.tool in ("write", "edit"):
            self.backups.before_edit(step.arg)
        do(self.tree, step, self.env)

    def undo(self) -> str:
        self.backups.restore()
        return ""

    def close(self) -> None:
        shutil.rmtree(self.backups.store, ignore_errors=True)


class _Earshot(EarshotPeer):
    def __init__(self, exe: str, tree: Path, store: Path, watch: str, env: dict[str, str]):
        super().__init__(exe, tree, store, watch)
        self.base_env = env

    @property
    def env(self) -> dict[str, str]:
        return {**self.base_env, "EARSHOT_HOME": str(self.home), "EARSHOT_WATCH": self.watch}


class Earshot:
    """Every call through earshot in one session; ``earshot undo N`` after."""

    def __init__(self, name: str, exe: str, tree: Path, store: Path, env: dict[str, str]):
        self.name = name
        watch = "auto" if name == "earshot-daemon" else "never"
        self.peer = _Earshot(exe, tree, store, watch, env)
        self.session = ""
        self.batches = 0  # calls that changed something: what undo counts
        self.uncovered: list[str] = []

    def begin(self) -> None:
        self.peer.init()
        self.session = str(self.peer.run("session", "new")["id"])

    def call(self, step: Step) -> None:
        args: tuple[str, ...]
        stdin = None
        if step.tool == "bash":
            args = ("bash", step.arg)
        elif step.tool == "write":
            args, stdin = ("write", step.arg), step.new
        else:
            args = ("edit", step.arg, f"--old={step.old}", f"--new={step.new}")
        doc = self.peer.run(*args, "--session", self.session, ok=tuple(range(256)), stdin=stdin)
        if "results" not in doc:
            raise EarshotError(f"earshot {args[0]}: {doc}")
        self.batches += bool(doc.get("changes"))
        self.uncovered += [str(u.get("path")) for u in doc.get("uncovered", [])]

    def undo(self) -> str:
        if not self.batches:
            return "nothing to undo"
        doc: dict[str, Any] = self.peer.run(
            "undo", str(self.batches), "--session", self.session, ok=(0, EXIT_SKIPPED)
        )
        notes = [f"undo {self.batches}"]
        for key in ("conflicts", "kept", "ambiguous"):
            if doc.get(key):
                notes.append(f"{len(doc[key])} {key}")
        if self.uncovered:
            notes.append(f"said not covered: {', '.join(sorted(set(self.uncovered))[:3])}")
        return ", ".join(notes)

    def close(self) -> None:
        self.peer.stop_daemon()


def undoer(name: str, exe: str, tree: Path, store: Path, env: dict[str, str]) -> Undoer:
    if name.startswith("earshot"):
        return Earshot(name, exe, tree, store, env)
    if name == "file-backups":
        return Backups(tree, store, env)
    return Checkpointed(name, tree, store, env)


def _head(root: Path, env: dict[str, str]) -> str:
    return badruns.git(root, env, "rev-parse", "HEAD").strip()


def measure(
    pristine: Path,
    work: Path,
    earshot: str,
    key: str,
    peers: tuple[str, ...] = PEERS,
    progress: Progress | None = None,
) -> list[tuple[FidelityRow, treestate.Verdict]]:
    """Every bad run on a fresh copy of the repository for every peer: a row
    each, with the verdict it was made from (which paths, for a test)."""
    say = progress.step if progress else (lambda _text: None)
    say("making the repository: two commits, the ignored files")
    repo = badruns.make_repo(pristine, work / "repo", work / "lists")
    env = badruns.git_env(work / "home")
    before = treestate.capture(repo.root)
    head = _head(repo.root, env)
    person = set(badruns.person_paths(repo))
    rows: list[tuple[FidelityRow, treestate.Verdict]] = []
    say("copying the repository")
    tree = trees.copy(repo.root, work / "copy")
    for i, (scenario, steps) in enumerate(badruns.runs(repo).items()):
        want: treestate.State | None = None
        after_run: treestate.State | None = None
        for name in alternate(peers, i):
            say(f"{scenario}: {name}")
            peer = undoer(name, earshot, tree, work / "stores" / name, env)
            peer.begin()
            try:
                for step in steps:
                    if step.tool == "person":
                        badruns.person_edit(tree, repo)
                    else:
                        peer.call(step)
                if want is None:
                    want = treestate.expected(before, tree, person)
                    after_run = treestate.capture(tree)
                note = peer.undo()
            finally:
                peer.close()
            assert after_run is not None
            got = treestate.capture(tree)
            blobs = treestate.in_repository(tree, treestate.blobs_to_look_up(want, got), env)
            v = treestate.judge(want, after_run, got, person, blobs)
            notes = [n for n in (note, v.describe(want, got)) if n]
            if _head(tree, env) != head:
                notes.append("HEAD left at the old commit (.git is no peer's to restore)")
            rows.append(
                (
                    FidelityRow(
                        key,
                        scenario,
                        name,
                        files=len(before),
                        restored=v.restored,
                        wrong=len(v.wrong),
                        persons_lost=len(v.persons_lost),
                        bytes_lost=v.bytes_lost,
                        detail="; ".join(notes),
                        changed=v.changed,
                    ),
                    v,
                )
            )
            shutil.rmtree(work / "stores" / name, ignore_errors=True)
            say(f"{scenario}: {name}: the copy put back as it was")
            treestate.repair(tree, repo.root, before, got)
            if _head(tree, env) != head:
                raise RuntimeError(f"{tree}: HEAD not back at {head} after the repair")
    return rows


class Fidelity:
    name = NAME
    title = "Undo fidelity"

    def applies(self, tree: TreeSpec, plan: Plan) -> bool:
        return tree.kind == "kernel" or (tree.kind == "generated" and tree.files <= MAX_GENERATED)

    def weight(self, tree: TreeSpec, plan: Plan) -> float:
        # Per run and peer: a copy, a capture and a few checkpoints of the tree.
        return tree_weight(tree) * len(self.peers(plan)) * 8 * 3

    def peers(self, plan: Plan) -> tuple[str, ...]:
        return QUICK_PEERS if plan.quick else PEERS

    def run(self, ctx: Context, tree: Tree) -> None:
        peers = self.peers(ctx.plan)
        rows = measure(tree.pristine, ctx.work, ctx.earshot, tree.key, peers, ctx.progress)
        ctx.results.fidelity.extend(row for row, _verdict in rows)


FIGURE = Fidelity()
