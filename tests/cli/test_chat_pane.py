"""A running command's output, live in a bounded pane above the chat's input line."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

from chat_screen import Screen
from earshot_cli import Cli
from model_servers import ToolCall

from earshot.cli.chat_pane import CommandPane


def test_the_pane_keeps_the_last_lines_as_a_terminal_would_show_them() -> None:
    pane = CommandPane(lines=3)
    assert pane.rows(80) == []
    pane.start("make test\nand more")
    pane.feed("one\ntwo\nthr")
    pane.feed("ee\n\x1b[31mred\x1b[0m\n")
    pane.feed("progress 10%\rprogress 90%\nbell\x07 and tab\there")
    head, *rows = pane.rows(40)
    assert head[1].startswith("  ⏵ make test ") and head[1].endswith("0s · 6 lines · Esc stops")
    assert [text for _, text in rows] == [
        "    red",
        "    progress 90%",
        "    bell and tab   here",
    ]
    assert all(len(text) <= 40 for _, text in pane.rows(40))
    pane.end()
    assert pane.rows(80) == [] and not pane.running


def test_a_running_commands_output_shows_live_then_gives_way_to_its_result(
    cli: Cli, root: Path, chat: Callable[..., Screen], tmp_path: Path
) -> None:
    go = tmp_path / "go"
    command = (
        "for i in $(seq 1 12); do printf 'line-%s\\n' $i; done; "
        f"while [ ! -e {go} ]; do sleep 0.05; done; echo finished"
    )
    screen = chat([[ToolCall("bash", {"command": command})], "Ran it."], "--allow", "bash")
    screen.line("run it")
    screen.expect(r"\ds( · \d+ lines?)? · Esc stops")  # the pane's head: the command's time
    screen.expect("line-12")  # the command still runs: it waits for go
    assert not go.exists()
    go.touch()
    shown = re.sub(r"\x1b\[[0-9;?]*[a-zA-Z]", "", screen.expect("Ran it"))
    assert "⎿ line-1" in shown and "… 11 more lines" in shown  # the usual result
    screen.leave()


def test_a_line_redrawn_without_end_keeps_its_latest_state_only() -> None:
    pane = CommandPane()
    pane.start("pip install something")
    for percent in range(100_000):  # a progress bar redrawn with \r, never ended
        pane.feed(f"\rdownloading {percent}%")
    assert pane._partial == "downloading 99999%"  # not 100,000 states held
    pane.feed("x" * 100_000)
    assert len(pane._partial) <= 4096
    pane.feed("\ndone\n")
    assert pane.rows(80)[-1] == ("fg:ansibrightblack", "    done")
