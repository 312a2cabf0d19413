"""The engine with the watch daemon: the first call of a later process is vouched for."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.watcher


def test_a_later_process_trusts_the_daemon_and_never_pins_a_user_edit_on_a_call(
    cli: Any, root: Path
) -> None:
    for i in range(20):
        (root / f"f{i}.txt").write_text(f"{i}\n")
    session = cli.run("session", "new").stdout.strip()
    env = cli.env(session, EARSHOT_WATCH="always")
    try:
        first = cli.run("bash", "-vv", "echo a > a.txt", env=env)
        assert "before the first call of a process" in first.stderr  # no mark yet
        (root / "f2.txt").write_text("edited by the person between turns\n")
        second = cli.run("bash", "-vv", "mkdir -p n/m && echo b > n/m/b.txt", env=env)
        assert "restage='vouched'" in second.stderr
        assert "restage='full'" not in second.stderr  # the tree was not walked
        log = cli.json("log", env=env)
        changes = [{c["path"] for c in b["changes"]} for b in log["batches"]]
        assert changes == [{"a.txt"}, {"n/m/b.txt"}]  # the person's edit is in no ledger
        undo = cli.json("undo", "2", env=env)
        assert sorted(undo["deleted"]) == ["a.txt", "n/m/b.txt"]
        assert not (root / "n").exists()  # the directories the call made
        assert (root / "f2.txt").read_text() == "edited by the person between turns\n"
    finally:
        cli.run("watch", "--stop", env=env, expect=None)


def test_a_killed_daemon_means_a_full_restage_that_misses_nothing(cli: Any, root: Path) -> None:
    import os
    import signal
    import time

    session = cli.run("session", "new").stdout.strip()
    env = cli.env(session, EARSHOT_WATCH="always")
    try:
        cli.run("bash", "echo a > a.txt", env=env)
        status = cli.json("watch", "--status", env=env)
        os.kill(int(status["pid"]), signal.SIGKILL)
        time.sleep(0.2)
        (root / "made-while-no-one-watched.txt").write_text("x\n")
        ran = cli.run("bash", "-vv", "echo b > b.txt", env={**env, "EARSHOT_WATCH": "never"})
        assert "restage='full'" in ran.stderr
        log = cli.json("log", env=env)
        assert {c["path"] for c in log["batches"][-1]["changes"]} == {"b.txt"}
        assert (root / "made-while-no-one-watched.txt").exists()
    finally:
        cli.run("watch", "--stop", env=env, expect=None)


def test_after_an_undo_and_a_redo_the_next_process_is_still_vouched_for(
    cli: Any, root: Path
) -> None:
    session = cli.run("session", "new").stdout.strip()
    env = cli.env(session, EARSHOT_WATCH="always")
    try:
        cli.run("bash", "echo a > a.txt", env=env)
        cli.run("bash", "echo b > b.txt", env=env)
        cli.run("undo", env=env)
        after_undo = cli.run("bash", "-vv", "true", env=env)
        assert "restage='vouched'" in after_undo.stderr
        assert "restage='full'" not in after_undo.stderr
        cli.run("redo", env=env)
        after_redo = cli.run("bash", "-vv", "true", env=env)
        assert "restage='full'" not in after_redo.stderr
        assert (root / "b.txt").read_text() == "b\n"
    finally:
        cli.run("watch", "--stop", env=env, expect=None)


GEN = """
import os
for d in range(10):
    for e in range(3):
        path = os.path.join("gen", f"d{d}", f"e{e}")
        os.makedirs(path, exist_ok=True)
        for f in range(10):
            with open(os.path.join(path, f"f{f}.txt"), "w") as out:
                out.write(f"{d}/{e}/{f}\\n")
for i in range(5):
    with open(f"old{i}.txt", "a") as out:
        out.write("edited\\n")
"""


def test_a_command_over_the_budget_is_attributed_exactly_and_undone_exactly(
    cli: Any, root: Path
) -> None:
    for i in range(40):
        (root / f"old{i}.txt").write_text(f"{i}\n")
    (root / "gen.py").write_text(GEN)
    session = cli.run("session", "new").stdout.strip()
    # A zero budget: every full restage is "too expensive", as on a huge tree.
    env = cli.env(session, EARSHOT_WATCH="always", EARSHOT_RESTAGE_BUDGET_MS="0")
    try:
        cli.run("bash", "true", env=env)  # the first call of a process walks once
        ran = cli.run("bash", "-vv", "python3 gen.py", env=env)
        assert "restage='full'" not in ran.stderr
        batch = cli.json("log", env=env)["batches"][-1]
        assert batch["folded"] is False and batch["attributed"] is True
        made = {f"gen/d{d}/e{e}/f{f}.txt" for d in range(10) for e in range(3) for f in range(10)}
        edited = {f"old{i}.txt" for i in range(5)}
        assert {c["path"] for c in batch["changes"]} == made | edited
        assert all(c["by"] == 0 for c in batch["changes"])
        undo = cli.json("undo", env=env)
        assert set(undo["deleted"]) == made and set(undo["restored"]) == edited
        assert not (root / "gen").exists()  # and the directories it made
        assert all((root / f"old{i}.txt").read_text() == f"{i}\n" for i in range(40))
    finally:
        cli.run("watch", "--stop", env=env, expect=None)


def test_commands_that_change_no_file_never_start_the_daemon(cli: Any, root: Path) -> None:
    session = cli.run("session", "new").stdout.strip()
    env = cli.env(session, EARSHOT_WATCH="always")
    try:
        for args in (("log",), ("prompt", "hello"), ("tree",)):
            cli.run(*args, env=env)
        assert cli.json("watch", "--status", env=env)["running"] is False
        cli.run("bash", "true", env=env)
        assert cli.json("watch", "--status", env=env)["running"] is True
    finally:
        cli.run("watch", "--stop", env=env, expect=None)
