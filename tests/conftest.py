"""Shared test settings: a fixed Hypothesis profile and an isolated data home."""

from __future__ import annotations

import hashlib
import os
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import settings

# Fixed and reproducible: the same examples on every run, no example database.
settings.register_profile("ci", max_examples=50, deadline=None, derandomize=True, database=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


@pytest.fixture
def earshot_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """EARSHOT_HOME pointed at a fresh directory, so no test touches the real store."""
    home = tmp_path / "earshot-home"
    monkeypatch.setenv("EARSHOT_HOME", str(home))
    return home


@pytest.fixture(autouse=True)
def no_watch_daemon_unless_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    """Commands never start a watch daemon by themselves in tests.

    With EARSHOT_WATCH=auto a test that lowers the restage budget would start
    real daemons and change what it measures; watcher tests ask explicitly.
    """
    monkeypatch.setenv("EARSHOT_WATCH", "never")


def run_git(root: Path, *args: str) -> str:
    """git in ``root`` with no user or system configuration, and no optional locks."""
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(root.parent),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.com",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.com",
        "LC_ALL": "C",
    }
    proc = subprocess.run(
        ["git", "--no-optional-locks", *args],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return proc.stdout


def digest_dir(top: Path) -> dict[str, str]:
    """Every entry under ``top``: kind, mode, mtime and a digest of its bytes."""
    out: dict[str, str] = {}
    for dirpath, dirnames, filenames in os.walk(top):
        for name in [*dirnames, *filenames]:
            path = Path(dirpath) / name
            st = path.lstat()
            rel = path.relative_to(top).as_posix()
            if path.is_symlink():
                out[rel] = f"link {os.readlink(path)}"
            elif path.is_dir():
                out[rel] = f"dir {st.st_mode:o}"
            else:
                digest = hashlib.sha256(path.read_bytes()).hexdigest()
                out[rel] = f"file {st.st_mode:o} {st.st_mtime_ns} {digest}"
    return out


@pytest.fixture
def git() -> Callable[..., str]:
    """``git(root, *args)``: run git in a test repository (the user's, in these tests)."""
    return run_git


@pytest.fixture
def dir_digest() -> Callable[[Path], dict[str, str]]:
    """``dir_digest(top)``: everything under ``top``, to prove it untouched."""
    return digest_dir
