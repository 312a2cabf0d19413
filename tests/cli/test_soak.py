"""The soak's short run: every kind of session at once through the daemon, a few batches each.

The full run (four sessions, a hundred batches each) is ``python tests/soak.py``;
see its docstring for what each check means.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from soak import run_soak
from soak_agents import ROLES
from soak_checks import RSS_BOUND_MIB


@pytest.mark.slow
@pytest.mark.watcher
def test_sessions_at_once_through_the_daemon_undo_exactly_stay_flat_and_leave_nothing(
    tmp_path: Path,
) -> None:
    report = run_soak(sessions=len(ROLES), batches=6, seed=3, work=tmp_path)
    assert report.violations == []
    # Every kind of session ran its batches, and each window's undo was checked.
    assert report.roles[: report.sessions] == list(ROLES)
    assert report.batches == 6 * len(ROLES)
    assert report.undos == report.windows >= len(ROLES)
    # Along the way: the daemon stopped and started again by the next command,
    # the old snapshot forgotten, gc run while the sessions waited.
    assert report.restart["stopped"] and report.restart["started"] != report.restart["stopped"]
    assert report.forgotten and report.gc["attempts"] >= 1
    # Its memory, judged after warm-up.
    judged = [d for d in report.rss["daemons"] if "warm" in d]
    assert judged and all(d["growth_mib"] <= RSS_BOUND_MIB for d in judged)
    # Nothing left once the daemon stopped.
    left = report.leftovers
    assert left["processes"] == left["temp_files"] == left["locks_held"] == left["intents"] == []
    assert left["fsck"] == "clean"
