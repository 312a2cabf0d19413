"""Words that agree with each other: a redo is named by the batch it brings back,
``stats`` counts every snapshot recorded, ``sessions`` says who, how many, how long ago."""

from __future__ import annotations

import re

from earshot_cli import Cli


def test_log_names_a_redo_by_the_batch_it_brings_back_as_redo_does(cli: Cli) -> None:
    sid = cli.new_session()
    cli.run("bash", "echo one > one.txt", session=sid)
    cli.run("bash", "echo two > two.txt", session=sid)
    cli.run("undo", session=sid)
    said = cli.run("redo", session=sid).stdout
    assert said.startswith("redo of batch 2\n"), said
    redo_line = cli.run("log", session=sid).stdout.splitlines()[-1]
    assert "[redo of 2, taking back undo 3]" in redo_line, redo_line


def test_stats_counts_the_batches_snapshots_and_its_dedup_is_at_least_one(cli: Cli) -> None:
    cli.write("big.txt", "same content\n" * 1000)
    sid = cli.new_session()
    for n in range(3):
        cli.run("bash", f"echo {n} > n{n}.txt", session=sid)
    stats = cli.json("stats")
    assert stats["snapshots"] == 0  # none listed: batches only
    assert stats["recorded_snapshots"] >= 4, stats
    assert stats["dedup_ratio"] >= 3, stats  # big.txt is in every state, stored once
    text = cli.run("stats").stdout
    assert re.search(r"^snapshots  \d+ recorded$", text, re.M), text
    assert "0 snapshots" not in text and "dedup 0" not in text, text


def test_sessions_lists_agent_prompts_batches_and_age(cli: Cli) -> None:
    sid = cli.new_session()
    cli.run("prompt", "first ask", session=sid)
    cli.run("prompt", "second ask", session=sid)
    cli.run("bash", "echo one > one.txt", session=sid)
    line = cli.run("sessions").stdout.splitlines()[0]
    assert re.match(rf"^{sid}  earshot +2 prompts +1 batch +just now  first ask$", line), line
    assert cli.json("sessions")["sessions"][0]["prompts"] == 2
