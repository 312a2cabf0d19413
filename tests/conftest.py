"""Shared test settings: a fixed Hypothesis profile and an isolated data home."""

from __future__ import annotations

import os
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
