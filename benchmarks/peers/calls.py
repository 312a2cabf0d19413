"""The peers as an agent's calls see them: a call, its checkpoint, the undo of a batch.

* ``earshot`` and ``earshot-daemon``: the call is an ``earshot`` command in a
  session (``bash``, ``write``, ``exec``), which records it; the undo is
  ``earshot undo``. ``earshot`` runs with ``EARSHOT_WATCH=never`` (every call
  walks the tree); ``earshot-daemon`` with ``always``, its daemon started and
  one call made before any is timed, as an agent's second call finds it;
* ``shadow-git``, ``opencode``, ``git-tuned``: the call itself (a shell
  command, or the files written by this process), then the peer's snapshot;
  the undo restores the checkpoint taken before the batch, the peer's way;
* ``file-backups``: a copy of each file a Write is about to change, nothing
  for a shell command; the undo is its restore of the turn's files.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Protocol

from benchmarks.peers.earshot import EXIT_SKIPPED, EarshotError, EarshotPeer
from benchmarks.peers.file_backups import FileBackups
from benchmarks.peers.git import GIT_PEERS, GitPeer

CALL_PEERS = ("earshot", "earshot-daemon", *GIT_PEERS, "file-backups")


class CallPeer(Protocol):
    """One way of checkpointing an agent's calls, on its own copy of a tree."""

    name: str
    tree: Path

    def setup(self) -> None:
        """A fresh store holding the tree as it is (not timed)."""

    def bash(self, command: str) -> None:
        """Run a shell command as one call, and checkpoint it."""

    def write(self, rel: str, data: bytes) -> None:
        """Write one file as one call, and checkpoint it."""

    def exec_writes(self, rels: list[str], data: bytes) -> None:
        """Write several files as one batch, and checkpoint it."""

    def mark(self) -> None:
        """A batch to undo starts here (not timed)."""

    def undo(self) -> None:
        """Bring back the tree as it was at the mark."""

    def close(self) -> None:
        """Stop whatever the peer left running."""


class EarshotCalls:
    """``earshot`` commands in one session, with or without the root's daemon."""

    def __init__(self, name: str, exe: str, tree: Path, store: Path) -> None:
        self.name = name
        self.tree = tree
        watch = "always" if name == "earshot-daemon" else "never"
        self.peer = EarshotPeer(exe, tree, store, watch=watch)
        self.session = ""

    def command(
        self,
        *args: str,
        stdin: bytes | None = None,
        ok: tuple[int, ...] = (0,),
        watch: str | None = None,
    ) -> str:
        """One whole command, run in the tree as an agent runs it; its stdout."""
        env = dict(self.peer.env, EARSHOT_SESSION=self.session)
        if watch is not None:
            env["EARSHOT_WATCH"] = watch
        argv = [self.peer.exe, *args, "--root", str(self.tree)]
        proc = subprocess.run(
            argv, cwd=self.tree, env=env, input=stdin, capture_output=True, check=False
        )
        if proc.returncode not in ok:
            raise EarshotError(
                f"{' '.join(argv)} exited {proc.returncode}: {proc.stderr.decode().strip()}"
            )
        return proc.stdout.decode()

    def setup(self) -> None:
        self.peer.init()
        self.session = self.command("session", "new").strip()
        # The first recording walks the whole tree; it is never the daemon's.
        self.command("snapshot", "-m", "start", watch="never")
        if self.peer.watch == "always":
            self.start_daemon()
        self.command("bash", "true")  # the first call; the next ones are timed

    def start_daemon(self) -> None:
        """``earshot watch``: returns once the daemon answers, every watch placed."""
        doc = json.loads(self.command("watch", "--json"))
        if not doc.get("running"):
            raise EarshotError(f"earshot watch: the daemon did not start: {doc}")

    def status(self) -> dict[str, object]:
        """``earshot watch --status``'s document."""
        doc: dict[str, object] = json.loads(self.command("watch", "--status", "--json"))
        return doc

    def bash(self, command: str) -> None:
        self.command("bash", command)

    def write(self, rel: str, data: bytes) -> None:
        self.command("write", rel, stdin=data)

    def exec_writes(self, rels: list[str], data: bytes) -> None:
        calls = [{"tool": "write_file", "path": r, "content": data.decode()} for r in rels]
        self.command("exec", stdin=json.dumps(calls).encode())

    def mark(self) -> None:
        return None  # the session's last batch is what undo takes back

    def undo(self) -> None:
        self.command("undo", ok=(0, EXIT_SKIPPED))

    def close(self) -> None:
        self.peer.stop_daemon()


class GitCalls:
    """The call, then the git peer's snapshot; undo: its restore of the mark."""

    def __init__(self, name: str, tree: Path, store: Path) -> None:
        self.name = name
        self.tree = tree
        self.git = GitPeer(name, tree, store)
        self.last = ""  # the checkpoint after the latest call
        self.marked = ""

    def setup(self) -> None:
        self.git.init()
        self.last = self.git.snapshot()

    def bash(self, command: str) -> None:
        subprocess.run(["sh", "-c", command], cwd=self.tree, check=True)
        self.last = self.git.snapshot()

    def write(self, rel: str, data: bytes) -> None:
        (self.tree / rel).write_bytes(data)
        self.last = self.git.snapshot()

    def exec_writes(self, rels: list[str], data: bytes) -> None:
        for rel in rels:
            (self.tree / rel).write_bytes(data)
        self.last = self.git.snapshot()

    def mark(self) -> None:
        self.marked = self.last

    def undo(self) -> None:
        self.git.restore(self.marked)

    def close(self) -> None:
        self.git.stop_daemon()


class BackupCalls:
    """Per-file backups: a copy before each Write; a shell command is not seen."""

    def __init__(self, tree: Path, store: Path) -> None:
        self.name = "file-backups"
        self.tree = tree
        self.backups = FileBackups(tree, store)

    def setup(self) -> None:
        self.backups.init()

    def bash(self, command: str) -> None:
        subprocess.run(["sh", "-c", command], cwd=self.tree, check=True)

    def write(self, rel: str, data: bytes) -> None:
        self.backups.before_edit(rel)
        (self.tree / rel).write_bytes(data)

    def exec_writes(self, rels: list[str], data: bytes) -> None:
        for rel in rels:
            self.write(rel, data)

    def mark(self) -> None:
        self.backups.init()  # a new turn: its backups are the ones a rewind restores

    def undo(self) -> None:
        self.backups.restore()

    def close(self) -> None:
        return None


def make_calls(name: str, tree: Path, store: Path, earshot: str) -> CallPeer:
    """The call peer called ``name`` on ``tree``, its store under ``store``."""
    if name in ("earshot", "earshot-daemon"):
        return EarshotCalls(name, earshot, tree, store)
    if name == "file-backups":
        return BackupCalls(tree, store)
    return GitCalls(name, tree, store)
