"""Output conventions a script and a person rely on, as git and jj keep them.

With ``--json`` an error is the one document on stdout; without ``-v`` a
warning is one plain ``earshot: warning:`` line, never a log record.
"""

from __future__ import annotations

from pathlib import Path

from earshot_cli import Cli


def test_with_json_an_error_is_the_document_on_stdout_with_its_exit_code(
    cli: Cli, tmp_path: Path
) -> None:
    missing = cli.run("log", "--json", "--root", str(tmp_path / "missing"), expect=1)
    doc = missing.json()["error"]
    assert doc["exit"] == 1 and "no such directory" in doc["message"], doc
    assert missing.stderr.startswith("earshot: ")  # the line a person reads stays
    wide = cli.run("snapshot", "--json", cwd=Path("/"), expect=1).json()["error"]
    assert wide["code"] == "root_too_wide" and "give --root /" in wide["message"], wide
    bad = cli.run("restore", "--json", "0123456789abcdef", expect=None)
    assert bad.rc != 0 and "error" in bad.json(), bad


def test_with_json_a_usage_error_is_a_document_too_and_click_still_explains(cli: Cli) -> None:
    unknown = cli.run("log", "--json", "--bogus", expect=2)
    doc = unknown.json()["error"]
    assert doc == {"code": "usage", "message": doc["message"], "exit": 2}, doc
    assert "--bogus" in doc["message"]
    assert "Usage: earshot log" in unknown.stderr and "--bogus" in unknown.stderr
    # Before the command, for a command that does not exist, for a bad value.
    assert cli.run("--json", "log", "--bogus", expect=2).json()["error"]["code"] == "usage"
    assert "nosuch" in cli.run("--json", "nosuch", expect=2).json()["error"]["message"]
    # An option of earshot's own that does not exist (parsed before any command).
    assert "--bogus" in cli.run("--bogus", "--json", expect=2).json()["error"]["message"]
    assert "'x'" in cli.run("undo", "--json", "x", expect=2).json()["error"]["message"]
    # Without --json, or with it only after '--' (a command's word): nothing on stdout.
    assert cli.run("log", "--bogus", expect=2).stdout == ""
    assert cli.run("exec", "--bogus", "--", "--json", expect=2).stdout == ""


def test_a_warning_is_one_plain_line_and_v_brings_back_the_record(cli: Cli) -> None:
    cli.new_session()
    (logs,) = (cli.home / "sessions").iterdir()
    (logs / "01m8z3j4k70000rbvb3p3wwv5z.jsonl").write_text("not a header\n")
    ran = cli.run("sessions")
    (line,) = [w for w in ran.stderr.splitlines() if "unlisted" in w]
    assert line.startswith("earshot: warning: session unlisted: path "), line
    assert "timestamp=" not in ran.stderr and "level=" not in ran.stderr
    verbose = cli.run("sessions", "-v")
    assert "level='warning'" in verbose.stderr and "event='session_unlisted'" in verbose.stderr
