"""The test suite's harnesses, for the figures that drive what the tests drive:
the scripted model servers (tests/model_servers), the real agents
(tests/real_agents) and ``earshot ui`` in chromium (tests/ui_harness).

They live in tests/, which is no package: ``on_path()`` puts it on
``sys.path`` first, then a figure imports them by name.
"""

from __future__ import annotations

import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parents[2] / "tests"


def on_path() -> None:
    """Make tests/'s modules importable."""
    if str(TESTS) not in sys.path:
        sys.path.insert(0, str(TESTS))
