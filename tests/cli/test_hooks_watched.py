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


def test_what_the_person_made_between_calls_is_stored_before_the_next_call_deletes_it(
    served: Cli, root: Path, agent: Claude
) -> None:
    (root / "notes.txt").write_text("v1\n")
    agent.bash("touch a", lambda: (root / "a").write_text(""))
    (root / "mine.txt").write_text("my work\n")  # the person, between the calls
    (root / "notes.txt").write_text("v2, the person's\n")
    before = hosted(served)

    def clobber() -> None:
        (root / "mine.txt").unlink()
        (root / "notes.txt").write_text("the agent's\n")

    agent.bash("rm mine.txt; echo x > notes.txt", clobber)
    assert hosted(served) == before + 1  # the start took a worker: it stored the person's work
    agent.response_end()
    served.run("undo")
    assert (root / "mine.txt").read_text() == "my work\n"
    assert (root / "notes.txt").read_text() == "v2, the person's\n"
    assert not (root / "a").exists()


def test_an_ignored_file_a_write_names_is_restored_by_undo_not_deleted(
    served: Cli, root: Path, agent: Claude
) -> None:
    (root / ".gitignore").write_text(".env\nnode_modules/\n")
    (root / ".env").write_text("API_KEY=the-only-copy\n")
    (root / "node_modules" / "pkg").mkdir(parents=True)
    (root / "node_modules" / "pkg" / "index.js").write_text("orig\n")
    agent.write(root / "README.md", "hi\n")  # opens the batch: later starts may go to the daemon
    agent.write(root / ".env", "API_KEY=rotated\n")
    agent.write(root / "node_modules" / "pkg" / "index.js", "patched\n")
    agent.response_end()
    changes = {c["path"]: c for c in only_batch(served)["changes"]}
    for made_before in (".env", "node_modules/pkg/index.js"):  # modified, not created
        assert changes[made_before]["before"] is not None
    served.run("undo")
    assert (root / ".env").read_text() == "API_KEY=the-only-copy\n"
    assert (root / "node_modules" / "pkg" / "index.js").read_text() == "orig\n"
    assert not (root / "README.md").exists()


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


def test_an_ignored_file_a_codex_patch_moves_or_deletes_is_restored_by_undo(
    served: Cli, root: Path
) -> None:
    from fake_agent import FakeAgent

    (root / ".gitignore").write_text(".env*\n")
    (root / ".env").write_text("KEY=1\n")
    (root / ".env2").write_text("KEY=2\n")
    codex = FakeAgent(served.env(), root, agent="codex", session="codex-1")
    try:
        codex.send("SessionStart", source="startup")
        codex.send("UserPromptSubmit", prompt="p", turn_id="t1")
        patches = [
            ("*** Add File: notes.md\n+hi\n", lambda: (root / "notes.md").write_text("hi\n")),
            (
                "*** Update File: .env\n*** Move to: config.env\n@@\n-KEY=1\n+KEY=9\n",
                lambda: (root / ".env").rename(root / "config.env"),
            ),
            ("*** Delete File: .env2\n", lambda: (root / ".env2").unlink()),
        ]
        for number, (body, apply) in enumerate(patches):
            tool_input = {"command": f"*** Begin Patch\n{body}*** End Patch\n"}
            call = {"tool_name": "apply_patch", "tool_input": tool_input, "turn_id": "t1"}
            codex.send("PreToolUse", tool_use_id=f"call_{number}", **call)
            apply()
            codex.send("PostToolUse", tool_use_id=f"call_{number}", tool_response="ok", **call)
        codex.send("Stop", turn_id="t1", last_assistant_message="done")
    finally:
        codex.close()
    served.run("undo")
    assert (root / ".env").read_text() == "KEY=1\n"
    assert (root / ".env2").read_text() == "KEY=2\n"
    assert not (root / "config.env").exists() and not (root / "notes.md").exists()


@pytest.mark.parametrize("site", ["batch-commit", "intent-release"])
def test_a_kill_as_a_batch_commits_leaves_every_later_call_recorded(
    served: Cli, root: Path, agent: Claude, site: str
) -> None:
    # batch-commit: before the commit (the batch stays open); intent-release:
    # after it, before its notes are removed.
    (root / "precious.txt").write_text("keep me\n")
    agent.bash("touch a", lambda: (root / "a").write_text(""))
    agent.bash("touch b", lambda: (root / "b").write_text(""))  # noted by the daemon
    env = agent.env
    agent.env = served.env(EARSHOT_WATCH="never", EARSHOT_FAULTS=f"{site}=kill")
    killed = agent.response_end()
    assert f"earshot-fault: {site}" in killed.stderr
    agent.env = env
    agent.prompt("second")
    agent.bash("touch c", lambda: (root / "c").write_text(""))
    agent.bash("rm precious.txt", lambda: (root / "precious.txt").unlink())
    agent.response_end()
    batches = served.run("log", "--json").json()["batches"]
    assert [sorted(c["path"] for c in b["changes"]) for b in batches] == [
        ["a", "b"],
        ["c", "precious.txt"],
    ]
    served.run("undo")
    assert (root / "precious.txt").read_text() == "keep me\n"
    assert not (root / "c").exists()


def test_a_spare_worker_forked_while_a_call_is_noted_holds_no_lock_of_the_session(
    served: Cli, root: Path, agent: Claude, home: Path
) -> None:
    import fcntl
    import threading
    import time

    agent.bash("touch a", lambda: (root / "a").write_text(""))  # opens the batch
    (session,) = served.run("sessions", "--json").json()["sessions"]
    (store,) = home.glob("checkpoints/*")
    lock = store / "external" / f"{session['id']}.lock"
    answers: list[Any] = []
    with open(lock, "a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)  # a slow event of the session
        # The daemon's thread waits for the lock; the client gives up on it
        # and runs the event in a worker, and a spare is forked meanwhile.
        pre = threading.Thread(
            target=lambda: answers.append(agent.pre("Bash", {"command": "true"}, "toolu_w1"))
        )
        pre.start()
        time.sleep(3)
    pre.join(timeout=60)
    assert not pre.is_alive() and answers[0].rc == 0
    with open(lock, "a") as probe:
        deadline = time.monotonic() + 10
        while True:
            try:
                fcntl.flock(probe, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                assert time.monotonic() < deadline, "a process of the daemon keeps the lock"
                time.sleep(0.1)
        fcntl.flock(probe, fcntl.LOCK_UN)
    # Free as the probe found it: the call's end takes it at once (no spare
    # holds it), which the probe above is the check of, not the clock.
    assert agent.post("Bash", {"command": "true"}, "toolu_w1").answer() is None
