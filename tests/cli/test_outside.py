"""What changes between batches is recorded as a batch of its own (``agent/core/outside``).

The person, another tool, or a process a command left running changes a file
while no call runs: the next call says so, ``log`` lists it, and it is taken
back by its number in the pseudo-session ``outside``; a session's undo never
reverts it. Every test runs in-process and through the root's daemon.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from earshot_cli import EARSHOT, Cli
from fake_agent import Claude

from earshot.agent.core.outside import group_alive

pytestmark = pytest.mark.both_modes


def _until(done: Callable[[], bool], what: str) -> None:
    """Wait for an event the test cannot be told of (a background process's work)."""
    deadline = time.monotonic() + 60
    while not done():
        assert time.monotonic() < deadline, f"never happened: {what}"
        time.sleep(0.05)


def test_a_change_between_two_batches_is_said_listed_and_undone_by_its_number(
    cli: Cli, root: Path
) -> None:
    (root / "precious").write_text("mine\n")
    (root / "notes.txt").write_text("v1\n")
    sid = cli.new_session()
    cli.run("bash", "echo 1 > one.txt", session=sid)
    (root / "precious").unlink()  # nobody's call: the person, another tool
    (root / "notes.txt").write_text("v2\n")
    ran = cli.run("bash", "echo 2 > two.txt", session=sid)
    assert (
        "earshot: changed outside any call: notes.txt (changed), precious (deleted); "
        "recorded as batch 1 of 'outside'"
    ) in ran.stderr, ran.stderr
    doc = cli.json("log", session=sid)
    assert [b["seq"] for b in doc["batches"]] == [1, 2]
    (outside,) = doc["outside"]
    assert {c["path"] for c in outside["changes"]} == {"notes.txt", "precious"}
    text = cli.run("log", session=sid).stdout
    assert text.index("echo 1") < text.index("o1 ") < text.index("echo 2"), text
    # Taken back by its number, in the session of what changed outside.
    undone = cli.run("undo", "--session", "outside")
    assert "('earshot redo --session outside' to go back)" in undone.stdout, undone.stdout
    assert (root / "precious").read_text() == "mine\n"
    assert (root / "notes.txt").read_text() == "v1\n"
    cli.run("redo", "--session", "outside")
    assert not (root / "precious").exists()
    assert (root / "notes.txt").read_text() == "v2\n"


def test_a_session_undo_never_reverts_what_changed_outside_any_call(cli: Cli, root: Path) -> None:
    (root / "gone.txt").write_text("the person's\n")
    sid = cli.new_session()
    cli.run("bash", "echo agent > a.txt", session=sid)
    (root / "a.txt").write_text("the person's edit\n")
    (root / "gone.txt").unlink()
    cli.run("bash", "echo agent > b.txt", session=sid)
    cli.run("undo", session=sid)  # batch 2: b.txt
    ran = cli.run("undo", session=sid, expect=3)  # batch 1: a.txt is the person's now
    assert "a.txt" in ran.stdout and "conflict" in ran.stdout, ran.stdout
    assert (root / "a.txt").read_text() == "the person's edit\n"
    assert not (root / "gone.txt").exists()  # only 'undo --session outside' brings it back
    assert not (root / "b.txt").exists()


#: A command that leaves a process running which waits for ../go (made by the
#: test once the batch is recorded), deletes ``precious``, notes its process
#: group in ../group, then ends at once (``then`` = "true") or lives on.
_LEFT_RUNNING = (
    "(while [ ! -e ../go ]; do sleep 0.05; done; rm precious; echo $$ > ../group; {then})"
    " >/dev/null 2>&1 &"
)


def test_a_change_a_session_s_command_made_after_it_returned_is_said_and_undone(
    cli: Cli, root: Path
) -> None:
    # The process ended before the next call: whose it was, nothing shows; it
    # is outside any call, and the message names the command left running.
    (root / "precious").write_text("mine\n")
    sid = cli.new_session()
    cli.run("bash", _LEFT_RUNNING.format(then="true"), session=sid)
    (root.parent / "go").touch()
    _until(lambda: (root.parent / "group").exists(), "the background rm")
    group = int((root.parent / "group").read_text())
    _until(lambda: not group_alive(group), "the background process's end")
    ran = cli.run("bash", "true", session=sid)
    assert "changed outside any call: precious (deleted)" in ran.stderr, ran.stderr
    assert "batch 1 had left a command running that has ended since" in ran.stderr
    cli.run("undo", "--session", "outside")
    assert (root / "precious").read_text() == "mine\n"


def test_what_a_process_left_running_changes_while_it_lives_is_its_session_s(
    cli: Cli, root: Path
) -> None:
    (root / "precious").write_text("mine\n")
    sid = cli.new_session()
    cli.run("bash", _LEFT_RUNNING.format(then="exec sleep 120"), session=sid)
    (root.parent / "go").touch()
    try:
        _until(lambda: (root.parent / "group").exists(), "the background rm")
        ran = cli.run("bash", "true", session=sid)
        assert "changed by what batch 1 left running: precious (deleted)" in ran.stderr, ran.stderr
        doc = cli.json("log", session=sid)
        assert [b["calls"][0]["tool"] for b in doc["batches"]] == ["bash", "outside", "bash"]
        assert doc["outside"] == []
        # The session's own undo takes it back, as the last batch that changed something.
        cli.run("undo", session=sid)
        assert (root / "precious").read_text() == "mine\n"
    finally:
        if (root.parent / "group").exists():
            os.killpg(int((root.parent / "group").read_text()), signal.SIGKILL)


def test_what_another_session_s_running_call_changes_is_that_session_s_not_outside(
    cli: Cli, root: Path
) -> None:
    # Two sessions at once: b's batch begins while a's command is writing. What
    # a's call changed is a's, said and undone there; b records nothing outside.
    a, b = cli.new_session(), cli.new_session()
    cli.run("bash", "true", session=b)  # b's batch leaves the settled state
    go = root.parent / "go"
    with subprocess.Popen(
        [str(EARSHOT), "bash", f"echo a > a.txt; while [ ! -e {go} ]; do sleep 0.05; done"],
        cwd=root,
        env=cli.env(a),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    ) as running:
        _until(lambda: (root / "a.txt").exists(), "a's command wrote")
        ran = cli.run("bash", "echo b > b.txt", session=b)
        go.touch()
        assert running.wait(timeout=60) == 0
    assert "outside" not in ran.stderr, ran.stderr
    assert cli.json("log", session=b)["outside"] == []
    (mine,) = cli.json("log", session=a)["batches"]
    assert "a.txt" in [c["path"] for c in mine["changes"]], mine  # b.txt too: it ran meanwhile
    ran = cli.run("bash", "true", session=a)
    assert "outside" not in ran.stderr, ran.stderr
    # Two sessions at once: undo cannot tell whose, and deletes neither.
    ran = cli.run("undo", session=a, expect=3)
    assert "conflict a.txt: another session ran at the same time" in ran.stdout, ran.stdout
    assert (root / "a.txt").exists() and (root / "b.txt").exists()


def test_another_session_s_batch_between_two_calls_of_a_batch_is_not_outside(
    cli: Cli, root: Path
) -> None:
    # a's whole call runs between two calls of the agent's batch: a.txt is in
    # a's ledger, and nothing is recorded as outside any call.
    a = cli.new_session()
    claude = Claude(cli.env(), root)
    try:
        assert claude.start().rc == 0
        claude.prompt("p")
        claude.write(root / "w.txt", "w\n")
        cli.run("bash", "echo a > a.txt", session=a)
        claude.write(root / "v.txt", "v\n")
        claude.response_end()
    finally:
        claude.close()
    doc = cli.json("log", session=a)
    assert [c["path"] for c in doc["batches"][0]["changes"]] == ["a.txt"], doc
    assert doc["outside"] == [], doc["outside"]
    ran = cli.run("undo", session=a, expect=3)  # two sessions at once: whose, unknown
    assert "conflict a.txt: another session ran at the same time" in ran.stdout, ran.stdout
    assert (root / "a.txt").exists() and (root / "v.txt").exists()


def test_another_session_s_batch_before_a_batch_closes_is_not_outside_at_the_next_batch(
    cli: Cli, root: Path
) -> None:
    # a's whole call runs after the agent's last call, before its response ends:
    # the agent's batch ends on a state without a.txt, which is not the disk's,
    # and the next batch must not take a.txt for a change of the person's.
    a = cli.new_session()
    claude = Claude(cli.env(), root)
    try:
        assert claude.start().rc == 0
        claude.prompt("p")
        claude.write(root / "w.txt", "w\n")
        cli.run("bash", "echo a > a.txt", session=a)
        claude.response_end()
    finally:
        claude.close()
    ran = cli.run("bash", "echo next > next.txt", session=a)
    assert "outside" not in ran.stderr, ran.stderr
    assert cli.json("log", session=a)["outside"] == []


def test_another_session_s_call_still_running_at_a_batch_s_next_call_is_not_outside(
    cli: Cli, root: Path
) -> None:
    a = cli.new_session()
    go = root.parent / "go"
    claude = Claude(cli.env(), root)
    try:
        assert claude.start().rc == 0
        claude.prompt("p")
        claude.write(root / "w.txt", "w\n")
        with subprocess.Popen(
            [str(EARSHOT), "bash", f"echo a > a.txt; while [ ! -e {go} ]; do sleep 0.05; done"],
            cwd=root,
            env=cli.env(a),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        ) as running:
            _until(lambda: (root / "a.txt").exists(), "a's command wrote")
            claude.write(root / "v.txt", "v\n")
            go.touch()
            assert running.wait(timeout=60) == 0
        claude.response_end()
    finally:
        claude.close()
    assert cli.json("log", session=a)["outside"] == []


def test_an_agent_is_told_at_its_next_call_what_changed_outside_any_call(
    cli: Cli, root: Path
) -> None:
    (root / "precious").write_text("mine\n")
    claude = Claude(cli.env(), root)
    try:
        assert claude.start().rc == 0
        claude.prompt("p")
        claude.write(root / "w.txt", "w\n")
        claude.response_end()
        (root / "precious").unlink()  # between two responses: nobody's call
        ident = claude.new_id()
        tool_input = {"command": "ls", "description": "test"}
        answer = claude.pre("Bash", tool_input, ident).answer()
        assert answer is not None
        assert "changed outside any call: precious (deleted)" in answer["systemMessage"]
        assert claude.post("Bash", tool_input, ident).rc == 0
        claude.response_end()
        cli.run("undo", "--session", "outside")
        assert (root / "precious").read_text() == "mine\n"
    finally:
        claude.close()


def test_the_outside_session_runs_no_calls_and_is_not_a_conversation(cli: Cli, root: Path) -> None:
    ran = cli.run("undo", "--session", "outside", expect=1)
    assert "nothing has changed outside any call" in ran.stderr
    sid = cli.new_session()
    cli.run("bash", "true", session=sid)
    (root / "x").write_text("x\n")
    cli.run("bash", "true", session=sid)
    ran = cli.run("bash", "--session", "outside", "true", expect=1)
    assert "runs no calls" in ran.stderr
    sessions = cli.json("sessions")["sessions"]
    assert [s["id"] for s in sessions] == [sid]


def test_gc_keeps_what_an_outside_batch_needs_to_be_undone(cli: Cli, root: Path) -> None:
    (root / "precious").write_text("mine\n")
    sid = cli.new_session()
    cli.run("bash", "true", session=sid)
    (root / "precious").unlink()
    cli.run("bash", "echo later > later.txt", session=sid)
    for _ in range(20):  # the session is pruned (20 are kept): its batches go
        cli.new_session()
    cli.run("gc")
    assert cli.json("log", session=sid)["batches"] == []
    assert "problem" not in cli.run("fsck").stdout.lower()
    cli.run("undo", "--session", "outside")
    assert (root / "precious").read_text() == "mine\n"


def test_pruning_sessions_drops_the_outside_batches_of_their_time_but_the_newest_and_named(
    cli: Cli, root: Path
) -> None:
    sid = cli.new_session()
    (root / "f").write_text("v0\n")
    cli.run("bash", "true", session=sid)  # the first state settled
    for n in range(1, 4):  # three batches of what changed outside any call
        (root / "f").write_text(f"v{n}\n")
        cli.run("bash", "true", session=sid)
    cli.run("undo", "--session", "outside")  # outside batch 4: the undo of 3
    cli.run("redo", "--session", "outside")  # outside batch 5: names 4, which names 3
    assert (root / "f").read_text() == "v3\n"
    assert [b["seq"] for b in cli.json("log", session="outside")["batches"]] == [1, 2, 3, 4, 5]
    for _ in range(21):  # the session is pruned (20 are kept), and the outside batches of then
        cli.new_session()
    cli.run("gc")
    assert [b["seq"] for b in cli.json("log", session="outside")["batches"]] == [3, 4, 5]
    assert "problem" not in cli.run("fsck").stdout.lower()
    cli.run("undo", "--session", "outside")  # batch 3 still goes back: it is named
    assert (root / "f").read_text() == "v2\n"
