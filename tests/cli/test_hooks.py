"""``earshot hook claude``: an agent's tool calls as batches, through its hook events.

The events come from a stand-in agent process (tests/fake_agent.py) that
runs each hook as its child through /bin/sh, as Claude Code does; what the
"tool" does happens in the test between its two events. Every test runs
in-process and through the root's daemon. The real agents are driven in
tests/cli/test_real_agents.py.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from earshot_cli import Cli
from fake_agent import Claude

pytestmark = pytest.mark.both_modes


@pytest.fixture
def agent(cli: Cli, root: Path) -> Iterator[Claude]:
    claude = Claude(cli.env(), root)
    assert claude.start().rc == 0
    yield claude
    claude.close()


def log_of(cli: Cli, session: str | None = None) -> dict[str, Any]:
    """``earshot log --json`` of ``session`` (default: the most recently active)."""
    more = ("--session", session) if session else ()
    doc: dict[str, Any] = cli.run("log", "--json", *more).json()
    return doc


def only_session(cli: Cli) -> str:
    (session,) = cli.run("sessions", "--json").json()["sessions"]
    return str(session["id"])


def changes(batch: dict[str, Any]) -> dict[str, Any]:
    return {c["path"]: c["by"] for c in batch["changes"]}


def seed(root: Path) -> None:
    (root / "build").mkdir()
    (root / "build" / "old.o").write_text("object\n")
    (root / "src.py").write_text("x = 1\n")


def generate(root: Path) -> None:
    shutil.rmtree(root / "build")
    (root / "gen").mkdir()
    for i in range(3):
        (root / "gen" / f"f{i}.txt").write_text(f"{i}\n")


# -- one batch per model response ---------------------------------------------------


def test_a_bash_call_and_a_write_make_one_batch_each_call_owning_its_changes(
    cli: Cli, root: Path, agent: Claude, tree: Callable[..., Any]
) -> None:
    seed(root)
    before = tree(root)
    agent.prompt("regenerate")
    agent.bash("rm -rf build && generate", lambda: generate(root))
    agent.write(root / "notes.md", "notes\n")
    assert agent.response_end().answer() is None
    agent.stop()
    (batch,) = log_of(cli)["batches"]
    assert [c["tool"] for c in batch["calls"]] == ["bash", "Write"]
    assert changes(batch) == {
        "build/old.o": 0,
        "gen/f0.txt": 0,
        "gen/f1.txt": 0,
        "gen/f2.txt": 0,
        "notes.md": 1,
    }
    cli.run("undo")
    assert tree(root) == before


def test_undo_2_rewind_and_redo_work_per_response_and_per_prompt(
    cli: Cli, root: Path, agent: Claude, tree: Callable[..., Any]
) -> None:
    seed(root)
    start = tree(root)
    agent.prompt("first")
    agent.bash("generate", lambda: generate(root))
    agent.response_end()
    after_one = tree(root)
    agent.write(root / "a.txt", "a\n")
    agent.response_end()
    agent.stop()
    after_first_prompt = tree(root)
    agent.prompt("second")
    agent.write(root / "src.py", "x = 2\n")
    agent.response_end()
    agent.stop()
    assert [b["seq"] for b in log_of(cli)["batches"]] == [1, 2, 3]
    prompts = cli.run("tree", "--json").json()["prompts"]
    assert [p["text"] for p in prompts] == ["first", "second"]
    cli.run("undo")
    assert tree(root) == after_first_prompt
    cli.run("undo")
    assert tree(root) == after_one
    cli.run("redo")
    assert tree(root) == after_first_prompt
    cli.run("rewind", "1", "--code")
    assert tree(root) == start


def test_a_resumed_agent_session_is_the_same_earshot_session(
    cli: Cli, root: Path, agent: Claude
) -> None:
    agent.prompt("one")
    agent.write(root / "a.txt", "a\n")
    agent.stop()
    agent.end()
    again = Claude(cli.env(), root, session=agent.session)
    try:
        again.start("resume")
        again.prompt("two")
        again.write(root / "b.txt", "b\n")
        again.stop()
    finally:
        again.close()
    (session,) = cli.run("sessions", "--json").json()["sessions"]
    assert session["agent"] == {"name": "claude", "session": agent.session}
    assert f"(claude {agent.session[:12]})" in cli.run("sessions").stdout
    assert [b["seq"] for b in log_of(cli)["batches"]] == [1, 2]


def test_read_only_tools_create_nothing(cli: Cli, root: Path, home: Path) -> None:
    claude = Claude(cli.env(), root)
    try:
        ran = claude.pre("Read", {"file_path": str(root / "x")}, "toolu_read")
        assert (ran.rc, ran.stdout) == (0, "")
        ran = claude.post("Grep", {"pattern": "x"}, "toolu_grep")
        assert (ran.rc, ran.stdout) == (0, "")
    finally:
        claude.close()
    assert not list(home.glob("sessions/*/*.jsonl"))
    assert "no sessions" in cli.run("sessions").stdout


# -- what a hook prints ---------------------------------------------------------------


def test_stdout_is_nothing_on_success_and_one_json_answer_otherwise(
    cli: Cli, root: Path, agent: Claude
) -> None:
    runs = [agent.prompt("p")]
    ident = agent.new_id()
    runs.append(agent.pre("Bash", {"command": "true"}, ident))
    runs.append(agent.post("Bash", {"command": "true"}, ident))
    runs += [agent.response_end(), agent.stop(), agent.send("PreCompact", trigger="manual")]
    runs.append(agent.end())
    assert [(r.rc, r.stdout) for r in runs] == [(0, "")] * len(runs)
    garbled = agent.send_raw("{not json")
    assert garbled.rc == 0
    answer = garbled.answer()
    assert answer is not None and "could not read" in answer["systemMessage"]


def test_an_event_that_cannot_be_recorded_runs_the_tool_and_says_so(
    cli: Cli, root: Path, agent: Claude
) -> None:
    agent.env = cli.env(EARSHOT_FAULTS="hook-event=enospc")
    ran = agent.pre("Bash", {"command": "touch x"}, agent.new_id())
    assert ran.rc == 0
    answer = ran.answer()
    assert answer is not None and set(answer) == {"systemMessage"}
    assert "Bash runs unrecorded" in answer["systemMessage"]
    assert "No space left on device" in answer["systemMessage"]


def test_strict_refuses_the_tool_with_a_reason_the_model_sees(cli: Cli, root: Path) -> None:
    claude = Claude(cli.env(EARSHOT_FAULTS="hook-event=enospc"), root, options="--strict")
    try:
        answer = claude.pre("Bash", {"command": "touch x"}, "toolu_strict").answer()
    finally:
        claude.close()
    assert answer is not None
    decision = answer["hookSpecificOutput"]
    assert decision["hookEventName"] == "PreToolUse"
    assert decision["permissionDecision"] == "deny"
    assert "--strict" in decision["permissionDecisionReason"]


def test_an_event_that_takes_too_long_lets_the_tool_run(cli: Cli, root: Path) -> None:
    claude = Claude(cli.env(EARSHOT_FAULTS="hook-event=hang"), root, options="--timeout 1")
    try:
        answer = claude.pre("Bash", {"command": "true"}, "toolu_slow").answer()
    finally:
        claude.close()
    assert answer is not None and "longer than 1 s" in answer["systemMessage"]


# -- calls whose end never comes, gaps, failures --------------------------------------


def test_a_call_whose_end_never_comes_keeps_its_changes_and_the_next_call_gets_none(
    cli: Cli, root: Path, agent: Claude
) -> None:
    agent.prompt("p")
    lost = agent.new_id()
    agent.pre("Bash", {"command": "make lost"}, lost)
    (root / "lost.txt").write_text("made by the call that never ended\n")
    # No PostToolUse: the tool was cut off. The next call begins.
    agent.write(root / "next.txt", "next\n")
    agent.response_end()
    (batch,) = log_of(cli)["batches"]
    assert changes(batch) == {"lost.txt": 0, "next.txt": 1}
    assert batch["calls"][0]["unfinished"] == "the model's response ended"
    cli.run("undo")
    assert not (root / "lost.txt").exists() and not (root / "next.txt").exists()


def test_a_call_still_running_at_the_end_of_the_turn_is_recorded_as_its_own(
    cli: Cli, root: Path, agent: Claude
) -> None:
    agent.prompt("p")
    agent.pre("Bash", {"command": "sleep 30; touch late"}, agent.new_id())
    (root / "late").write_text("x\n")
    agent.stop()  # interrupted: no PostToolUse, no PostToolBatch
    (batch,) = log_of(cli)["batches"]
    assert changes(batch) == {"late": 0}
    assert batch["calls"][0]["unfinished"] == "the turn ended"


def test_a_failed_or_interrupted_call_keeps_what_it_changed_and_says_why(
    cli: Cli, root: Path, agent: Claude
) -> None:
    agent.prompt("p")
    ident = agent.new_id()
    tool_input = {"command": "touch half && false"}
    agent.pre("Bash", tool_input, ident)
    (root / "half").write_text("")
    agent.post("Bash", tool_input, ident, error="Exit code 1")
    cut = agent.new_id()
    agent.pre("Bash", {"command": "sleep 9"}, cut)
    (root / "cut").write_text("")
    agent.post("Bash", {"command": "sleep 9"}, cut, interrupted=True)
    agent.response_end()
    (batch,) = log_of(cli)["batches"]
    assert changes(batch) == {"half": 0, "cut": 1}
    assert batch["calls"][0]["error"] == "Exit code 1"
    assert batch["calls"][1]["interrupted"] is True


def test_a_call_seen_only_ending_is_a_gap_the_log_shows(
    cli: Cli, root: Path, agent: Claude
) -> None:
    agent.prompt("p")
    (root / "unseen.txt").write_text("x\n")
    answer = agent.post("Bash", {"command": "touch unseen.txt"}, agent.new_id()).answer()
    assert answer is not None and "ran unrecorded" in answer["systemMessage"]
    agent.response_end()
    (batch,) = log_of(cli)["batches"]
    assert "never seen" in batch["calls"][0]["gap"]
    assert batch["changes"] == []  # not pinned on anyone: undo never deletes it
    text = cli.run("log").stdout
    assert "not recorded" in text


def test_a_call_whose_start_was_never_seen_in_an_open_batch_is_undone_where_held(
    cli: Cli, root: Path, agent: Claude
) -> None:
    # The PreToolUse was killed (the agent's hook timeout): the batch holds the
    # state before it all the same, so what the call deleted or changed comes
    # back; what it made is kept, since no call is known to have made it.
    (root / "precious.txt").write_text("mine\n")
    (root / "notes.txt").write_text("old\n")
    agent.prompt("p")
    agent.write(root / "first.txt", "first\n")
    (root / "precious.txt").unlink()
    (root / "notes.txt").write_text("new\n")
    (root / "made.txt").write_text("made\n")
    answer = agent.post("Bash", {"command": "rm precious.txt"}, agent.new_id()).answer()
    assert answer is not None and "ran unrecorded" in answer["systemMessage"]
    agent.response_end()
    (batch,) = log_of(cli)["batches"]
    assert "never seen" in batch["calls"][1]["gap"]
    undo = cli.json("undo", expect=3)
    assert (root / "precious.txt").read_text() == "mine\n"
    assert (root / "notes.txt").read_text() == "old\n"
    assert not (root / "first.txt").exists()
    assert (root / "made.txt").exists() and "made.txt" in {k["path"] for k in undo["kept"]}


def test_two_calls_at_once_keep_their_changes_in_the_batch(
    cli: Cli, root: Path, agent: Claude
) -> None:
    agent.prompt("p")
    a, b = agent.new_id(), agent.new_id()
    agent.pre("Bash", {"command": "a"}, a)
    (root / "a1").write_text("")
    agent.pre("Bash", {"command": "b"}, b)
    (root / "b1").write_text("")
    agent.post("Bash", {"command": "b"}, b)
    (root / "a2").write_text("")
    agent.post("Bash", {"command": "a"}, a)
    agent.response_end()
    (batch,) = log_of(cli)["batches"]
    made = changes(batch)
    assert set(made) == {"a1", "b1", "a2"}
    assert made["a1"] == 0  # before the second call began: the first's
    assert all(isinstance(by, int) for by in made.values())
    cli.run("undo")
    assert sorted(p.name for p in root.iterdir()) == []


def test_a_subagent_is_one_unit_with_its_dispatch_even_after_the_dispatch_returned(
    cli: Cli, root: Path, agent: Claude
) -> None:
    # Claude Code's Agent tool returns at once; its subagent runs on, its calls
    # interleaved with the parent's events (the order the real binary fires).
    agent.prompt("p")
    task = agent.new_id()
    dispatch = {"description": "d", "prompt": "p", "subagent_type": "general-purpose"}
    agent.pre("Agent", dispatch, task)
    agent.send("SubagentStart", agent_id="a1b2", agent_type="general-purpose")
    agent.post("Agent", dispatch, task)
    child = {"agent_id": "a1b2", "agent_type": "general-purpose"}
    first = agent.new_id()
    agent.pre("Bash", {"command": "touch by-child"}, first, **child)
    agent.response_end()  # the parent's response
    (root / "by-child").write_text("")
    agent.post("Bash", {"command": "touch by-child"}, first, **child)
    agent.stop()  # the parent's turn, the subagent still running
    second = agent.new_id()
    agent.pre("Write", {"file_path": str(root / "w.txt"), "content": "w"}, second, **child)
    (root / "w.txt").write_text("w")
    agent.post("Write", {"file_path": str(root / "w.txt"), "content": "w"}, second, **child)
    agent.send("PostToolBatch", tool_calls=[], **child)
    assert log_of(cli)["batches"] == []  # one open unit until the subagent ends
    agent.send("SubagentStop", agent_stop=True, **child)
    agent.send("UserPromptSubmit", prompt="<task-notification>done</task-notification>")
    agent.stop()
    (batch,) = log_of(cli)["batches"]
    assert [c["tool"] for c in batch["calls"]] == ["Agent", "bash", "Write"]
    assert batch["calls"][1]["agent"] == "subagent a1b2"
    assert changes(batch) == {"by-child": 1, "w.txt": 2}
    prompts = cli.run("tree", "--json").json()["prompts"]
    assert [p["text"] for p in prompts] == ["p"]  # the notification is not the person's


def test_a_write_to_an_ignored_file_is_recorded_and_undone(
    cli: Cli, root: Path, agent: Claude
) -> None:
    (root / ".gitignore").write_text(".env\n")
    (root / ".env").write_text("SECRET=1\n")
    agent.prompt("p")
    agent.write(root / ".env", "SECRET=2\n")
    agent.response_end()
    cli.run("undo")
    assert (root / ".env").read_text() == "SECRET=1\n"


def test_a_compaction_becomes_an_entry_of_the_log(
    cli: Cli, root: Path, agent: Claude, home: Path
) -> None:
    agent.prompt("p")
    agent.send("PreCompact", trigger="manual", custom_instructions="")
    (log,) = list(home.glob("sessions/*/*.jsonl"))
    entries = [json.loads(line) for line in log.read_text().splitlines()[1:]]
    assert [e["type"] for e in entries] == ["user", "compaction"]
    assert entries[1]["summary"] == "claude compacted its context (manual)"


# -- the agent's process: live while it runs, recovered once it is gone -------------


def test_while_the_agent_lives_other_commands_leave_its_open_batch_alone(
    cli: Cli, root: Path, agent: Claude
) -> None:
    agent.prompt("p")
    ident = agent.new_id()
    agent.pre("Bash", {"command": "sleep"}, ident)
    (root / "a").write_text("")
    mine = only_session(cli)
    other = cli.run("session", "new").stdout.strip()
    cli.run("bash", "true", session=other)  # a command that finishes interrupted work
    pending = log_of(cli, mine)["pending"]
    assert len(pending) == 1 and pending[0]["running"] is True
    refused = cli.run("undo", "--session", mine, expect=1)
    assert "is running in another process" in refused.stderr
    agent.post("Bash", {"command": "sleep"}, ident)
    agent.response_end()
    assert [changes(b) for b in log_of(cli, mine)["batches"]] == [{"a": 0}]


def test_undo_asked_while_the_agent_waits_closes_its_open_batch_first(
    cli: Cli, root: Path, agent: Claude
) -> None:
    agent.prompt("p")
    agent.write(root / "a.txt", "a\n")  # no PostToolBatch yet: the person presses Esc
    cli.run("undo")
    assert not (root / "a.txt").exists()
    kinds = [b["kind"] for b in log_of(cli)["batches"]]
    assert kinds == ["calls", "undo"]


def test_a_killed_agent_s_open_batch_is_recorded_as_interrupted_by_the_next_command(
    cli: Cli, root: Path, agent: Claude
) -> None:
    (root / "old.txt").write_text("old\n")
    agent.prompt("p")
    agent.write(root / "made.txt", "made\n")
    ident = agent.new_id()
    agent.pre("Bash", {"command": "rm old.txt"}, ident)
    (root / "old.txt").unlink()
    mine = only_session(cli)
    other = cli.run("session", "new").stdout.strip()
    agent.kill()
    ran = cli.run("log", "--session", mine)
    assert "interrupted" in ran.stderr
    finished = cli.run("bash", "true", session=other)
    assert "recorded interrupted batch 1" in finished.stderr
    batch = log_of(cli, mine)["batches"][0]
    assert batch["interrupted"] is True
    assert [c["tool"] for c in batch["calls"]] == ["Write", "bash"]
    assert changes(batch) == {"made.txt": 0, "old.txt": "restage"}
    cli.run("undo", "--session", mine)
    assert (root / "old.txt").read_text() == "old\n"
    # Proven by its notes: the write made it, so undo takes it back.
    assert not (root / "made.txt").exists()


def test_gc_keeps_what_an_open_batch_recorded(cli: Cli, root: Path, agent: Claude) -> None:
    (root / "f.txt").write_text("v1\n")
    agent.prompt("p")
    ident = agent.new_id()
    agent.pre("Bash", {"command": "edit"}, ident)
    (root / "f.txt").write_text("v2\n")
    cli.run("gc")
    agent.post("Bash", {"command": "edit"}, ident)
    agent.response_end()
    assert cli.run("fsck", expect=0).rc == 0
    cli.run("undo")
    assert (root / "f.txt").read_text() == "v1\n"


def test_gc_keeps_what_a_batch_saw_another_sessions_batch_hold_between_its_calls(
    cli: Cli, root: Path, agent: Claude, tmp_path: Path
) -> None:
    # The other session's command writes v2, waits, then v3: v2 is in none of
    # its snapshots, nor in this batch's. This batch's second call starts on v2
    # and writes v4, so its ledger keeps v2 as the state undo brings back.
    import subprocess
    import time

    from earshot_cli import EARSHOT

    (root / "f.txt").write_text("v1\n")
    other = cli.new_session()
    agent.prompt("p")
    first = agent.new_id()  # the batch's state before it is taken at its first call
    agent.pre("Bash", {"command": "touch g.txt"}, first)
    (root / "g.txt").touch()
    agent.post("Bash", {"command": "touch g.txt"}, first)
    started, go = tmp_path / "started", tmp_path / "go"
    command = (
        f"echo v2 > f.txt; touch {started}; until [ -e {go} ]; do sleep 0.01; done; echo v3 > f.txt"
    )
    slow = subprocess.Popen(
        [str(EARSHOT), "bash", command],
        cwd=root,
        env=cli.env(other),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 120  # "never", on a loaded machine too
    while not started.exists():
        assert time.monotonic() < deadline and slow.poll() is None, "the command never wrote v2"
        time.sleep(0.01)
    ident = agent.new_id()
    agent.pre("Bash", {"command": "edit"}, ident)
    go.touch()
    assert slow.wait(timeout=120) == 0
    (root / "f.txt").write_text("v4\n")
    agent.post("Bash", {"command": "edit"}, ident)
    agent.response_end()
    mine = log_of(cli)["session"]
    (line,) = [c for c in log_of(cli, mine)["batches"][-1]["changes"] if c["path"] == "f.txt"]
    cli.run("gc")
    assert cli.run("fsck", expect=None).rc == 0
    cli.run("undo", "--json", session=mine, expect=None)
    assert (root / "f.txt").read_text() == "v2\n", line


@pytest.mark.parametrize("agent_name", ["codex", "gemini"])
def test_the_other_agents_payloads_make_batches_too(
    cli: Cli, root: Path, agent_name: str, tree: Callable[..., Any]
) -> None:
    from fake_agent import FakeAgent

    (root / "old.txt").write_text("old\n")
    before = tree(root)
    fake = FakeAgent(cli.env(), root, agent=agent_name, session=f"{agent_name}-1")
    try:
        if agent_name == "codex":
            turn = {"turn_id": "t1", "model": "gpt-5.5", "permission_mode": "default"}
            fake.send("SessionStart", source="startup", **turn)
            fake.send("UserPromptSubmit", prompt="go", **turn)
            shell = {"tool_name": "Bash", "tool_input": {"command": "rm old.txt"}}
            fake.send("PreToolUse", tool_use_id="call_1", **shell, **turn)
            (root / "old.txt").unlink()
            fake.send("PostToolUse", tool_use_id="call_1", tool_response="", **shell, **turn)
            patch = "*** Begin Patch\n*** Add File: new.txt\n+hello\n*** End Patch\n"
            edit = {"tool_name": "apply_patch", "tool_input": {"command": patch}}
            fake.send("PreToolUse", tool_use_id="call_2", **edit, **turn)
            (root / "new.txt").write_text("hello\n")
            fake.send("PostToolUse", tool_use_id="call_2", tool_response="ok", **edit, **turn)
            fake.send("Stop", last_assistant_message="done", **turn)
        else:
            fake.send("SessionStart", source="startup")
            fake.send("BeforeAgent", prompt="go")
            fake.send("BeforeModel")
            shell = {"tool_name": "run_shell_command", "tool_input": {"command": "rm old.txt"}}
            fake.send("BeforeTool", **shell)
            (root / "old.txt").unlink()
            fake.send("AfterTool", tool_response={"llmContent": ""}, **shell)
            write = {
                "tool_name": "write_file",
                "tool_input": {"file_path": "new.txt", "content": "hello\n"},
            }
            fake.send("BeforeTool", **write)
            (root / "new.txt").write_text("hello\n")
            fake.send("AfterTool", tool_response={"llmContent": ""}, **write)
            fake.send("BeforeModel")
            fake.send("AfterAgent", prompt="go", prompt_response="done")
    finally:
        fake.close()
    (batch,) = log_of(cli)["batches"]
    assert changes(batch) == {"old.txt": 0, "new.txt": 1}
    cli.run("undo")
    assert tree(root) == before


def test_what_another_session_made_during_a_gemini_write_is_ambiguous_and_kept_by_its_undo(
    cli: Cli, root: Path, tmp_path: Path
) -> None:
    # Gemini CLI names its write tool write_file, as earshot's own tool is
    # named; but what an agent's call changed is found by a diff of what was
    # seen while it ran, and another session's batch ran then too.
    import subprocess
    import time

    from earshot_cli import EARSHOT
    from fake_agent import FakeAgent

    other = cli.new_session()
    started, go, made, finish = (tmp_path / n for n in ("started", "go", "made", "finish"))
    command = (
        f"touch {started}; until [ -e {go} ]; do sleep 0.01; done; echo theirs > theirs.txt; "
        f"touch {made}; until [ -e {finish} ]; do sleep 0.01; done"
    )
    slow = subprocess.Popen(
        [str(EARSHOT), "bash", command],
        cwd=root,
        env=cli.env(other),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )

    def wait_for(path: Path) -> None:
        deadline = time.monotonic() + 120  # "never", on a loaded machine too
        while not path.exists():
            assert time.monotonic() < deadline and slow.poll() is None, f"no {path.name}"
            time.sleep(0.01)

    wait_for(started)
    fake = FakeAgent(cli.env(), root, agent="gemini", session="gemini-beside")
    try:
        fake.send("SessionStart", source="startup")
        fake.send("BeforeAgent", prompt="go")
        fake.send("BeforeModel")
        write = {
            "tool_name": "write_file",
            "tool_input": {"file_path": "mine.txt", "content": "mine\n"},
        }
        fake.send("BeforeTool", **write)
        (root / "mine.txt").write_text("mine\n")
        go.touch()  # the other session makes its file while the write runs
        wait_for(made)
        fake.send("AfterTool", tool_response={"llmContent": ""}, **write)
        fake.send("BeforeModel")
        fake.send("AfterAgent", prompt="go", prompt_response="done")
    finally:
        fake.close()
        finish.touch()
    assert slow.wait(timeout=120) == 0
    (gemini,) = [s["id"] for s in cli.json("sessions")["sessions"] if s["id"] != other]
    (batch,) = log_of(cli, gemini)["batches"]
    lines = {c["path"]: c for c in batch["changes"]}
    assert all(line["ambiguous"] for line in lines.values()), lines
    cli.run("undo", "--json", session=gemini, expect=None)
    assert (root / "theirs.txt").read_text() == "theirs\n"  # the other session's, kept


def test_rewind_asked_while_the_agent_waits_takes_its_open_batch_back_too(
    cli: Cli, root: Path, agent: Claude, tree: Callable[..., Any]
) -> None:
    before = tree(root)
    agent.prompt("one")
    agent.write(root / "a.txt", "a\n")  # still open: the person pressed Esc
    dry = cli.run("rewind", "1", "--code", "--dry-run", expect=1)
    assert "is running in another process" in dry.stderr  # a dry run commits nothing
    cli.run("rewind", "1", "--code")
    assert tree(root) == before


# -- what hostile timing and a full disk must not cost ----------------------------------


def test_what_a_running_call_changes_while_others_start_and_end_is_all_recorded(
    cli: Cli, root: Path, agent: Claude, tree: Callable[..., Any]
) -> None:
    import subprocess

    for i in range(300):
        (root / f"f{i}").write_text(f"precious {i}\n")
    before = tree(root)
    agent.prompt("p")
    long = agent.new_id()
    agent.pre("Bash", {"command": "a long delete"}, long)
    deleting = subprocess.Popen(
        ["sh", "-c", "for i in $(seq 0 299); do rm f$i; sleep 0.002; done"], cwd=root
    )
    for _ in range(6):  # calls that start and end while the long one deletes
        agent.bash("true", lambda: None)
    deleting.wait()
    agent.post("Bash", {"command": "a long delete"}, long)
    agent.response_end()
    (batch,) = log_of(cli)["batches"]
    assert len(batch["changes"]) == 300
    cli.run("undo")
    assert tree(root) == before


def test_the_person_s_change_between_two_calls_is_never_the_next_command_s(
    cli: Cli, root: Path, agent: Claude
) -> None:
    (root / "keep.txt").write_text("keep\n")
    agent.prompt("p")
    agent.write(root / "w.txt", "w\n")
    (root / "mine.txt").write_text("my own\n")  # the person, at a permission prompt
    (root / "keep.txt").write_text("keep, edited\n")
    agent.bash("ls", lambda: None)  # changes nothing
    agent.response_end()
    (batch,) = log_of(cli)["batches"]
    assert changes(batch) == {"w.txt": 0}
    cli.run("undo")
    assert (root / "mine.txt").read_text() == "my own\n"
    assert (root / "keep.txt").read_text() == "keep, edited\n"


def test_a_killed_agent_s_batch_never_pins_the_person_s_change_on_a_call(
    cli: Cli, root: Path, agent: Claude
) -> None:
    agent.prompt("p")
    agent.bash("touch a", lambda: (root / "a").write_text("agent\n"))
    (root / "mine.txt").write_text("my precious work\n")  # between two calls
    agent.bash("touch c", lambda: (root / "c").write_text("agent\n"))
    other = cli.run("session", "new").stdout.strip()
    agent.kill()  # no PostToolBatch, no Stop
    cli.run("bash", "true", session=other)  # records the interrupted batch
    mine = next(
        s["id"] for s in cli.run("sessions", "--json").json()["sessions"] if s["id"] != other
    )
    cli.run("undo", "--session", mine, expect=None)
    assert (root / "mine.txt").read_text() == "my precious work\n"


def test_a_note_lost_to_a_full_disk_never_makes_a_batch_that_changed_nothing(
    cli: Cli, root: Path, agent: Claude
) -> None:
    (root / "a").write_text("precious\n")
    agent.prompt("p")
    agent.bash("touch one", lambda: (root / "one").write_text("1\n"))
    agent.response_end()
    agent.env = cli.env(EARSHOT_FAULTS="intent-note@1+=enospc")  # the reserve spent too
    ident = agent.new_id()
    denied = agent.pre("Bash", {"command": "rm a"}, ident).answer()
    assert denied is not None and "unrecorded" in denied["systemMessage"]
    (root / "a").unlink()  # it ran all the same (not --strict)
    agent.env = cli.env()  # room again
    agent.post("Bash", {"command": "rm a"}, ident)
    agent.response_end()
    second = log_of(cli)["batches"][-1]
    assert second["interrupted"] is True
    assert changes(second) == {"a": "restage"}
    cli.run("undo")
    assert (root / "a").read_text() == "precious\n"


def test_strict_refuses_a_call_whose_start_could_not_be_noted(cli: Cli, root: Path) -> None:
    claude = Claude(cli.env(EARSHOT_FAULTS="intent-note@1+=enospc"), root, options="--strict")
    try:
        answer = claude.pre("Bash", {"command": "rm -r src"}, "toolu_full").answer()
    finally:
        claude.close()
    assert answer is not None
    assert answer["hookSpecificOutput"]["permissionDecision"] == "deny"


def test_an_agent_session_id_too_long_to_keep_is_refused_and_makes_no_session(
    cli: Cli, root: Path
) -> None:
    claude = Claude(cli.env(), root, session="x" * 600)
    try:
        answer = claude.pre("Bash", {"command": "true"}, "toolu_long").answer()
    finally:
        claude.close()
    assert answer is not None and "session id" in answer["systemMessage"]
    assert "no sessions" in cli.run("sessions").stdout


def test_earshot_undo_typed_as_the_prompt_first_ends_what_the_agent_left_running(
    cli: Cli, root: Path, agent: Claude
) -> None:
    agent.prompt("p")
    agent.write(root / "a.txt", "a\n")
    agent.pre("Bash", {"command": "rm -rf /"}, agent.new_id())  # denied: no end will come
    answer = agent.prompt("earshot undo").answer()
    assert answer is not None and answer["decision"] == "block"
    assert "delete  a.txt" in answer["reason"]
    assert not (root / "a.txt").exists()


def test_an_end_reported_after_its_batch_closed_is_no_gap(
    cli: Cli, root: Path, agent: Claude
) -> None:
    agent.prompt("p")
    ident = agent.new_id()
    agent.pre("Bash", {"command": "touch late"}, ident)
    (root / "late").write_text("")
    agent.response_end()  # closes, the call still running: recorded as its
    late = agent.post("Bash", {"command": "touch late"}, ident)
    assert late.answer() is None
    (batch,) = log_of(cli)["batches"]
    assert changes(batch) == {"late": 0}


def test_a_background_command_is_said_in_the_log(cli: Cli, root: Path, agent: Claude) -> None:
    agent.prompt("p")
    tool_input = {"command": "npm run dev", "run_in_background": True}
    ident = agent.new_id()
    agent.pre("Bash", tool_input, ident)
    agent.post("Bash", tool_input, ident)
    agent.response_end()
    (batch,) = log_of(cli)["batches"]
    assert batch["calls"][0]["background"] is True
    assert "ran on in the background" in cli.run("log").stdout


@pytest.mark.parametrize("cwd", ["relative/dir", "/proc/self", "/"])
def test_a_root_that_is_not_a_project_is_refused_in_words(
    cli: Cli, root: Path, cwd: str, home: Path
) -> None:
    claude = Claude(cli.env(), root)
    try:
        ran = claude.send_raw(
            json.dumps(
                {
                    "session_id": "s",
                    "cwd": cwd,
                    "hook_event_name": "PreToolUse",
                    "tool_name": "Bash",
                    "tool_input": {"command": "true"},
                    "tool_use_id": "t",
                }
            )
        )
    finally:
        claude.close()
    answer = ran.answer()
    assert ran.rc == 0 and answer is not None and "Bash runs unrecorded" in answer["systemMessage"]
    stores = [p.name for p in home.glob("checkpoints/*")]
    assert all(name.startswith("root-") for name in stores), stores  # the test's own root


def test_the_response_end_tells_the_person_what_undo_cannot_take_back(
    cli: Cli, root: Path, agent: Claude
) -> None:
    (root / ".gitignore").write_text("*.bin\nnode_modules/\n")
    (root / "model.bin").write_bytes(b"\x7fELF" + b"\0" * 60)  # compiled: not kept
    # No budget to read regenerable output before the rm (a large build's,
    # past 1,000 files or 64 MiB, is not read either): both stay unheld.
    agent.env["EARSHOT_IGNORED_DIR_FILES"] = "0"
    (root / "node_modules" / "pkg").mkdir(parents=True)
    (root / "node_modules" / "pkg" / "index.js").write_text("module.exports = 1\n")
    (root / "app.py").write_text("x = 1\n")
    agent.prompt("clean up")

    def clean() -> None:
        (root / "model.bin").unlink()
        shutil.rmtree(root / "node_modules")
        (root / "app.py").write_text("x = 2\n")

    agent.bash("rm -rf model.bin node_modules; edit app.py", clean)
    answer = agent.response_end().answer()
    assert answer is not None, log_of(cli)  # seen once under load: what was recorded
    assert answer["systemMessage"].splitlines() == [
        "earshot: not covered by undo: model.bin (a build output, deleted)",
        "earshot: not covered by undo: node_modules/ (a regenerable cache, deleted)",
    ]
    agent.stop()


def test_an_agents_rm_of_a_directory_kept_as_existence_is_read_first_and_undone(
    cli: Cli, root: Path, agent: Claude, tree: Callable[..., Any]
) -> None:
    (root / ".gitignore").write_text("data/\n")
    for i in range(6):
        (root / "data" / "sub").mkdir(parents=True, exist_ok=True)
        (root / "data" / "sub" / f"{i}.csv").write_text(f"{i},x\n" * 50)
    agent.env["EARSHOT_IGNORED_DIR_FILES"] = "3"  # data/ is over the budget
    cli.run("snapshot", env=cli.env(EARSHOT_IGNORED_DIR_FILES="3"))
    before = tree(root)
    agent.prompt("clean")
    agent.bash("true", lambda: None)  # the batch is open: the next start may be the daemon's
    agent.bash("rm -rf data", lambda: shutil.rmtree(root / "data"))
    answer = agent.response_end().answer()
    assert answer is None, answer  # everything it deleted is covered
    agent.stop()
    cli.run("undo", env=cli.env(EARSHOT_IGNORED_DIR_FILES="3"))
    assert tree(root) == before
