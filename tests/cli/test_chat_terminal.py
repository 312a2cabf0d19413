"""``earshot chat`` on a real pseudo-terminal (pexpect), against a scripted model.

What a person does: types while the model works, presses Esc during a long
command, runs /undo, /rewind, /tree and /fork, leaves and comes back with
--continue. Each is checked on the screen, on disk and in the session file.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pexpect
from chat_screen import WAIT_S, Screen, entries
from earshot_cli import EARSHOT, Cli
from model_servers import AnthropicServer, Hang, ToolCall


def test_text_typed_mid_turn_goes_in_at_the_next_model_call(
    cli: Cli, root: Path, chat: Callable[..., Screen]
) -> None:
    screen = chat(
        [
            Hang(2.0, [ToolCall("write_file", {"path": "a.txt", "content": "a\n"})]),
            "Both done.",
        ],
        "--allow",
        "write_file",
    )
    screen.line("write a")
    screen.requests(1)  # the model is thinking: the input line is live
    screen.line("and mind the tests")
    screen.expect("queued for the model's next call")
    screen.expect("sent to the model: and mind the tests")
    screen.expect("Both done")
    second = screen.requests(2)[1]["messages"]
    # After the batch's result, in the same user message: the steering text.
    assert second[-1]["content"][0]["type"] == "tool_result"
    assert second[-1]["content"][1] == {"type": "text", "text": "and mind the tests"}
    kinds = [e["type"] for e in entries(cli, screen.session)]
    assert kinds[-3:] == ["tool_result", "user", "assistant"]
    assert (root / "a.txt").read_text() == "a\n"
    screen.leave()


def test_lines_typed_while_a_slash_command_runs_run_after_it_in_order(
    cli: Cli, chat: Callable[..., Screen]
) -> None:
    screen = chat(["First.", Hang(2.0, "SUMMARY: a first prompt."), "Second."])
    screen.line("one")
    screen.expect("First")
    screen.line("/compact")
    screen.requests(2)  # the model summarises: a command runs, not a turn
    screen.line("/model")
    screen.line("two")
    screen.expect("compacted")
    screen.expect("model: anthropic:claude-test")
    screen.expect("Second")
    third = screen.requests(3)[2]["messages"]
    assert third[-1]["content"][-1]["text"] == "two"
    assert [e["text"] for e in entries(cli, screen.session) if e["type"] == "user"] == [
        "one",
        "two",
    ]
    screen.leave()


def test_the_store_is_free_while_undo_asks_and_an_impact_changed_meanwhile_is_not_acted_on(
    cli: Cli, root: Path, chat: Callable[..., Screen]
) -> None:
    screen = chat(
        [
            [ToolCall("write_file", {"path": "one.txt", "content": "1\n"})],
            [ToolCall("write_file", {"path": "two.txt", "content": "2\n"})],
            "Done.",
        ],
        "--allow",
        "write_file",
    )
    screen.line("make them")
    screen.expect("Done")
    screen.line("/undo")
    screen.expect("dry run: undo of batch 2")
    screen.expect(r"\[y")
    cli.run("gc")  # needs the store to itself: the question holds none of it
    cli.run("undo", session=screen.session)  # another terminal takes batch 2 back
    screen.line("y")  # to undo batch 2, which now means batch 1
    screen.expect("the impact changed while you answered")
    assert (root / "one.txt").exists(), "an undo agreed to was acted on as another"
    assert [b["seq"] for b in cli.json("log", session=screen.session)["batches"]] == [1, 2, 3]
    screen.leave()


def test_esc_stops_a_long_command_and_every_call_gets_a_result(
    cli: Cli, root: Path, chat: Callable[..., Screen]
) -> None:
    screen = chat(
        [
            [
                ToolCall("bash", {"command": "touch started; sleep 30; touch finished"}),
                ToolCall("write_file", {"path": "never.txt", "content": "x\n"}),
            ],
            "not asked",
        ],
    )
    screen.line("run the long job")
    screen.answer("a")  # bash, for the session
    screen.answer("y")  # write_file, once
    deadline = time.monotonic() + WAIT_S
    while not (root / "started").exists():
        assert time.monotonic() < deadline
        time.sleep(0.05)
    began = time.monotonic()
    screen.child.send("\x1b")
    screen.expect("interrupted: every call has its result")
    assert time.monotonic() - began < 10
    assert not (root / "finished").exists() and not (root / "never.txt").exists()
    results = [e for e in entries(cli, screen.session) if e["type"] == "tool_result"]
    assert [r.get("interrupted") for r in results] == [True, True]
    grants = [
        (e["tool"], e["detail"]["scope"])
        for e in entries(cli, screen.session)
        if e["type"] == "permission"
    ]
    assert grants == [("bash", "session"), ("write_file", "once")]
    assert len(screen.server.main_requests) == 1
    screen.leave()
    (batch,) = cli.json("log", session=screen.session)["batches"]
    assert {c["path"] for c in batch["changes"]} == {"started"}


def test_undo_rewind_tree_and_fork_from_the_input_line(
    cli: Cli, root: Path, chat: Callable[..., Screen]
) -> None:
    screen = chat(
        [
            [ToolCall("write_file", {"path": "one.txt", "content": "1\n"})],
            "First done.",
            [ToolCall("write_file", {"path": "two.txt", "content": "2\n"})],
            "Second done.",
        ],
        "--allow",
        "write_file",
    )
    screen.line("make one")
    screen.expect("First done")
    screen.line("make two")
    screen.expect("Second done")
    screen.line("/tree")
    listed = screen.expect("make two")
    assert "2 prompts on the current path" in listed and "make one" in listed
    screen.line("/undo")
    screen.expect("dry run: undo of batch 2")
    screen.answer("n")
    screen.expect("nothing changed")
    assert (root / "two.txt").exists()
    screen.line("/undo")
    screen.answer("y")
    screen.expect("recorded as batch 3")
    assert not (root / "two.txt").exists() and (root / "one.txt").exists()
    screen.line("/redo")
    screen.expect("dry run: redo of batch 2")
    screen.answer("y")
    screen.expect("recorded as batch 4")
    assert (root / "two.txt").read_text() == "2\n"
    screen.line("/rewind 2")
    screen.expect("back before prompt 2")
    # The conversation only: files stay as they are.
    assert (root / "one.txt").exists()
    screen.child.send("\x15")  # Ctrl-U: clear the prompt's text put back to edit
    screen.line("/fork 1")
    screen.expect(r"forked session \w+ into (\w+)")
    forked = screen.child.match.group(1)
    assert forked != screen.session
    screen.leave()
    ids = {s["id"] for s in cli.json("sessions")["sessions"]}
    assert ids == {screen.session, forked}
    # The fork holds nothing of prompt 1 on; the source is back before prompt 2.
    assert [p["text"] for p in cli.json("tree", session=forked)["prompts"]] == []
    assert [p["text"] for p in cli.json("tree", session=screen.session)["prompts"]] == ["make one"]


def test_continue_lands_on_the_same_session_and_ctrl_c_twice_leaves(
    cli: Cli, root: Path, chat: Callable[..., Screen]
) -> None:
    server = AnthropicServer(["Hello there.", "Again, hello."])
    try:
        first = chat([], server=server)
        first.line("hi")
        first.expect("Hello there")
        first.child.send("\x03")
        first.expect("Ctrl-C again")
        first.child.send("\x03")
        first.child.expect(pexpect.EOF)
        # 'earshot --continue' alone: the chat, on the same session.
        second = chat([], "--continue", server=server, command="")
        assert second.session == first.session
        second.line("hi again")
        second.expect("Again, hello")
        second.leave()
        sent = server.main_requests[-1]["messages"]
        assert [m["content"][0]["text"] for m in sent] == ["hi", "Hello there.", "hi again"]
    finally:
        server.close()
    assert os.listdir(root) == []


def test_the_other_slash_commands_say_what_the_cli_says(
    cli: Cli, root: Path, chat: Callable[..., Screen]
) -> None:
    (root / "app.py").write_text("x = 1\n")
    screen = chat(
        [
            [ToolCall("edit", {"path": "app.py", "old": "x = 1", "new": "x = 2"})],
            "Edited.",
            "SUMMARY: app.py edited.",
        ],
        "--allow",
        "edit",
    )
    screen.line("edit app")
    screen.expect("Edited")
    screen.line("/diff")
    screen.expect(r"\+x = 2")
    screen.line("/log")
    screen.expect(r"edit app\.py\s+\+0 ~1 -0")
    screen.line("/compact")
    screen.expect("compacted: the context now starts from a summary")
    screen.line("/model")
    screen.expect("model: anthropic:claude-test")
    screen.line("/nonsense")
    screen.expect(r"no command /nonsense \(/help lists them\)")
    screen.line("/help")
    screen.expect("/rewind N --code")
    screen.line("/rewind 1 --code")
    screen.expect("dry run: rewind of batch 1")
    screen.answer("y")
    screen.expect("back before prompt 1")
    assert (root / "app.py").read_text() == "x = 1\n"
    screen.child.send("\x15")
    other = cli.new_session()
    screen.line("/sessions")
    screen.expect(other)
    screen.line(f"/resume {other}")
    screen.expect(f"now in session {other}")
    screen.leave()
    kinds = [e["type"] for e in entries(cli, screen.session)]
    assert "compaction" in kinds and kinds[-1] == "navigation"


def test_the_terminal_closing_mid_command_records_the_batch_and_leaves(
    cli: Cli, root: Path, chat: Callable[..., Screen]
) -> None:
    screen = chat([[ToolCall("bash", {"command": "touch started; sleep 30"})]], "--allow", "bash")
    screen.line("run it")
    deadline = time.monotonic() + WAIT_S
    while not (root / "started").exists():
        assert time.monotonic() < deadline
        time.sleep(0.05)
    screen.child.kill(signal.SIGHUP)
    screen.child.expect(pexpect.EOF)
    screen.child.close()
    assert screen.child.exitstatus == 128 + signal.SIGHUP
    (result,) = [e for e in entries(cli, screen.session) if e["type"] == "tool_result"]
    assert result["interrupted"] is True
    (batch,) = cli.json("log", session=screen.session)["batches"]
    assert batch["interrupted"] is False and {c["path"] for c in batch["changes"]} == {"started"}


def test_help_during_a_turn_leaves_it_running_and_esc_still_stops_it(
    cli: Cli, root: Path, chat: Callable[..., Screen]
) -> None:
    screen = chat(
        [[ToolCall("bash", {"command": "touch started; sleep 30; touch finished"})], "no"],
        "--allow",
        "bash",
    )
    screen.line("run it")
    deadline = time.monotonic() + WAIT_S
    while not (root / "started").exists():
        assert time.monotonic() < deadline
        time.sleep(0.05)
    screen.line("/help")
    screen.expect("/rewind N --code")
    screen.line("hello again")
    screen.expect("queued for the model's next call")  # the turn still runs: no second one
    screen.child.send("\x1b")
    screen.expect("interrupted: every call has its result")
    # What was typed for a call that never came is back in the input line.
    screen.expect("not sent")
    assert not (root / "finished").exists()
    assert len(screen.server.main_requests) == 1
    screen.child.send("\x15")
    screen.leave()


def test_esc_at_a_permission_question_stops_the_turn_and_text_is_never_an_answer(
    cli: Cli, root: Path, chat: Callable[..., Screen]
) -> None:
    screen = chat(
        [
            [
                ToolCall("bash", {"command": "touch ran"}),
                ToolCall("write_file", {"path": "w.txt", "content": "w"}),
            ],
            "not asked",
        ]
    )
    screen.line("go")
    screen.expect(r"allow\? \[y\]")
    screen.line("please list the files")  # not an answer: kept, the question stands
    screen.expect("answer the question first")
    screen.child.send("\x15")
    screen.child.send("\x1b")
    screen.expect("interrupted: every call has its result")
    assert not (root / "ran").exists() and not (root / "w.txt").exists()
    results = [e for e in entries(cli, screen.session) if e["type"] == "tool_result"]
    assert [r.get("interrupted") for r in results] == [True, True]
    assert len(screen.server.main_requests) == 1
    screen.leave()


def test_a_chat_closed_before_its_first_prompt_leaves_no_session(
    cli: Cli, chat: Callable[..., Screen]
) -> None:
    worked = cli.new_session()
    cli.run("bash", "echo made > made.txt", session=worked)
    screen = chat([])
    assert screen.session != worked
    assert "--resume" not in screen.leave()  # nothing to come back to
    assert [s["id"] for s in cli.json("sessions")["sessions"]] == [worked]
    assert not list((cli.home / "sessions").glob(f"*/{screen.session}*"))


def test_a_chat_whose_session_got_a_batch_elsewhere_keeps_it_on_close(
    cli: Cli, chat: Callable[..., Screen], root: Path
) -> None:
    screen = chat([])
    (full,) = [
        s["id"] for s in cli.json("sessions")["sessions"] if s["id"].startswith(screen.session)
    ]
    # Another terminal, same session; its link in the log is lost (a full disk):
    # the batch alone must keep the session.
    env = cli.env(full, EARSHOT_FAULTS="log-write=enospc")
    cli.run("bash", "echo made > made.txt", env=env, expect=None)
    assert cli.json("log", session=full)["batches"], "the batch was not recorded"
    screen.leave()
    assert [s["id"] for s in cli.json("sessions")["sessions"]] == [full]
    cli.run("undo", session=full)
    assert not (root / "made.txt").exists()


def test_a_chat_whose_session_has_a_batch_running_elsewhere_keeps_it_on_close(
    cli: Cli, chat: Callable[..., Screen], root: Path, tmp_path: Path
) -> None:
    screen = chat([])
    (full,) = [
        s["id"] for s in cli.json("sessions")["sessions"] if s["id"].startswith(screen.session)
    ]
    started, go = tmp_path / "started", tmp_path / "go"
    command = f"echo made > made.txt; touch {started}; while [ ! -e {go} ]; do sleep 0.05; done"
    with subprocess.Popen(
        [str(EARSHOT), "bash", command],
        cwd=root,
        env=cli.env(full),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    ) as running:
        deadline = time.monotonic() + WAIT_S
        while not started.exists():  # the batch is open: its intent is pending
            assert time.monotonic() < deadline and running.poll() is None
            time.sleep(0.05)
        screen.leave()
        go.touch()
        assert running.wait(timeout=WAIT_S) == 0
    assert list((cli.home / "sessions").glob(f"*/{full}.jsonl")), "the session's log was removed"
    cli.run("undo", session=full)
    assert not (root / "made.txt").exists()
