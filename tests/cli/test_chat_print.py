"""``earshot chat -p``: the agent against scripted model servers, through the real SDKs.

Each test runs the real ``earshot`` script; its model is a local server
speaking the Anthropic Messages API or OpenAI Chat Completions (streamed,
tests/model_servers), reached through each SDK's base-URL variable. What
the agent did is checked on disk, in the session file and with the CLI's
own commands.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from earshot_cli import EARSHOT, Cli, Ran
from model_servers import (
    AnthropicServer,
    Broken,
    ChatCompletionsServer,
    CutOff,
    Fail,
    Hang,
    ScriptedServer,
    ToolCall,
    Turn,
)

PROVIDERS = {
    "anthropic": (AnthropicServer, "anthropic:claude-test"),
    "openai": (ChatCompletionsServer, "openai:gpt-test"),
}
ALL = "bash,write_file,edit"


class Agent:
    """``earshot chat -p`` on one scripted server."""

    def __init__(self, cli: Cli, provider: str, script: list[Turn]) -> None:
        server_class, self.model = PROVIDERS[provider]
        self.provider = provider
        self.server: ScriptedServer = server_class(script)
        self.cli = cli

    def env(self, **extra: str) -> dict[str, str]:
        url = self.server.url
        return self.cli.env(
            ANTHROPIC_BASE_URL=url,
            ANTHROPIC_API_KEY="test-key",
            OPENAI_BASE_URL=f"{url}/v1",
            OPENAI_API_KEY="test-key",
            **extra,
        )

    def chat(self, prompt: str, *more: str, expect: int | None = 0, **env: str) -> Ran:
        args = ("chat", "-p", prompt, "--model", self.model, "--json", *more)
        return self.cli.run(*args, env=self.env(**env), expect=expect, timeout=120)

    def messages(self, index: int = -1) -> list[dict[str, Any]]:
        """The messages of a main request, in the provider's wire format."""
        found: list[dict[str, Any]] = self.server.main_requests[index]["messages"]
        return found


@pytest.fixture
def provider() -> str:
    """The provider a test's model speaks; ``both`` runs a test with each."""
    return "anthropic"


#: Run with each provider: the tests of what the two wire formats must agree on.
both = pytest.mark.parametrize("provider", sorted(PROVIDERS))


@pytest.fixture
def agent(cli: Cli, provider: str) -> Iterator[Callable[[list[Turn]], Agent]]:
    made: list[Agent] = []

    def make(script: list[Turn]) -> Agent:
        made.append(Agent(cli, provider, script))
        return made[-1]

    yield make
    for one in made:
        one.server.close()


def entries(cli: Cli, session: str) -> list[dict[str, Any]]:
    (path,) = (cli.home / "sessions").glob(f"*/{session}.jsonl")
    return [json.loads(line) for line in path.read_text().splitlines()[1:]]


def kinds(cli: Cli, session: str) -> list[str]:
    return [e["type"] for e in entries(cli, session)]


def texts_sent(agent: Agent, index: int = -1) -> list[str]:
    """Every text the request carried (user and assistant, tool results), in order."""
    out = []
    for message in agent.messages(index):
        if message.get("role") == "system":
            continue
        content = message.get("content")
        if isinstance(content, str):
            out.append(content)
        for block in content if isinstance(content, list) else ():
            text = block.get("text") or block.get("content")
            if isinstance(text, str):
                out.append(text)
    return out


def destructive_turns() -> list[Turn]:
    return [
        [
            "Writing, editing, deleting.",
            ToolCall("write_file", {"path": "new.txt", "content": "made by the model\n"}),
            ToolCall("edit", {"path": "app.py", "old": "x = 1", "new": "x = 2"}),
            ToolCall("bash", {"command": "rm -r data && echo removed"}),
        ],
        "Done: wrote new.txt, edited app.py, removed data/.",
    ]


def seed(root: Path) -> None:
    (root / "app.py").write_text("x = 1\n")
    (root / "data").mkdir()
    (root / "data" / "keep.csv").write_text("a,b\n1,2\n")


# -- a whole session, then the CLI's commands on it --------------------------------


@both
def test_a_destructive_session_is_one_batch_undone_redone_rewound_and_continued(
    cli: Cli, root: Path, agent: Callable[[list[Turn]], Agent], tree: Callable[..., Any]
) -> None:
    seed(root)
    start = tree(root)
    model = agent([*destructive_turns(), "Second prompt answered."])
    doc = model.chat("clean up", "--allow", ALL).json()
    assert doc["text"] == "Done: wrote new.txt, edited app.py, removed data/."
    assert doc["batches"] == [1]
    session = doc["session"]
    assert (root / "new.txt").read_text() == "made by the model\n"
    assert (root / "app.py").read_text() == "x = 2\n"
    assert not (root / "data").exists()
    after = tree(root)
    # The session file: the prompt, the reply's text and calls, the batch, the results.
    assert kinds(cli, session) == [
        "user",
        "assistant",
        "tool_call",
        "tool_call",
        "tool_call",
        *["permission"] * 3,
        "batch",
        "tool_result",
        "tool_result",
        "tool_result",
        "assistant",
    ]
    results = [e for e in entries(cli, session) if e["type"] == "tool_result"]
    assert "removed" in results[2]["output"] and "[exit code 0]" in results[2]["output"]
    # What the model was told came back to it: the results after its calls.
    assert "removed\n\n[exit code 0]" in texts_sent(model)
    # The CLI sees the same session and batch.
    (batch,) = cli.json("log")["batches"]
    assert [c["tool"] for c in batch["calls"]] == ["write_file", "edit", "bash"]
    assert {c["path"] for c in batch["changes"]} == {"new.txt", "app.py", "data/keep.csv"}
    cli.run("undo")
    assert tree(root) == start
    cli.run("redo")
    assert tree(root) == after
    cli.run("rewind", "1", "--code")
    assert tree(root) == start
    again = model.chat("try again", "--continue").json()
    assert again["session"] == session and again["text"] == "Second prompt answered."
    # Rewound: the model sees the new prompt alone, not the abandoned branch.
    assert texts_sent(model) == ["try again"]
    prompts = cli.json("tree")["prompts"]
    assert [p["text"] for p in prompts] == ["try again"]
    assert prompts[0]["branches"]


@both
def test_continue_sends_the_conversation_so_far_and_batches_number_on(
    cli: Cli, root: Path, agent: Callable[[list[Turn]], Agent]
) -> None:
    model = agent(
        [
            [ToolCall("write_file", {"path": "a.txt", "content": "1\n"})],
            "first done",
            [ToolCall("bash", {"command": "echo 2 >> a.txt"})],
            "second done",
        ]
    )
    first = model.chat("one", "--allow", ALL).json()
    second = model.chat("two", "--continue", "--allow", ALL).json()
    assert second["session"] == first["session"]
    assert (first["batches"], second["batches"]) == ([1], [2])
    sent = texts_sent(model)
    assert sent[0] == "one" and "first done" in sent and sent[-2] == "two"
    assert (root / "a.txt").read_text() == "1\n2\n"
    cli.run("undo")
    assert (root / "a.txt").read_text() == "1\n"


def test_a_session_made_by_the_cli_is_continued_by_chat_and_the_other_way_round(
    cli: Cli, root: Path, agent: Callable[[list[Turn]], Agent]
) -> None:
    session = cli.new_session()
    cli.run("prompt", "make notes", session=session)
    cli.run("write", "notes.md", stdin="by hand\n", session=session)
    model = agent([[ToolCall("edit", {"path": "notes.md", "old": "hand", "new": "model"})], "ok"])
    doc = model.chat("now edit them", "--resume", session[:12], "--allow", "edit").json()
    assert doc["session"] == session
    assert texts_sent(model)[0].startswith("make notes")
    assert (root / "notes.md").read_text() == "by model\n"
    log = cli.json("log", session=session)["batches"]
    assert [b["seq"] for b in log] == [1, 2]
    cli.run("undo", session=session)
    assert (root / "notes.md").read_text() == "by hand\n"


# -- errors of the provider, and of the model ---------------------------------------


@both
def test_a_provider_error_mid_stream_is_one_line_and_the_session_goes_on(
    cli: Cli, root: Path, agent: Callable[[list[Turn]], Agent]
) -> None:
    model = agent([Broken("Half a rep", "overloaded mid-reply"), "Recovered."])
    ran = model.chat("hello", expect=1)
    assert ran.json()["error"]["message"] in ran.stderr  # --json: the error is the document
    (line,) = ran.stderr.splitlines()
    assert line.startswith("earshot: ") and "broke off" in line and "overloaded mid-reply" in line
    again = model.chat("hello again", "--continue").json()
    assert again["text"] == "Recovered."
    # What streamed before the failure is in the log, marked, and sent again.
    sent = texts_sent(model)
    assert sent[0] == "hello" and sent[1].startswith("Half a rep") and "broke off" in sent[1]


@both
def test_a_reply_whose_stream_stops_before_its_end_is_broken_off_and_its_calls_never_run(
    cli: Cli, root: Path, agent: Callable[[list[Turn]], Agent]
) -> None:
    cut = CutOff(["I will now", ToolCall("write_file", {"path": "t.txt", "content": "x"})])
    model = agent([cut, "Recovered."])
    ran = model.chat("go", "--allow", ALL, expect=1)
    assert "the reply broke off" in ran.stderr and ran.json()["error"]["exit"] == 1
    assert not (root / "t.txt").exists()
    assert model.chat("again", "--continue").json()["text"] == "Recovered."
    assert any(t.startswith("I will now") and "broke off" in t for t in texts_sent(model))


@both
def test_a_model_that_gives_one_call_id_twice_gets_each_call_its_own(
    cli: Cli, root: Path, agent: Callable[[list[Turn]], Agent]
) -> None:
    calls = [
        ToolCall("write_file", {"path": "a.txt", "content": "a"}, id="dup"),
        ToolCall("write_file", {"path": "b.txt", "content": "b"}, id="dup"),
    ]
    model = agent([calls, "ok"])
    doc = model.chat("go", "--allow", ALL).json()
    assert (root / "a.txt").exists() and (root / "b.txt").exists()
    results = [e["callId"] for e in entries(cli, doc["session"]) if e["type"] == "tool_result"]
    assert results == ["dup", "dup-2"]


def test_a_second_chat_on_a_session_whose_turn_runs_is_refused_and_changes_nothing(
    cli: Cli, root: Path, agent: Callable[[list[Turn]], Agent]
) -> None:
    # The turn runs until the test says go: the second chat is refused while
    # it runs, however slowly a loaded machine starts that chat.
    go = root.parent / "go"
    command = f"touch started; while [ ! -e {go} ]; do sleep 0.05; done; echo A > A.txt"
    first = agent([[ToolCall("bash", {"command": command})], "A done"])
    args = ["chat", "-p", "go", "--model", first.model, "--allow", ALL, "--json"]
    proc = subprocess.Popen(
        [str(EARSHOT), *args], cwd=root, env=first.env(), stdout=subprocess.PIPE, text=True
    )
    deadline = time.monotonic() + 60
    while not (root / "started").exists():
        assert time.monotonic() < deadline and proc.poll() is None
        time.sleep(0.05)
    second = agent(["B done"])
    ran = second.chat("me too", "--continue", expect=1)
    assert "is running a turn in another process" in ran.stderr
    assert second.server.main_requests == []
    # Nor may a rewind move the leaf from under it: the turn's results would
    # hang off another branch than its calls.
    (running,) = cli.json("sessions")["sessions"]
    rewound = cli.run("rewind", "1", session=running["id"], expect=1)
    assert "is running a turn in another process" in rewound.stderr
    go.touch()
    out, _ = proc.communicate(timeout=120)
    session = json.loads(out)["session"]
    results = [e for e in entries(cli, session) if e["type"] == "tool_result"]
    assert len(results) == 1 and "[exit code 0]" in results[0]["output"]
    assert [e["text"] for e in entries(cli, session) if e["type"] == "user"] == ["go"]


@both
@pytest.mark.parametrize(
    ("failure", "said"),
    [(Fail(401, "invalid x-api-key"), "key was refused"), (Fail(404, "no model"), "no such model")],
)
def test_a_refused_request_is_one_line_that_says_what_to_do(
    cli: Cli, agent: Callable[[list[Turn]], Agent], failure: Fail, said: str
) -> None:
    ran = agent([failure]).chat("hello", expect=1)
    (line,) = ran.stderr.splitlines()
    assert said in line and failure.message in line
    assert ran.json()["error"]["message"] in line  # --json: the error is the document
    # Refused before any reply: no session is left to be "the most recent".
    assert cli.json("sessions")["sessions"] == []


def test_an_unreachable_server_is_one_line(cli: Cli, root: Path) -> None:
    env = cli.env(ANTHROPIC_BASE_URL="http://127.0.0.1:9", ANTHROPIC_API_KEY="k")
    ran = cli.run("chat", "-p", "hi", "--model", "anthropic:x", env=env, expect=1, timeout=120)
    (line,) = ran.stderr.splitlines()
    assert "cannot reach the server" in line


@both
def test_tool_calls_the_model_gets_wrong_get_error_results_and_the_turn_goes_on(
    cli: Cli, root: Path, agent: Callable[[list[Turn]], Agent]
) -> None:
    model = agent(
        [
            [
                ToolCall("delete_everything", {"path": "."}),
                ToolCall("write_file", {"path": "a.txt"}),
                ToolCall("edit", {"path": "missing.txt", "old": "a", "new": "b"}),
                ToolCall("write_file", {"path": "ok.txt", "content": "fine\n"}),
            ],
            "I see the errors.",
        ]
    )
    doc = model.chat("go", "--allow", ALL).json()
    assert doc["text"] == "I see the errors."
    assert (root / "ok.txt").read_text() == "fine\n"
    results = [e for e in entries(cli, doc["session"]) if e["type"] == "tool_result"]
    assert [r.get("isError", False) for r in results] == [True, True, True, False]
    assert "unknown tool 'delete_everything'" in results[0]["output"]
    assert "needs a string 'content'" in results[1]["output"]
    assert "missing.txt" in results[2]["output"]


def test_print_mode_denies_what_allow_leaves_out_and_tells_the_model(
    cli: Cli, root: Path, agent: Callable[[list[Turn]], Agent]
) -> None:
    model = agent(
        [
            [
                ToolCall("bash", {"command": "touch ran.txt"}),
                ToolCall("write_file", {"path": "w.txt", "content": "w\n"}),
            ],
            "ok",
        ]
    )
    ran = model.chat("go", "--allow", "write_file")
    assert not (root / "ran.txt").exists() and (root / "w.txt").exists()
    assert "bash denied" in ran.stderr and "--allow bash" in ran.stderr
    results = [e for e in entries(cli, ran.json()["session"]) if e["type"] == "tool_result"]
    assert results[0]["isError"] and "did not allow bash" in results[0]["output"]
    # Grants are recorded in the log, and not restored: --continue asks again.
    perms = [e for e in entries(cli, ran.json()["session"]) if e["type"] == "permission"]
    assert [(p["tool"], p["detail"]["by"]) for p in perms] == [("write_file", "--allow")]


def test_grants_are_not_restored_on_continue(
    cli: Cli, root: Path, agent: Callable[[list[Turn]], Agent]
) -> None:
    touch = [ToolCall("bash", {"command": "touch again.txt"})]
    model = agent([touch, "first", touch, "second"])
    model.chat("go", "--allow", "bash")
    assert (root / "again.txt").exists()
    (root / "again.txt").unlink()
    ran = model.chat("once more", "--continue")
    assert "bash denied" in ran.stderr and not (root / "again.txt").exists()


def test_bash_output_sent_to_the_model_is_capped_and_the_cap_said(
    cli: Cli, agent: Callable[[list[Turn]], Agent]
) -> None:
    model = agent([[ToolCall("bash", {"command": "seq 1 100000"})], "long"])
    model.chat("go", "--allow", "bash", EARSHOT_CHAT_OUTPUT_CAP="1000")
    (result,) = [t for t in texts_sent(model) if "characters cut" in t]
    assert len(result) < 1400 and "capped at 1,000" in result
    assert result.startswith("1\n2\n3\n") and "100000" in result


def test_sigint_stops_a_long_command_and_every_call_gets_a_result(
    cli: Cli, root: Path, agent: Callable[[list[Turn]], Agent]
) -> None:
    model = agent(
        [
            [
                ToolCall("bash", {"command": "touch started; sleep 30; touch finished"}),
                ToolCall("write_file", {"path": "after.txt", "content": "no\n"}),
            ],
            "never asked",
        ]
    )
    args = ["chat", "-p", "go", "--model", model.model, "--allow", ALL, "--json"]
    proc = subprocess.Popen(
        [str(EARSHOT), *args], cwd=root, env=model.env(), stdout=subprocess.PIPE, text=True
    )
    deadline = time.monotonic() + 60
    while not (root / "started").exists():
        assert time.monotonic() < deadline and proc.poll() is None
        time.sleep(0.05)
    began = time.monotonic()
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 130 and time.monotonic() - began < 10
    assert not (root / "finished").exists() and not (root / "after.txt").exists()
    session = json.loads(out)["session"]
    results = [e for e in entries(cli, session) if e["type"] == "tool_result"]
    assert [r.get("interrupted", False) for r in results] == [True, True]
    assert "stopped" in results[0]["output"] and "before this call ran" in results[1]["output"]
    # Recorded as any batch: undo takes the command's file back.
    (batch,) = cli.json("log", session=session)["batches"]
    assert {c["path"] for c in batch["changes"]} == {"started"}
    assert len(model.server.main_requests) == 1  # the interrupted turn asked no more
    cli.run("undo", session=session)
    assert not (root / "started").exists()


# -- the command line ----------------------------------------------------------------


def test_chat_without_a_terminal_or_prompt_is_refused_in_one_line(
    cli: Cli, check_error: Callable[..., str]
) -> None:
    line = check_error(cli.run("chat", expect=2), 2)
    assert "-p PROMPT" in line
    assert not (cli.home / "sessions").exists()


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (("chat", "-p", "x", "--model", "gemini:x"), "PROVIDER one of anthropic, openai"),
        (("chat", "-p", "x", "--allow", "rm"), "--allow takes bash, write_file, edit"),
        (("chat", "--json"), "--json goes with -p"),
        (("chat", "-p", "x", "--continue", "--resume", "01"), "give one"),
        (("--continue", "log"), "go with 'earshot chat'"),
    ],
)
def test_bad_chat_options_are_usage_errors(cli: Cli, args: tuple[str, ...], said: str) -> None:
    ran = cli.run(*args, expect=2)
    assert said in ran.stderr
    if "--json" in args:  # asked for: the error is its one document
        assert said in ran.json()["error"]["message"]
    else:
        assert ran.stdout == ""


def test_earshot_alone_without_a_terminal_prints_help(cli: Cli) -> None:
    ran = cli.run()
    assert "earshot chat" in ran.stdout and "Commands" in ran.stdout


def test_a_prompt_from_stdin(cli: Cli, root: Path, agent: Callable[[list[Turn]], Agent]) -> None:
    model = agent(["read it"])
    env = model.env()
    args = ("chat", "-p", "-", "--model", model.model)
    ran = cli.run(*args, stdin="the prompt\nover two lines\n", env=env, timeout=120)
    assert ran.stdout == "read it\n"
    assert texts_sent(model) == ["the prompt\nover two lines\n"]


def test_a_hanging_model_is_stopped_by_sigterm_with_nothing_run(
    cli: Cli, root: Path, agent: Callable[[list[Turn]], Agent]
) -> None:
    model = agent([Hang(60, [ToolCall("bash", {"command": "touch ran"})])])
    args = ["chat", "-p", "go", "--model", model.model, "--allow", ALL]
    proc = subprocess.Popen([str(EARSHOT), *args], cwd=root, env=model.env())
    deadline = time.monotonic() + 60
    while not model.server.main_requests:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=20) == 128 + signal.SIGTERM
    assert not (root / "ran").exists()
    assert os.listdir(root) == []


# -- a full disk, a kill ----------------------------------------------------------------


def test_a_batch_the_full_store_cannot_record_is_never_lost_and_the_model_is_told(
    cli: Cli, root: Path, agent: Callable[[list[Turn]], Agent]
) -> None:
    (root / "precious.txt").write_text("keep me\n")
    model = agent([[ToolCall("bash", {"command": "rm precious.txt"})], "noted", "again"])
    ran = model.chat("clean", "--allow", "bash", EARSHOT_FAULTS="batch-commit=enospc")
    assert "is not recorded yet" in ran.stderr
    (told,) = [t for t in texts_sent(model) if "result is lost" in t]
    assert "No space left on device" in told
    assert not (root / "precious.txt").exists()
    # The next command records the batch from its intent; undo brings the file back.
    cli.run("undo")
    assert (root / "precious.txt").read_text() == "keep me\n"
    assert model.chat("go on", "--continue").json()["text"] == "again"


def test_a_chat_killed_mid_batch_loses_nothing_and_its_session_goes_on(
    cli: Cli, root: Path, agent: Callable[[list[Turn]], Agent]
) -> None:
    (root / "precious.txt").write_text("keep me\n")
    model = agent([[ToolCall("bash", {"command": "rm precious.txt"})], "resumed fine"])
    killed = model.chat(
        "clean", "--allow", "bash", expect=None, EARSHOT_FAULTS="batch-command=kill"
    )
    assert killed.rc == -signal.SIGKILL
    assert "interrupted" in cli.run("log").stderr
    cli.run("undo")
    assert (root / "precious.txt").read_text() == "keep me\n"
    # The call the kill left unanswered gets its "interrupted" result: the
    # next request is whole, and the model sees what happened.
    doc = model.chat("what happened?", "--continue").json()
    assert doc["text"] == "resumed fine"
    assert any("interrupted" in t for t in texts_sent(model))
