"""The chat's keys on a real pty: one key answers a question, a key typed when
nothing is asked is text, and /exit and Ctrl-D leave whatever is going on."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pexpect
from chat_screen import WAIT_S, Screen, entries
from earshot_cli import Cli
from model_servers import Hang, ToolCall


def test_a_permission_question_takes_one_key(
    cli: Cli, root: Path, chat: Callable[..., Screen]
) -> None:
    screen = chat(
        [
            [ToolCall("bash", {"command": "touch one"})],
            [ToolCall("bash", {"command": "touch two"})],
            [ToolCall("write_file", {"path": "three", "content": "3"})],
            "Done.",
        ]
    )
    screen.line("go")
    screen.expect(r"allow\? \[y\]")
    screen.child.send("a")  # no Enter: bash, for the session
    screen.expect("allowed for this session")
    screen.expect(r"allow\? \[y\]")  # write_file: bash is not asked again
    screen.child.send("n")
    screen.expect("denied")
    screen.expect("Done")
    assert (root / "one").exists() and (root / "two").exists() and not (root / "three").exists()
    grants = [
        (e["tool"], e["detail"]["scope"])
        for e in entries(cli, screen.session)
        if e["type"] == "permission"
    ]
    assert grants == [("bash", "session")]
    screen.leave()


def test_an_answer_typed_when_nothing_is_asked_is_text_and_never_sent_alone(
    cli: Cli, chat: Callable[..., Screen]
) -> None:
    screen = chat(["First.", "Second."])
    screen.line("hello")
    screen.expect("First")
    screen.line("y")  # a stray answer: nothing is asked
    screen.expect("nothing is asked now")
    assert len(screen.server.main_requests) == 1
    screen.line(" and then the tests")  # it stayed in the input line: typed on
    screen.expect("Second")
    sent = screen.requests(2)[1]["messages"][-1]["content"][0]["text"]
    assert sent == "y and then the tests"
    screen.leave()


def test_exit_while_a_permission_question_is_pending_leaves_and_runs_nothing(
    cli: Cli, root: Path, chat: Callable[..., Screen]
) -> None:
    screen = chat([[ToolCall("bash", {"command": "touch ran"})], "not asked"])
    screen.line("go")
    screen.expect(r"allow\? \[y\]")
    screen.line("/exit")
    screen.expect(f"earshot chat --resume {screen.session} goes on in this session")
    screen.child.expect(pexpect.EOF)
    screen.child.close()
    assert screen.child.exitstatus == 0
    assert not (root / "ran").exists()
    (result,) = [e for e in entries(cli, screen.session) if e["type"] == "tool_result"]
    assert result.get("isError") is True
    assert len(screen.server.main_requests) == 1


def test_ctrl_d_leaves_while_a_question_is_pending(
    cli: Cli, root: Path, chat: Callable[..., Screen]
) -> None:
    screen = chat([[ToolCall("bash", {"command": "touch ran"})], "not asked"])
    screen.line("go")
    screen.expect(r"allow\? \[y\]")
    screen.child.send("\x04")
    screen.child.expect(pexpect.EOF)
    screen.child.close()
    assert screen.child.exitstatus == 0
    assert not (root / "ran").exists()


def test_ctrl_d_and_exit_leave_while_the_model_works(chat: Callable[..., Screen]) -> None:
    for leave in ("\x04", "/exit\r"):
        screen = chat([Hang(600, "never")])
        screen.line("go")
        screen.requests(1)
        screen.child.send(leave)
        screen.child.expect(pexpect.EOF)
        screen.child.close()
        assert screen.child.exitstatus == 0


def test_a_key_typed_before_a_question_came_is_not_its_answer(
    cli: Cli, root: Path, chat: Callable[..., Screen], tmp_path: Path
) -> None:
    go = tmp_path / "go"
    screen = chat(
        [
            [
                ToolCall(
                    "bash", {"command": f"touch started; while [ ! -e {go} ]; do sleep 0.05; done"}
                )
            ],
            [ToolCall("write_file", {"path": "w.txt", "content": "w"})],
            "Done.",
        ],
        "--allow",
        "bash",
    )
    screen.line("go")
    deadline = time.monotonic() + WAIT_S
    while not (root / "started").exists():
        assert time.monotonic() < deadline
        time.sleep(0.05)
    screen.child.send("y")  # nothing is asked: a letter of the input line
    screen.expect(r"\x1b\[0my")  # drawn in the input line (plain, after the prompt's colour)
    go.touch()
    screen.expect(r"allow\? \[y\]")  # write_file: the "y" is still in the input line
    screen.child.send("\r")
    screen.expect("answer the question first")
    screen.child.send("\x15")  # Ctrl-U: the line cleared, a key answers
    screen.answer("n")
    screen.expect("Done")
    assert not (root / "w.txt").exists()
    screen.leave()
