"""``Chat`` driven without a terminal, as a web face or a test would drive it:
the real SDK against a scripted Messages API server, the real store and log."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from model_servers import AnthropicServer, Hang, ToolCall, Turn

from earshot.agent.core.batch import Batch
from earshot.agent.loop.chat import Chat, TurnResult
from earshot.agent.loop.history import SUMMARY_HEAD, Output, Use
from earshot.agent.loop.permissions import Answer, Grants
from earshot.agent.loop.provider import Reply, make_provider
from earshot.agent.loop.workspace import Workspace


class Recorder:
    """``Events`` that keep what they are told, and answer questions as scripted."""

    def __init__(self, answers: list[Answer] | None = None) -> None:
        self.streamed: list[str] = []
        self.said: list[tuple[str, Any]] = []
        self.answers = list(answers or [])
        self.asked: list[tuple[str, str]] = []

    def text(self, delta: str) -> None:
        self.streamed.append(delta)

    def reply(self, reply: Reply) -> None:
        self.said.append(("reply", reply.text))

    def command(self, command: str) -> None:
        self.said.append(("command", command))

    def output(self, text: str) -> None:
        self.said.append(("output", text))

    def command_ended(self) -> None:
        self.said.append(("ended", None))

    def result(self, use: Use, output: Output) -> None:
        self.said.append(("result", output.text))

    def batch(self, batch: Batch) -> None:
        self.said.append(("batch", batch.seq))

    def injected(self, text: str) -> None:
        self.said.append(("injected", text))

    def notice(self, text: str) -> None:
        self.said.append(("notice", text))

    def ask(self, tool: str, detail: str) -> Answer:
        self.asked.append((tool, detail))
        return self.answers.pop(0) if self.answers else Answer.DENY


@pytest.fixture
def serve(root: Path, home: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    servers: list[AnthropicServer] = []

    def make(
        script: list[Turn], events: Recorder, grants: Grants | None = None
    ) -> tuple[Chat, AnthropicServer]:
        server = AnthropicServer(script)
        servers.append(server)
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
        workspace = Workspace(root, home=home)
        session = workspace.open_session(None, most_recent=False, new=True)
        chat = Chat(
            workspace, session, make_provider("anthropic:claude-test"), events, grants=grants
        )
        return chat, server

    yield make
    for server in servers:
        server.close()


def in_thread(chat: Chat, prompt: str) -> tuple[threading.Thread, dict[str, TurnResult]]:
    box: dict[str, TurnResult] = {}
    thread = threading.Thread(target=lambda: box.update(result=chat.turn(prompt)), daemon=True)
    thread.start()
    return thread, box


def wait_for(predicate: Any, seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline
        time.sleep(0.02)


def test_a_streamed_reply_reaches_the_face_and_the_answers_decide_what_runs(
    serve: Any, root: Path
) -> None:
    events = Recorder([Answer.SESSION])
    calls = [
        ToolCall("bash", {"command": "echo one > one"}),
        ToolCall("bash", {"command": "echo two > two"}),
    ]
    chat, _server = serve([["Two commands.", *calls], "All set."], events)
    result = chat.turn("go")
    assert (result.text, result.batches, result.stop) == ("All set.", [1], "end_turn")
    assert "".join(events.streamed) == "Two commands.All set."
    # Asked once: "for the session" covers the second command.
    assert events.asked == [("bash", "echo one > one")]
    # Each command is told as it starts and ends; the results come with the batch.
    assert [k for k, _ in events.said] == [
        *("reply", "command", "ended", "command", "ended"),
        *("result", "result", "batch", "reply"),
    ]
    assert [v for k, v in events.said if k == "command"] == ["echo one > one", "echo two > two"]
    assert (root / "one").read_text() == "one\n" and (root / "two").exists()


def test_a_commands_output_reaches_the_face_while_it_runs(serve: Any, tmp_path: Path) -> None:
    go = tmp_path / "go"
    command = f"echo early; while [ ! -e {go} ]; do sleep 0.02; done; echo late"
    events = Recorder()
    chat, _server = serve(
        [[ToolCall("bash", {"command": command})], "ok"], events, Grants({"bash"})
    )
    thread, box = in_thread(chat, "go")
    wait_for(lambda: ("output", "early\n") in events.said)
    assert ("ended", None) not in events.said  # still running: it waits for go
    go.touch()
    thread.join(30)
    outputs = "".join(v for k, v in events.said if k == "output")
    assert outputs == "early\nlate\n" and box["result"].batches == [1]


def test_a_denied_call_does_not_run_and_the_model_is_told(serve: Any, root: Path) -> None:
    events = Recorder([Answer.DENY])
    chat, server = serve([[ToolCall("bash", {"command": "touch x"})], "fine"], events)
    assert chat.turn("go").batches == []
    assert not (root / "x").exists()
    result = server.main_requests[1]["messages"][-1]["content"][0]
    assert result["is_error"] and "did not allow bash" in result["content"]


def test_text_queued_after_the_model_s_last_call_is_sent_in_the_same_turn(
    serve: Any,
) -> None:
    events = Recorder()
    chat, server = serve([Hang(1.0, "first answer"), "second answer"], events)
    thread, box = in_thread(chat, "question")
    wait_for(lambda: server.main_requests)
    assert chat.steer("one more thing")
    thread.join(30)
    assert box["result"].text == "second answer"
    assert not chat.steer("too late"), "taken with no turn to send it"
    sent = server.main_requests[1]["messages"]
    assert [m["content"][-1]["text"] for m in sent] == [
        "question",
        "first answer",
        "one more thing",
    ]
    assert ("injected", "one more thing") in events.said


def test_an_interrupt_while_the_server_has_sent_nothing_returns_at_once(
    serve: Any, root: Path
) -> None:
    events = Recorder([Answer.ONCE])
    chat, server = serve([Hang(60, [ToolCall("bash", {"command": "touch ran"})])], events)
    thread, box = in_thread(chat, "go")
    wait_for(lambda: server.main_requests)
    began = time.monotonic()
    chat.interrupt()
    thread.join(10)
    assert time.monotonic() - began < 5
    assert box["result"].stop == "interrupted" and box["result"].batches == []
    assert not (root / "ran").exists()
    # The log ends with the prompt: nothing was said for the request cut short.
    assert [e.body.TYPE for e in chat.log.context()] == ["user"]


def test_compact_summarises_and_the_context_starts_from_the_summary(serve: Any) -> None:
    events = Recorder()
    chat, server = serve(
        ["Answer one.", "SUMMARY: asked one thing, answered.", "Answer two."], events
    )
    chat.turn("first question")
    summary = chat.compact()
    assert summary == "SUMMARY: asked one thing, answered."
    ask = server.main_requests[1]["messages"]
    assert "Summarise this conversation" in ask[-1]["content"][-1]["text"]
    chat.turn("second question")
    sent = server.main_requests[2]["messages"]
    assert sent == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": SUMMARY_HEAD + summary},
                {"type": "text", "text": "second question"},
            ],
        }
    ]
    # Nothing is rewritten: the first exchange is still in the log.
    assert [e.body.TYPE for e in chat.log.path_to()][:3] == ["user", "assistant", "compaction"]
