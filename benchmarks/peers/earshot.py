"""earshot as a snapshot peer: whole ``earshot`` commands, as a person runs them."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

from benchmarks.peers.base import disk_usage

EXIT_SKIPPED = 3  # done, but some paths were skipped (listed)


class EarshotError(RuntimeError):
    """An earshot command failed; carries its argv and stderr."""


class EarshotPeer:
    """The ``earshot`` console script, with ``EARSHOT_HOME`` its own directory.

    ``watch="never"`` times the store's own walk; ``"always"`` lets the root's
    watch daemon answer (the per-call figures time both). ``name`` is the
    peer's name in the results: ``earshot-base`` for a second install
    (``--base``) timed beside this one.
    """

    def __init__(
        self, exe: str, tree: Path, store: Path, watch: str = "never", name: str = "earshot"
    ) -> None:
        self.name = name
        self.exe = exe
        self.tree = tree
        self.store = store
        self.watch = watch
        self.generation = 0
        self.home = store / "home-0"
        self.reported: float | None = None  # the last command's own "seconds"

    @property
    def env(self) -> dict[str, str]:
        return {**os.environ, "EARSHOT_HOME": str(self.home), "EARSHOT_WATCH": self.watch}

    def run(self, *args: str, ok: tuple[int, ...] = (0,), stdin: str | None = None) -> Any:
        """One command with --json; its document."""
        argv = [self.exe, *args, "--root", str(self.tree), "--json"]
        proc = subprocess.run(
            argv, env=self.env, input=stdin, capture_output=True, text=True, check=False
        )
        if proc.returncode not in ok:
            raise EarshotError(f"{' '.join(argv)} exited {proc.returncode}: {proc.stderr.strip()}")
        doc = json.loads(proc.stdout) if proc.stdout.strip() else {}
        seconds = doc.get("seconds") if isinstance(doc, dict) else None
        self.reported = float(seconds) if isinstance(seconds, int | float) else None
        return doc

    def init(self) -> None:
        self.stop_daemon()
        self.generation += 1
        self.home = self.store / f"home-{self.generation}"
        self.home.mkdir(parents=True)

    def snapshot(self) -> str:
        return str(self.run("snapshot", "-m", "checkpoint")["id"])

    def restore(self, ref: str) -> None:
        self.run("restore", ref, "--force", ok=(0, EXIT_SKIPPED))

    def gc(self) -> None:
        self.run("gc", "--compact")

    def store_bytes(self) -> int:
        return disk_usage(self.home)

    def stop_daemon(self) -> None:
        """Stop the root's watch daemon, if this peer started one."""
        if self.watch != "never" and self.home.exists():
            subprocess.run(
                [self.exe, "watch", "--stop", "--root", str(self.tree)],
                env=self.env,
                capture_output=True,
                check=False,
            )
