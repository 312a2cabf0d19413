"""--version, --help, per-command help, usage errors, and the lazy imports they rely on."""

from __future__ import annotations

import re
import subprocess
import sys
from importlib.metadata import version
from typing import TYPE_CHECKING

import pytest
from click.testing import CliRunner

from earshot.cli.main import COMMANDS, cli

if TYPE_CHECKING:
    from earshot_cli import Cli

README_COMMANDS = ["snapshot", "snapshots", "diff", "restore", "forget", "gc", "fsck", "stats"]
STORAGE_LIBRARIES = {"lmdb", "blake3", "zstandard"}


def test_version_prints_the_installed_version_and_exits_0(cli: Cli) -> None:
    result = cli.run("--version")
    assert result.stdout.strip() == f"earshot, version {version('earshot')}"
    assert result.stderr == ""


def test_help_lists_every_command_and_the_exit_codes(cli: Cli) -> None:
    out = cli.run("--help").stdout
    # a command's line starts two spaces in; a wrapped help line starts deeper
    lines = out.split("Commands:", 1)[1].splitlines()
    listed = {line.split()[0] for line in lines if re.match(r"  \S", line)}
    assert set(README_COMMANDS) <= listed
    assert listed == set(COMMANDS)  # every registered command, none missing
    assert "Exit codes" in out


def test_short_help_option_is_the_same_as_help() -> None:
    runner = CliRunner()
    assert runner.invoke(cli, ["-h"]).stdout == runner.invoke(cli, ["--help"]).stdout


@pytest.mark.parametrize("command", README_COMMANDS)
def test_command_help_works_and_shows_the_common_options(command: str) -> None:
    result = CliRunner().invoke(cli, [command, "--help"], prog_name="earshot")
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith(f"Usage: earshot {command} ")
    for option in ("--root", "--json", "--verbose"):
        assert option in result.stdout


def test_command_help_in_a_real_process_creates_no_store(cli: Cli) -> None:
    result = cli.run("restore", "--help")
    assert "--dry-run" in result.stdout and "--force" in result.stdout
    assert not cli.home.exists()


def _imported_modules(argv: list[str], cli: Cli) -> set[str]:
    code = (
        "import sys; from earshot.cli.main import cli; "
        f"sys.argv = {['earshot', *argv]!r}; cli.main(prog_name='earshot')"
    )
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", code],
        cwd=cli.root,
        env=cli.env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    names = {
        line.rsplit("|", 1)[1].strip()
        for line in proc.stderr.splitlines()
        if line.startswith("import time:") and "|" in line
    }
    assert "earshot.cli.main" in names  # the log is real
    return names


@pytest.mark.parametrize("argv", [["--version"], ["--help"]], ids=["version", "help"])
def test_version_and_help_import_no_storage_library(cli: Cli, argv: list[str]) -> None:
    names = _imported_modules(argv, cli)
    loaded = {n for n in names if n.split(".")[0] in STORAGE_LIBRARIES}
    assert loaded == set()
    assert not any(n.startswith("earshot.cas") for n in names)


def test_a_snapshot_with_nothing_to_finish_imports_no_recovery(cli: Cli) -> None:
    # Looking for interrupted operations is one read; the code that finishes
    # them is most of the agent layer, loaded only when there is one.
    names = _imported_modules(["snapshot", "-m", "first"], cli)
    assert "earshot.cas.project" in names  # the snapshot ran
    assert "earshot.agent.core.recovery" not in names
    assert "earshot.agent.core.engine" not in names


def test_unknown_option_is_a_usage_error_exit_2(cli: Cli) -> None:
    result = cli.run("snapshot", "--no-such-option", expect=2)
    assert result.stdout == ""
    assert "No such option" in result.stderr


def test_unknown_command_is_a_usage_error_exit_2(cli: Cli) -> None:
    result = cli.run("no-such-command", expect=2)
    assert result.stdout == ""


def test_an_option_before_a_command_that_lacks_it_is_a_usage_error(cli: Cli) -> None:
    # `earshot --json snapshots` is `earshot snapshots --json`; `session` has no --json.
    assert cli.run("--json", "snapshots").json() == {"snapshots": []}
    ran = cli.run("--json", "session", "new", expect=2)
    assert "No such option '--json'" in ran.stderr, ran


@pytest.mark.parametrize(
    "argv",
    [["restore"], ["diff"], ["forget"], ["restore", "a", "b"], ["diff", "a", "b", "c"]],
    ids=["restore-no-id", "diff-no-id", "forget-no-id", "restore-two-ids", "diff-three-ids"],
)
def test_wrong_argument_count_is_a_usage_error(argv: list[str]) -> None:
    result = CliRunner().invoke(cli, argv, prog_name="earshot")
    assert result.exit_code == 2, result.output
    assert result.stdout == ""


def test_snapshot_accepts_options_after_paths() -> None:
    # Pure argument handling: --help after a PATH is still the option.
    result = CliRunner().invoke(cli, ["snapshot", "a.txt", "--help"], prog_name="earshot")
    assert result.exit_code == 0
    assert "Usage: earshot snapshot" in result.stdout


@pytest.mark.parametrize("argv", [["--json"], ["--root"], ["--json", "--"], ["--root", ".", "-v"]])
def test_command_options_with_no_command_say_so(cli: Cli, argv: list[str]) -> None:
    ran = cli.run(*argv, expect=2)
    assert ran.stderr.startswith("earshot: --"), ran
    assert "a command after" in ran.stderr and "--version" not in ran.stderr, ran
