"""The real agents, hooked by ``earshot install``, on a scripted model: sessions,
batches, undo, redo and rewind of what they did, shell commands included.

Claude Code, Codex CLI and Gemini CLI run from their npm packages (pinned;
tests/real_agents installs them once) against scripted servers speaking each
provider's wire protocol on 127.0.0.1 (tests/model_servers). earshot runs as
people run it: installed into the agent's settings in the test's own home,
with the watch daemon hosting the hook events (``EARSHOT_WATCH=auto``).
Every scenario runs under each agent.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from earshot_cli import EARSHOT, Cli
from model_servers import AnthropicServer, GeminiServer, ResponsesServer, ScriptedServer, ToolCall
from real_agents import AgentRun, Invocation, Running, claude, codex, gemini, run, start

pytestmark = pytest.mark.slow

Tree = Callable[..., dict[str, tuple[object, ...]]]

#: Codex refuses "rm -f" commands whatever its approval settings; "rm -r" passes.
GENERATE = "rm -r build && mkdir gen && for i in 1 2 3; do echo $i > gen/f$i.txt; done"
EDIT = "echo 'x = 2' > src.py && rm old.txt"
LONG = "echo started > started.txt; sleep 30; echo late > late.txt"


@dataclass(frozen=True)
class Kit:
    """What differs between the agents: their server, their tools, their invocation."""

    name: str
    server: type[ScriptedServer]
    invoke: Callable[..., Invocation]

    def shell(self, command: str) -> ToolCall:
        if self.name == "claude":
            return ToolCall("Bash", {"command": command, "description": "run"})
        if self.name == "codex":
            return ToolCall("exec_command", {"cmd": command})
        return ToolCall("run_shell_command", {"command": command, "description": "run"})

    def write(self, project: Path, name: str, text: str) -> ToolCall:
        if self.name == "claude":
            return ToolCall("Write", {"file_path": str(project / name), "content": text})
        if self.name == "codex":
            body = "".join(f"+{line}\n" for line in text.splitlines())
            return ToolCall(
                "apply_patch", f"*** Begin Patch\n*** Add File: {name}\n{body}*** End Patch\n"
            )
        return ToolCall("write_file", {"file_path": name, "content": text})

    def interrupt(self, running: Running) -> None:
        """A person's Ctrl-C: Claude Code takes it itself; Gemini's launcher
        ignores it, its worker does not; Codex's launcher passes it on."""
        pid = running.worker() if self.name == "gemini" else running.pid
        os.kill(pid, signal.SIGINT)

    #: The prompt that runs ``earshot undo`` inside the agent (Codex has no
    #: custom commands: the prompt itself).
    @property
    def undo_prompt(self) -> str:
        return "earshot undo" if self.name == "codex" else "/earshot undo"


KITS = {
    "claude": Kit("claude", AnthropicServer, claude),
    "codex": Kit("codex", ResponsesServer, codex),
    "gemini": Kit("gemini", GeminiServer, gemini),
}


@pytest.fixture(params=sorted(KITS))
def kit(request: pytest.FixtureRequest) -> Kit:
    return KITS[request.param]


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
    env = {**invocation.env, "EARSHOT_HOME": str(cli.home)}
    return Invocation(invocation.agent, invocation.argv, env, invocation.cwd, invocation.home)


def session(
    kit: Kit, cli: Cli, project: Path, home: Path, model: ScriptedServer, prompt: str, **more: Any
) -> AgentRun:
    done = run(hooked(kit.invoke(prompt, cwd=project, model=model, home=home, **more), cli))
    assert done.rc == 0, done
    return done


def batches(cli: Cli) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = cli.run("log", "--json").json()["batches"]
    return found


def changes(batch: dict[str, Any]) -> dict[str, Any]:
    return {c["path"]: c["by"] for c in batch["changes"]}


def test_two_prompts_make_two_batches_and_undo_redo_rewind_leave_the_exact_trees(
    kit: Kit, earshot: Cli, project: Path, tmp_path: Path, tree: Tree
) -> None:
    home = tmp_path / f"{kit.name}-home"
    states = [tree(project)]
    script = [
        [kit.shell(GENERATE), kit.write(project, "notes.md", "notes\n")],
        "generated",
        [kit.shell(EDIT)],
        "edited",
    ]
    with kit.server(script) as model:
        first = session(kit, earshot, project, home, model, "generate it")
        states.append(tree(project))
        session(kit, earshot, project, home, model, "now edit", resume=first.session_id)
        states.append(tree(project))
    assert (project / "gen" / "f3.txt").exists() and not (project / "old.txt").exists()
    made = batches(earshot)
    assert [changes(b) for b in made] == [
        {"build/old.o": 0, "gen/f1.txt": 0, "gen/f2.txt": 0, "gen/f3.txt": 0, "notes.md": 1},
        {"src.py": 0, "old.txt": 0},
    ]
    assert made[0]["calls"][0]["tool"] == "bash"
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


def test_a_failed_call_is_recorded_and_undone(
    kit: Kit, earshot: Cli, project: Path, tmp_path: Path, tree: Tree
) -> None:
    before = tree(project)
    script = [[kit.shell("echo partial > partial.txt; exit 1")], "it failed"]
    with kit.server(script) as model:
        session(kit, earshot, project, tmp_path / "h", model, "try")
    (batch,) = batches(earshot)
    assert changes(batch) == {"partial.txt": 0}
    if kit.name == "claude":  # the only one that says a call failed
        assert batch["calls"][0]["error"].startswith("Exit code 1")
    earshot.run("undo")
    assert tree(project) == before


def test_an_interrupted_call_keeps_what_it_did_and_undo_takes_it_back(
    kit: Kit, earshot: Cli, project: Path, tmp_path: Path, tree: Tree
) -> None:
    # Each agent ends its session on Ctrl-C (SessionEnd) without saying the
    # call ended: the batch closes, the call's changes its own.
    before = tree(project)
    script = [[kit.shell(LONG)], "never"]
    with kit.server(script) as model:
        invocation = kit.invoke("long job", cwd=project, model=model, home=tmp_path / "h")
        running = start(hooked(invocation, earshot))
        deadline = time.monotonic() + 60
        while not (project / "started.txt").exists():
            assert time.monotonic() < deadline, "the command never started"
            time.sleep(0.05)
        kit.interrupt(running)
        running.wait()  # and what the agent left running is killed, as its run tag says
    assert not (project / "late.txt").exists()
    (batch,) = batches(earshot)
    assert changes(batch) == {"started.txt": 0}
    assert batch["calls"][0]["unfinished"] == "the agent's session ended"
    earshot.run("undo")
    assert tree(project) == before


def test_earshot_undo_typed_in_the_agent_undoes_and_never_reaches_the_model(
    kit: Kit, earshot: Cli, project: Path, tmp_path: Path, tree: Tree
) -> None:
    before = tree(project)
    home = tmp_path / "h"
    script = [[kit.shell(EDIT)], "edited"]
    with kit.server(script) as model:
        first = session(kit, earshot, project, home, model, "edit it")
        assert tree(project) != before
        asked = len(model.main_requests)
        resume = first.session_id
        inside = run(
            hooked(
                kit.invoke(kit.undo_prompt, cwd=project, model=model, home=home, resume=resume),
                earshot,
            )
        )
        assert len(model.main_requests) == asked, "the command reached the model"
    assert tree(project) == before
    assert [b["kind"] for b in batches(earshot)] == ["calls", "undo"]
    if kit.name != "codex":  # codex exec prints only "hook: UserPromptSubmit Blocked"
        assert "restore old.txt" in inside.stdout + inside.stderr


def test_claude_killed_leaves_an_open_batch_the_next_command_records(
    earshot: Cli, project: Path, tmp_path: Path
) -> None:
    # kill -9: nothing more is said. The next command finds the batch open
    # with its agent gone and records it as interrupted; undo keeps the file
    # only the killed command made (no note proves a call made it: the
    # person may have made it after the kill), and says so.
    kit = KITS["claude"]
    script = [[kit.shell(LONG)], "never"]
    with kit.server(script) as model:
        invocation = kit.invoke("long job", cwd=project, model=model, home=tmp_path / "h")
        running = start(hooked(invocation, earshot))
        deadline = time.monotonic() + 60
        while not (project / "started.txt").exists():
            assert time.monotonic() < deadline, "the command never started"
            time.sleep(0.05)
        running.signal(signal.SIGKILL)
        running.wait()
    kept = earshot.run("undo", expect=3)
    assert "recorded interrupted batch 1" in kept.stderr
    assert "kept    started.txt: not made by a call of this session" in kept.stdout
    assert batches(earshot)[0]["interrupted"] is True


def test_codex_runs_earshot_s_hooks_once_install_trusted_them(
    earshot: Cli, project: Path, tmp_path: Path
) -> None:
    # ``codex exec`` skips hooks nobody trusted, without a word: without
    # --trust nothing is recorded; with it, the batch is.
    kit = KITS["codex"]
    for trust, expected in (((), 0), (("--trust",), 1)):
        home = tmp_path / f"codex-home-{len(trust)}"
        with kit.server([[kit.shell("echo x > made.txt")], "done"]) as model:
            built = hooked(
                kit.invoke("make it", cwd=project, model=model, home=home), earshot, *trust
            )
            argv = tuple(a for a in built.argv if a != "--dangerously-bypass-hook-trust")
            done = run(Invocation(built.agent, argv, built.env, built.cwd, built.home))
        assert done.rc == 0, done
        assert len(batches(earshot) if expected else _batches_or_none(earshot)) == expected
        (project / "made.txt").unlink()


def _batches_or_none(cli: Cli) -> list[dict[str, Any]]:
    ran = cli.run("log", "--json", expect=None)
    return [] if ran.rc != 0 else list(ran.json()["batches"])


def test_claudes_rm_of_an_ignored_env_is_undone_and_what_undo_cannot_take_back_is_shown(
    earshot: Cli, project: Path, tmp_path: Path, tree: Tree, monkeypatch: pytest.MonkeyPatch
) -> None:
    kit = KITS["claude"]
    # No budget to read regenerable output before the rm (a large build's is
    # not read either): model.bin stays existence only, and is said.
    monkeypatch.setenv("EARSHOT_IGNORED_DIR_FILES", "0")
    (project / ".gitignore").write_text(".env\n*.bin\n")
    (project / ".env").write_text("API_KEY=secret\n")
    (project / "model.bin").write_bytes(b"\x7fELF" + bytes(range(256)))  # compiled: not kept
    before = tree(project)
    home = tmp_path / "h"
    script = [[kit.shell("rm -f .env model.bin")], "removed"]
    with kit.server(script) as model:
        invocation = hooked(kit.invoke("clean up", cwd=project, model=model, home=home), earshot)
        invocation.env["EARSHOT_IGNORED_DIR_FILES"] = "0"  # to the hooks, as to earshot here
        done = run(invocation)
        assert done.rc == 0, done
    assert not (project / ".env").exists()
    (batch,) = batches(earshot)
    assert batch["uncovered"] == [
        {"path": "model.bin", "reason": "a build output", "change": "deleted"}
    ]
    # The hook's message reached Claude Code's own transcript of the session.
    transcripts = "".join(p.read_text() for p in home.rglob("*.jsonl"))
    assert "not covered by undo: model.bin (a build output, deleted)" in transcripts
    earshot.run("undo", expect=3)  # model.bin is kept as it is (gone), and said
    assert (project / ".env").read_text() == "API_KEY=secret\n"
    restored = tree(project)
    del before["model.bin"]
    assert restored == before


def test_codex_records_after_a_project_install_with_trust_and_warns_of_no_clamp(
    earshot: Cli, project: Path, tmp_path: Path
) -> None:
    # Tried as a new user would: 'earshot install codex --trust' in the project
    # (its .codex/hooks.json), no hand edit of Codex's config, 'codex exec' as is.
    kit = KITS["codex"]
    home = tmp_path / "codex-home"
    with kit.server([[kit.shell("echo x > made.txt")], "done"]) as model:
        built = kit.invoke("make it", cwd=project, model=model, home=home)
        env = {**earshot.env(), "HOME": str(home), "CODEX_HOME": built.env["CODEX_HOME"]}
        done = subprocess.run(
            [str(EARSHOT), "install", "codex", "--trust"],
            env=env,
            cwd=project,
            capture_output=True,
            text=True,
            check=False,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        assert "FAILED" not in done.stdout, done.stdout
        argv = tuple(a for a in built.argv if a != "--dangerously-bypass-hook-trust")
        run_env = {**built.env, "EARSHOT_HOME": str(earshot.home)}
        ran = run(Invocation(built.agent, argv, run_env, built.cwd, built.home))
    assert ran.rc == 0, ran
    assert "clamping" not in ran.stdout + ran.stderr, ran
    (batch,) = batches(earshot)
    assert changes(batch) == {"made.txt": 0}
    doctor = earshot.run("doctor", "codex", "--json", env=env).json()
    assert doctor["ok"] is True, doctor
