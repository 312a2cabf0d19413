"""The one-regex question asked before a command's targets are worth a parse."""

from __future__ import annotations

import pytest

from earshot.agent.shell.destructive import classify
from earshot.agent.shell.targets import may_name_targets


@pytest.mark.parametrize(
    "command",
    [
        "rm -rf data",
        "ls && rm a",
        "/bin/rm x",
        "find . -name x -delete",
        "git clean -fdx",
        "git -C sub clean -X",
        "truncate -s 0 f",
        "xargs rm < list",
        "sudo unlink f",
    ],
)
def test_a_deleting_word_asks_for_the_parse(command: str) -> None:
    assert may_name_targets(command)


@pytest.mark.parametrize(
    "command",
    [
        "python build.py",
        "git status",
        "make firmware",
        "npm run lint",
        "echo format",
        "cargo rmeta",
    ],
)
def test_a_command_without_one_is_not_parsed(command: str) -> None:
    assert not may_name_targets(command)


@pytest.mark.parametrize(
    "command",
    ["rm -rf data", "find a -delete", "git clean -fdx", "cd x && rm y", "truncate -s0 z"],
)
def test_every_command_with_targets_passes_the_question(command: str) -> None:
    assert classify(command, lambda path: True).targets
    assert may_name_targets(command)
