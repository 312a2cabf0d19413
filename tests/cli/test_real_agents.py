"""The real agents, hooked by ``earshot install``, on a scripted model: sessions,
batches, undo, redo and rewind of what they did, shell commands included.

Claude Code, Codex CLI and Gemini CLI run from their npm packages (pinned;
tests/real_agents installs them once) against scripted servers speaking each
provider's wire protocol on 127.0.0.1 (tests/model_servers). earshot runs as
people run it: installed into the agent's settings in the test's own home,
with the watch daemon hosting the hook events (``EARSHOT_WATCH=auto``).
"""

from __future__ import annotations

import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from earshot_cli import EARSHOT, Cli
from model_servers import AnthropicServer, GeminiServer, ResponsesServer, ToolCall
from real_agents import Invocation, claude, codex, gemini, run, start

pytestmark = pytest.mark.slow

Tree = Callable[..., dict[str, tuple[object, ...]]]


@pytest.fixture
def project(root: Path) -> Path:
    (root / "build").mkdir()
    (root / "build" / "old.o").write_text("object\n")
    (root / "src.py").write_text("x = 1\n")
    (root / "old.txt").write_text("old\n")
    return root


@pytest.fixture
def earshot(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> Iterator[Cli]:
    """The CLI on the test's home, with the daemon started as a person's would be."""
    monkeypatch.setenv("EARSHOT_WATCH", "auto")
    yield cli
    cli.run("watch", "--stop", expect=None)


def hooked(invocation: Invocation, cli: Cli, *options: str) -> Invocation:
    """``earshot install AGENT --user`` into the run's home (the driver wrote its
    settings afresh), run as the person would, with the agent's environment."""
    env = {**cli.env(), "HOME": str(invocation.home)}
    if invocation.agent == "codex":
        env["CODEX_HOME"] = invocation.env["CODEX_HOME"]
    done = subprocess.run(
        [str(EARSHOT), "install", invocation.agent, "--user", *options],
        env=env,
        cwd=invocation.cwd,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return Invocation(
        invocation.agent,
        invocation.argv,
        {**invocation.env, "EARSHOT_HOME": str(cli.home)},
        invocation.cwd,
        invocation.home,
    )


def batches(cli: Cli) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = cli.run("log", "--json").json()["batches"]
    return found


def changes(batch: dict[str, Any]) -> dict[str, Any]:
    return {c["path"]: c["by"] for c in batch["changes"]}


GENERATE = "rm -r build && mkdir gen && for i in 1 2 3; do echo $i > gen/f$i.txt; done"
EDIT = "echo 'x = 2' > src.py && rm old.txt"


# -- Claude Code ------------------------------------------------------------------


def test_claude_sessions_undo_redo_and_rewind_leave_the_exact_trees(
    earshot: Cli, project: Path, tmp_path: Path, tree: Tree
) -> None:
    home = tmp_path / "claude-home"
    states = [tree(project)]
    script = [
        [
            ToolCall("Bash", {"command": GENERATE, "description": "generate"}),
            ToolCall("Write", {"file_path": str(project / "notes.md"), "content": "notes\n"}),
        ],
        "generated",
        [ToolCall("Bash", {"command": EDIT, "description": "edit"})],
        "edited",
    ]
    with AnthropicServer(script) as model:
        first = run(hooked(claude("generate it", cwd=project, model=model, home=home), earshot))
        assert first.rc == 0, first
        states.append(tree(project))
        again = claude("now edit", cwd=project, model=model, home=home, resume=first.session_id)
        second = run(hooked(again, earshot))
        assert second.rc == 0, second
        states.append(tree(project))
    assert (project / "gen" / "f3.txt").exists() and not (project / "old.txt").exists()
    made = batches(earshot)
    assert [changes(b) for b in made] == [
        {"build/old.o": 0, "gen/f1.txt": 0, "gen/f2.txt": 0, "gen/f3.txt": 0, "notes.md": 1},
        {"src.py": 0, "old.txt": 0},
    ]
    assert [c["tool"] for c in made[0]["calls"]] == ["bash", "Write"]
    prompts = earshot.run("tree", "--json").json()["prompts"]
    assert [p["text"] for p in prompts] == ["generate it", "now edit"]
    sessions = earshot.run("sessions", "--json").json()["sessions"]
    assert len(sessions) == 1  # the resumed agent session is the same earshot session

    earshot.run("undo")
    assert tree(project) == states[1]
    earshot.run("redo")
    assert tree(project) == states[2]
    earshot.run("undo", "2")
    assert tree(project) == states[0]
    earshot.run("redo")
    assert tree(project) == states[2]
    earshot.run("rewind", "1", "--code")
    assert tree(project) == states[0]
    earshot.run("redo")
    assert tree(project) == states[2]


def test_claude_a_failed_call_is_recorded_and_undone(
    earshot: Cli, project: Path, tmp_path: Path, tree: Tree
) -> None:
    before = tree(project)
    failing = "echo partial > partial.txt; exit 1"
    script = [[ToolCall("Bash", {"command": failing, "description": "fail"})], "it failed"]
    with AnthropicServer(script) as model:
        done = run(hooked(claude("try", cwd=project, model=model, home=tmp_path / "h"), earshot))
    assert done.rc == 0, done
    (batch,) = batches(earshot)
    assert changes(batch) == {"partial.txt": 0}
    assert batch["calls"][0]["error"].startswith("Exit code 1")
    earshot.run("undo")
    assert tree(project) == before


def _interrupt(earshot: Cli, project: Path, home: Path, how: signal.Signals) -> None:
    """Run a long command in Claude Code and send it ``how`` once the command began."""
    long = "echo started > started.txt; sleep 30; echo late > late.txt"
    script = [[ToolCall("Bash", {"command": long, "description": "long"})], "never"]
    with AnthropicServer(script) as model:
        running = start(hooked(claude("long job", cwd=project, model=model, home=home), earshot))
        deadline = time.monotonic() + 60
        while not (project / "started.txt").exists():
            assert time.monotonic() < deadline, "the command never started"
            time.sleep(0.05)
        running.signal(how)
        running.wait()  # kills what the agent left running, as its run tag says
    assert not (project / "late.txt").exists()


def test_claude_interrupted_by_ctrl_c_keeps_the_call_s_changes_its_own(
    earshot: Cli, project: Path, tmp_path: Path, tree: Tree
) -> None:
    # SIGINT: Claude Code kills the command and ends the session; its
    # SessionEnd closes the batch, the call's end never having come.
    before = tree(project)
    _interrupt(earshot, project, tmp_path / "h", signal.SIGINT)
    (batch,) = batches(earshot)
    assert changes(batch) == {"started.txt": 0}
    assert batch["calls"][0]["unfinished"] == "the agent's session ended"
    earshot.run("undo")
    assert tree(project) == before


def test_claude_killed_leaves_an_open_batch_the_next_command_records(
    earshot: Cli, project: Path, tmp_path: Path, tree: Tree
) -> None:
    # SIGKILL: nothing more is said. The next command finds the batch open
    # with its agent gone and records it as interrupted; undo restores what
    # it can prove, and keeps the file only the (killed) command made, since
    # the person may have made it after the kill.
    _interrupt(earshot, project, tmp_path / "h", signal.SIGKILL)
    kept = earshot.run("undo", expect=3)
    assert "recorded interrupted batch 1" in kept.stderr
    assert "kept    started.txt: not made by a call of this session" in kept.stdout
    assert batches(earshot)[0]["interrupted"] is True


def test_claude_earshot_commands_typed_in_the_agent_never_reach_the_model(
    earshot: Cli, project: Path, tmp_path: Path, tree: Tree
) -> None:
    before = tree(project)
    home = tmp_path / "h"
    script = [[ToolCall("Bash", {"command": EDIT, "description": "edit"})], "edited"]
    with AnthropicServer(script) as model:
        first = run(hooked(claude("edit it", cwd=project, model=model, home=home), earshot))
        assert tree(project) != before
        asked = len(model.main_requests)
        inside = claude(
            "/earshot undo", cwd=project, model=model, home=home, resume=first.session_id
        )
        undone = run(hooked(inside, earshot))
        assert len(model.main_requests) == asked, "the command reached the model"
    assert tree(project) == before
    assert "restore old.txt" in undone.stdout + undone.stderr


# -- Codex CLI and Gemini CLI -------------------------------------------------------


PATCH = "*** Begin Patch\n*** Add File: notes.md\n+notes\n*** End Patch\n"


def test_codex_turns_are_batches_and_undo_and_rewind_restore_them(
    earshot: Cli, project: Path, tmp_path: Path, tree: Tree
) -> None:
    home = tmp_path / "codex-home"
    states = [tree(project)]
    script = [
        [ToolCall("exec_command", {"cmd": GENERATE}), ToolCall("apply_patch", PATCH)],
        "generated",
        [ToolCall("exec_command", {"cmd": EDIT})],
        "edited",
    ]
    with ResponsesServer(script) as model:
        first = run(hooked(codex("generate it", cwd=project, model=model, home=home), earshot))
        assert first.rc == 0, first
        states.append(tree(project))
        again = codex("now edit", cwd=project, model=model, home=home, resume=first.session_id)
        assert run(hooked(again, earshot)).rc == 0
        states.append(tree(project))
    made = batches(earshot)
    assert [set(changes(b)) for b in made] == [
        {"build/old.o", "gen/f1.txt", "gen/f2.txt", "gen/f3.txt", "notes.md"},
        {"src.py", "old.txt"},
    ]
    prompts = earshot.run("tree", "--json").json()["prompts"]
    assert [p["text"] for p in prompts] == ["generate it", "now edit"]
    earshot.run("undo")
    assert tree(project) == states[1]
    earshot.run("rewind", "1", "--code")
    assert tree(project) == states[0]
    earshot.run("redo")
    assert tree(project) == states[1]


def test_gemini_responses_are_batches_and_undo_restores_them(
    earshot: Cli, project: Path, tmp_path: Path, tree: Tree
) -> None:
    home = tmp_path / "gemini-home"
    states = [tree(project)]
    script = [
        [
            ToolCall("run_shell_command", {"command": GENERATE, "description": "generate"}),
        ],
        [ToolCall("write_file", {"file_path": "notes.md", "content": "notes\n"})],
        "generated",
    ]
    with GeminiServer(script) as model:
        done = run(hooked(gemini("generate it", cwd=project, model=model, home=home), earshot))
        assert done.rc == 0, done
    states.append(tree(project))
    made = batches(earshot)
    assert [changes(b) for b in made] == [
        {"build/old.o": 0, "gen/f1.txt": 0, "gen/f2.txt": 0, "gen/f3.txt": 0},
        {"notes.md": 0},
    ]
    earshot.run("undo", "2")
    assert tree(project) == states[0]
    earshot.run("redo")
    assert tree(project) == states[1]
