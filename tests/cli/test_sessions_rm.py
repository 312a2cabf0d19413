"""``earshot sessions rm``: a session removed whole, and gc then frees what only it used."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from chat_screen import Screen
from earshot_cli import Cli
from fake_agent import Claude


def test_sessions_rm_removes_both_halves_and_gc_frees_its_objects(cli: Cli, root: Path) -> None:
    (root / "keep.txt").write_text("kept\n")
    gone, kept = cli.new_session(), cli.new_session()
    (root / "big.bin").write_bytes(os.urandom(2_000_000))  # only gone's batches hold it
    cli.run("bash", "rm big.bin", session=gone)
    cli.run("bash", "echo more >> keep.txt", session=kept)
    cli.run("gc")
    before = cli.json("stats")["stored_bytes"]
    assert before > 1_900_000
    done = cli.json("sessions", "rm", gone[:10])
    assert done["removed"] == [gone]
    assert [s["id"] for s in cli.json("sessions")["sessions"]] == [kept]
    assert not list((cli.home / "sessions").glob(f"*/{gone}*"))
    refused = cli.run("log", "--session", gone[:10], expect=1)
    assert gone[:10] in refused.stderr, refused.stderr
    cli.run("gc")
    after = cli.json("stats")["stored_bytes"]
    assert after < before - 1_900_000, (before, after)
    cli.run("undo", session=kept)  # the other session is whole
    assert (root / "keep.txt").read_text() == "kept\n"


def test_sessions_rm_older_than_takes_the_sessions_idle_that_long(cli: Cli) -> None:
    old = cli.new_session()
    cli.run("bash", "true", session=old)
    assert cli.json("sessions", "rm", "--older-than", "1d")["removed"] == []
    assert cli.json("sessions", "rm", "--older-than", "0m")["removed"] == [old]


def test_sessions_rm_needs_ids_or_an_age_and_names_an_unknown_id(cli: Cli) -> None:
    cli.new_session()
    assert "one of them" in cli.run("sessions", "rm", expect=2).stderr
    assert (
        "a number and m, h, d or w"
        in cli.run("sessions", "rm", "--older-than", "soon", expect=2).stderr
    )
    unknown = cli.run("sessions", "rm", "zzzzzzzzzz", expect=None)
    assert unknown.rc != 0 and "zzzzzzzzzz" in unknown.stderr, unknown


def test_a_session_with_an_open_batch_is_not_removed(cli: Cli, root: Path) -> None:
    agent = Claude(cli.env(), root)
    try:
        assert agent.start().rc == 0
        agent.prompt("p")
        agent.write(root / "w.txt", "w\n")  # the response's batch stays open
        (session,) = cli.json("sessions")["sessions"]
        refused = cli.run("sessions", "rm", session["id"], expect=1)
        assert "has an operation not ended" in refused.stderr, refused.stderr
        assert [s["id"] for s in cli.json("sessions")["sessions"]] == [session["id"]]
        agent.response_end()
    finally:
        agent.close()
    cli.run("undo", "--session", session["id"])
    assert not (root / "w.txt").exists()


def test_a_session_open_in_a_chat_is_not_removed_until_the_chat_leaves(
    cli: Cli, chat: Callable[..., Screen]
) -> None:
    screen = chat(["Hello back."])
    screen.line("hello")
    screen.expect("Hello back")
    refused = cli.run("sessions", "rm", screen.session, "--json", expect=1)
    assert "is open in a chat" in refused.json()["error"]["message"], refused
    assert list((cli.home / "sessions").glob(f"*/{screen.session}.jsonl"))
    screen.leave()
    cli.run("sessions", "rm", screen.session)
    assert cli.json("sessions")["sessions"] == []
    assert list((cli.home / "sessions").glob(f"*/{screen.session}*")) == []
