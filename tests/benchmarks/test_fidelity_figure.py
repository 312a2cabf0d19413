"""The undo fidelity figure's core on a small generated repository: earshot's
undo gives every bad run back without losing the person's work, and the
measure tells that from shadow git's ``reset --hard``, which loses it."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from benchmarks import gen_tree
from benchmarks.figures import fidelity
from benchmarks.suite import badruns

pytestmark = pytest.mark.slow


def test_earshot_undo_loses_nothing_where_shadow_git_reset_loses_the_persons_edit(
    tmp_path: Path,
) -> None:
    gen_tree.generate(tmp_path / "pristine", 300, 1)
    earshot = shutil.which("earshot")
    assert earshot is not None
    peers = ("earshot-daemon", "earshot", "shadow-git")
    found = fidelity.measure(tmp_path / "pristine", tmp_path / "work", earshot, "small", peers)
    rows = {(row.scenario, row.peer): (row, verdict) for row, verdict in found}
    assert len(rows) == 8 * len(peers)

    for (scenario, peer), (row, verdict) in rows.items():
        if not peer.startswith("earshot"):
            continue
        assert row.changed > 0, scenario
        assert row.persons_lost == 0, (peer, scenario, verdict.persons_lost)
        # Small ignored build output too: read before git clean -fdx deletes it.
        assert row.bytes_lost == 0, (peer, scenario, verdict.lost)
        if scenario != "a build writing outputs":  # new build output stays: existence only
            assert row.wrong == 0, (peer, scenario, row.detail)
            assert row.restored == row.changed, (peer, scenario)

    row, verdict = rows[("the person's hand edit", "shadow-git")]
    assert row.wrong == 0, row.detail  # the agent's own changes are all taken back
    # ... and reset --hard takes back the person's edit, clean -fd deletes their notes.
    assert row.persons_lost == 2, verdict.persons_lost
    assert badruns.PERSON_NOTES in verdict.persons_lost
    assert row.bytes_lost > 0
