"""Finding, or installing once, the pinned agent binaries.

Tests drive exact versions: a hook payload or a flag can change between
releases. npm installs them into ``$EARSHOT_AGENTS_DIR`` (default
``<repo>/.agents``) the first time a test needs one, under a file lock so
that parallel test processes install once between them.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import subprocess
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Literal

REPO: Final = Path(__file__).resolve().parents[2]
AGENTS_DIR_VARIABLE: Final = "EARSHOT_AGENTS_DIR"

Agent = Literal["claude", "codex", "gemini"]


@dataclass(frozen=True)
class Package:
    """One pinned npm package and the command it installs."""

    name: str
    version: str
    command: str

    @property
    def spec(self) -> str:
        return f"{self.name}@{self.version}"


PACKAGES: Final[Mapping[Agent, Package]] = {
    "claude": Package("@anthropic-ai/claude-code", "2.1.328", "claude"),
    "codex": Package("@openai/codex", "0.171.0", "codex"),
    "gemini": Package("@google/gemini-cli", "0.61.0", "gemini"),
}


def agents_dir() -> Path:
    """Where the agents are installed: ``$EARSHOT_AGENTS_DIR``, else ``<repo>/.agents``."""
    return Path(os.environ.get(AGENTS_DIR_VARIABLE) or REPO / ".agents")


def _installed(package: Package, directory: Path) -> bool:
    manifest = directory / "node_modules" / package.name / "package.json"
    command = directory / "node_modules" / ".bin" / package.command
    try:
        version = json.loads(manifest.read_text()).get("version")
    except (OSError, ValueError):
        return False
    return version == package.version and command.exists()


@contextlib.contextmanager
def _locked(directory: Path) -> Iterator[None]:
    """One installer at a time: pytest-xdist workers may all find the binary missing."""
    directory.mkdir(parents=True, exist_ok=True)
    with open(directory / ".install.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def binary(agent: Agent) -> Path:
    """The pinned agent's command, installed with npm first if it is missing."""
    directory = agents_dir()
    package = PACKAGES[agent]
    if not _installed(package, directory):
        with _locked(directory):
            missing = [p.spec for p in PACKAGES.values() if not _installed(p, directory)]
            if missing:  # all of them in one npm run; another process may have done it
                npm = ["npm", "install", "--no-audit", "--no-fund", "--save-exact"]
                command = [*npm, "--prefix", str(directory), *missing]
                subprocess.run(command, check=True, stdin=subprocess.DEVNULL)
    return directory / "node_modules" / ".bin" / package.command
