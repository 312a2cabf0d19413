"""An agent's calls noted by the watch daemon itself (``earshot.agent.core.watched``):
no worker for a call's start or end, the same batch as an eager record would make."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from earshot_cli import Cli
from fake_agent import Claude


@pytest.fixture
def served(cli: Cli) -> Iterator[Cli]:
    cli.run("watch")
    yield cli
    cli.run("watch", "--stop", expect=None)


@pytest.fixture
def agent(served: Cli, root: Path) -> Iterator[Claude]:
    claude = Claude(served.env(), root)
    claude.start()
    claude.prompt("p")
    yield claude
    claude.close()


def hosted(cli: Cli) -> int:
    return int(cli.run("watch", "--status", "--json").json()["hosted_calls"])


def only_batch(cli: Cli) -> dict[str, Any]:
    (batch,) = cli.run("log", "--json").json()["batches"]
    assert isinstance(batch, dict)
    return batch


def test_a_call_s_start_and_end_take_no_worker_once_the_batch_is_open(
    served: Cli, root: Path, agent: Claude
) -> None:
    agent.bash("touch first", lambda: (root / "first").write_text(""))  # opens the batch
    before = hosted(served)
    agent.bash("touch second", lambda: (root / "second").write_text(""))
    agent.bash("touch third", lambda: (root / "third").write_text(""))
    assert hosted(served) == before  # noted by the daemon
    agent.response_end()
    assert hosted(served) == before + 1  # the close restages them, in a worker
    batch = only_batch(served)
    assert {c["path"]: c["by"] for c in batch["changes"]} == {"first": 0, "second": 1, "third": 2}
    served.run("undo")
    assert sorted(p.name for p in root.iterdir()) == []


def test_a_change_made_between_two_calls_is_nobody_s_and_undo_keeps_it(
    served: Cli, root: Path, agent: Claude
) -> None:
    agent.bash("touch a", lambda: (root / "a").write_text(""))
    (root / "person.txt").write_text("mine\n")  # between the calls: the person's
    agent.bash("touch b", lambda: (root / "b").write_text(""))
    agent.response_end()
    batch = only_batch(served)
    assert sorted(c["path"] for c in batch["changes"]) == ["a", "b"]
    served.run("undo")
    assert (root / "person.txt").read_text() == "mine\n"


def test_a_file_made_between_calls_and_changed_by_one_is_ambiguous_and_kept_by_undo(
    served: Cli, root: Path, agent: Claude
) -> None:
    agent.bash("touch a", lambda: (root / "a").write_text(""))
    (root / "shared.txt").write_text("the person's\n")
    agent.bash("edit shared", lambda: (root / "shared.txt").write_text("the agent's\n"))
    agent.response_end()
    lines = {c["path"]: c for c in only_batch(served)["changes"]}
    assert lines["shared.txt"]["ambiguous"] is True
    ran = served.run("undo", expect=3)
    assert "conflict shared.txt" in ran.stdout
    assert (root / "shared.txt").exists()


def test_the_daemon_gone_mid_batch_loses_nothing(
    served: Cli, root: Path, agent: Claude, tree: Callable[..., Any]
) -> None:
    start = tree(root)
    agent.bash("touch a", lambda: (root / "a").write_text(""))
    ident = agent.new_id()
    agent.pre("Bash", {"command": "touch b"}, ident)  # noted by the daemon
    (root / "b").write_text("")
    served.run("watch", "--stop")  # its tokens name nothing now: a gap
    agent.env = served.env(EARSHOT_WATCH="never")
    agent.post("Bash", {"command": "touch b"}, ident)
    agent.response_end()
    batch = only_batch(served)
    assert {c["path"]: c["by"] for c in batch["changes"]} == {"a": 0, "b": 1}
    served.run("undo", env=served.env(EARSHOT_WATCH="never"))
    assert tree(root) == start


def test_the_notes_of_a_watched_batch_name_each_call_s_paths(
    served: Cli, root: Path, agent: Claude, home: Path
) -> None:
    agent.bash("touch a", lambda: (root / "a").write_text(""))
    agent.bash("mkdir d", lambda: (root / "d").mkdir() or (root / "d" / "f").write_text(""))
    (notes,) = home.glob("checkpoints/*/intents/*")
    lines = [json.loads(line) for line in notes.read_text().splitlines()]
    noted = [n for n in lines if "paths" in n]
    assert [(n["call"], n["owner"], n["paths"]) for n in noted[:2]] == [
        (0, 0, ["a"]),  # the first call's end: what its command did
        (1, None, []),  # the second call began: nothing changed since the first ended
    ]
    # A new directory (restaged whole), and what was made in it if the watch
    # on it came first.
    (call, owner, paths), *_ = [(n["call"], n["owner"], n["paths"]) for n in noted[2:]]
    assert (call, owner, paths[0]) == (1, 1, "d") and set(paths) <= {"d", "d/f"}


def test_a_response_end_with_nothing_open_takes_no_worker(
    served: Cli, root: Path, agent: Claude
) -> None:
    before = hosted(served)
    agent.pre("Read", {"file_path": str(root / "x")}, agent.new_id())
    assert agent.response_end().answer() is None  # a response of read-only calls
    assert hosted(served) == before
    assert served.run("log", "--json").json()["batches"] == []


def test_a_worker_killed_mid_event_is_told_the_agent_s_way_and_strict_refuses(
    served: Cli, root: Path, agent: Claude, home: Path
) -> None:
    import fcntl
    import os
    import signal
    import subprocess
    import time

    from earshot_cli import EARSHOT

    (session,) = served.run("sessions", "--json").json()["sessions"]
    (store,) = home.glob("checkpoints/*")
    lock = store / "external" / f"{session['id']}.lock"
    lock.parent.mkdir(parents=True, exist_ok=True)
    payload = {
        "session_id": agent.session,
        "cwd": str(root),
        "hook_event_name": "PreToolUse",
        "tool_name": "Bash",
        "tool_input": {"command": "rm -r src"},
        "tool_use_id": "toolu_held",
    }
    with open(lock, "a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)  # the event waits in its worker
        hook = subprocess.Popen(
            [str(EARSHOT), "hook", "claude", "--strict"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=served.env(),
            cwd=root,
            text=True,
        )
        assert hook.stdin is not None and hook.stdout is not None
        hook.stdin.write(json.dumps(payload))
        hook.stdin.close()
        hook.stdin = None  # communicate() must not flush it again
        daemon = served.run("watch", "--status", "--json").json()["pid"]
        deadline = time.monotonic() + 20
        workers: list[int] = []
        while not workers:
            assert time.monotonic() < deadline, "no worker took the event"
            children = [
                int(child)
                for task in Path(f"/proc/{daemon}/task").iterdir()
                for child in (task / "children").read_text().split()
            ]
            workers = [
                pid
                for pid in children
                if Path(f"/proc/{pid}/comm").exists()
                and Path(f"/proc/{pid}/comm").read_text().strip() == "earshot-worker"
            ]
            time.sleep(0.05)
        os.kill(workers[0], signal.SIGKILL)
        out, _err = hook.communicate(timeout=20)
    assert hook.returncode == 0
    answer = json.loads(out)
    assert answer["hookSpecificOutput"]["permissionDecision"] == "deny"
    assert "worker stopped" in answer["hookSpecificOutput"]["permissionDecisionReason"]
