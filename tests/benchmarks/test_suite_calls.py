"""The suite's per-call, daemon and session-log figures: what their report and
their /proc readings say (benchmarks/report, benchmarks/suite/procs.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks.figures.session_log import FIGURE as SESSION_LOG
from benchmarks.report.markdown import targets_table
from benchmarks.suite import plan, procs
from benchmarks.suite.record import Results

WATCHER = r"""
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
fd = libc.inotify_init()
for d in sys.argv[1:]:
    assert libc.inotify_add_watch(fd, d.encode(), 0x100) >= 0, ctypes.get_errno()
print("ready", flush=True)
sys.stdin.read()
"""


def _calls(results: Results, peer: str, seconds: float) -> None:
    results.measure("calls", "call_bash_true", "generated-10000", peer, seconds)


def test_targets_hold_earshot_with_its_daemon_to_its_own_bound() -> None:
    results = Results("quick", {}, {})
    _calls(results, "shadow-git", 1.0)
    _calls(results, "earshot", 0.9)  # within 1.0
    _calls(results, "earshot-daemon", 0.2)  # past 0.10
    rows = "\n".join(targets_table(results))
    assert "| earshot bash 'true', no daemon | " in rows
    assert "| 0.90 (shadow git) | <= 1.0 | met |" in rows
    assert "| earshot bash 'true', with the daemon | " in rows
    assert "| 0.20 (shadow git) | <= 0.1 | **missed** |" in rows


def test_inotify_watches_counts_the_watches_a_process_holds(tmp_path: Path) -> None:
    dirs = [tmp_path / name for name in ("a", "b", "c")]
    for d in dirs:
        d.mkdir()
    child = subprocess.Popen(
        [sys.executable, "-c", WATCHER, *map(str, dirs)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None and child.stdout.readline() == "ready\n"
        assert procs.inotify_watches(child.pid) == 3
        assert procs.rss_mib(child.pid) > 1
    finally:
        assert child.stdin is not None and child.stdout is not None
        child.stdin.close()
        child.wait(timeout=30)
        child.stdout.close()


def test_script_python_is_the_interpreter_of_the_console_script(tmp_path: Path) -> None:
    script = tmp_path / "earshot"
    script.write_text("#!/opt/venv/bin/python3\nimport sys\n")
    assert procs.script_python(str(script)) == "/opt/venv/bin/python3"
    script.write_text("#!/usr/bin/env python3.11\n")
    assert procs.script_python(str(script)) == "python3.11"


def test_the_session_log_runs_once_a_run_on_the_first_generated_tree() -> None:
    the_plan = plan.make("full", ["session_log"], sizes=["10k", "100k"], trees=["kernel"])
    runs = [t.key for t in the_plan.trees if SESSION_LOG.applies(t, the_plan)]
    assert runs == ["generated-10000"]
    alone = plan.make("full", ["session_log"], trees=["kernel", "venv"])
    assert [t.key for t in alone.trees if SESSION_LOG.applies(t, alone)] == ["kernel"]
