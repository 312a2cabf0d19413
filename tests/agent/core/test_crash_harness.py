"""The crash harness's fast subset: two seeded kills of every mutating operation.

The full run (240+ kills) is ``python tests/crash_harness.py``; see its docstring.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from crash_harness import OPERATIONS, run_harness


@pytest.mark.slow
def test_kills_at_random_instants_of_every_operation_lose_nothing(tmp_path: Path) -> None:
    report = run_harness(kills=2 * len(OPERATIONS), seed=7, files=1500, work=tmp_path)
    assert report.violations == []
    assert report.kills >= 2 * len(OPERATIONS)
    assert set(report.by_operation) == set(OPERATIONS)
