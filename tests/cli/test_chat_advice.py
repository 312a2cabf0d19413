"""Inside ``earshot chat`` advice names slash commands; outside, the CLI's."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from chat_screen import Screen
from earshot_cli import Cli
from model_servers import ToolCall

from earshot.cli.chat_advice import in_chat


def test_cli_advice_the_chat_has_a_command_for_names_the_command() -> None:
    assert in_chat("recorded as batch 3 ('earshot redo' to go back)") == (
        "recorded as batch 3 (/redo to go back)"
    )
    assert in_chat("nothing to undo in this session (see 'earshot log')") == (
        "nothing to undo in this session (see /log)"
    )
    assert in_chat("'earshot undo 3' undoes them all") == "/undo 3 undoes them all"
    # What the chat has no command for stays a shell's.
    for kept in ("'earshot undo --force' overwrites them", "run 'earshot fsck'"):
        assert in_chat(kept) == kept


def test_undo_and_rewind_in_the_chat_advise_slash_commands(
    cli: Cli, root: Path, chat: Callable[..., Screen]
) -> None:
    screen = chat(
        [[ToolCall("write_file", {"path": "one.txt", "content": "1\n"})], "Done."],
        "--allow",
        "write_file",
    )
    screen.line("make one")
    screen.expect("Done")
    screen.line("/undo")
    screen.answer("y")
    screen.expect(r"recorded as batch 2 \(/redo to go back\)")
    screen.line("/redo")
    screen.answer("y")
    screen.expect(r"recorded as batch 3 \(/undo to go back\)")
    screen.line("/rewind 1")
    screen.expect("back before prompt 1")
    screen.child.send("\x15")  # the prompt put back to edit
    screen.line("/rewind 1 --code")
    said = screen.expect(r"/undo N takes batches back\)")
    assert "a prompt typed here adds one" in said and "earshot prompt" not in said
    assert (root / "one.txt").exists()
    screen.leave()
