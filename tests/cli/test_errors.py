"""Errors carry their exit code: a command ends with the code its error names, in one line."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click
from click.testing import CliRunner

from earshot.cas.errors import EarshotError
from earshot.cas.sealed import CorruptRecord
from earshot.cli.common import project_command


class _Busy(EarshotError):
    exit_code = 4

    def __init__(self) -> None:
        super().__init__("the store is busy; try again")


@click.command()
@project_command
def _busy(project: Any, as_json: bool) -> None:
    raise _Busy()


@click.command()
@project_command
def _corrupt(project: Any, as_json: bool) -> None:
    raise CorruptRecord("batch 2 of session x")


def test_an_error_ends_the_command_with_the_exit_code_it_carries(root: Path, home: Path) -> None:
    ran = CliRunner().invoke(_busy, ["--root", str(root)])
    assert ran.exit_code == 4, ran.output
    assert ran.output == "earshot: the store is busy; try again\n"


def test_a_damaged_record_is_one_line_and_exit_1(root: Path, home: Path) -> None:
    assert CorruptRecord("x").exit_code == 1
    ran = CliRunner().invoke(_corrupt, ["--root", str(root)])
    assert ran.exit_code == 1
    assert ran.output.count("\n") == 1
    assert ran.output.startswith("earshot: batch 2 of session x is damaged")
