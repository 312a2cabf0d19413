"""Settings files: ~/.config/earshot/config.toml, then the root's .earshot.toml.

What a file sets is what its EARSHOT_* variable sets; the environment wins
over both, the project's file over the person's; a project's file may not
name a pager or a data directory; a broken file is one line and exit 1.
Both modes: the daemon's worker works with the client's environment, the
settings applied.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from earshot_cli import EARSHOT, Cli

pytestmark = pytest.mark.both_modes


def _user_config(cli: Cli, text: str) -> Path:
    path = cli.home / "config" / "earshot" / "config.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def _too_large(doc: dict[str, object]) -> list[str]:
    paths = doc["unrecorded_paths"]
    assert isinstance(paths, list)
    return sorted(p["path"] for p in paths if p["reason"] == "too_large")


def test_the_person_s_file_sets_what_its_variable_sets_and_the_variable_wins(cli: Cli) -> None:
    _user_config(cli, "# mine\nmax_file_size = 10\n")
    cli.write("small.txt", "tiny\n")
    cli.write("large.txt", "x" * 100)
    assert _too_large(cli.json("snapshot")) == ["large.txt"]
    cli.write("other.txt", "y" * 100)
    doc = cli.json("snapshot", env=cli.env(EARSHOT_MAX_FILE_SIZE="1000"))
    assert "other.txt" not in _too_large(doc)


def test_the_project_s_file_is_found_from_a_folder_and_wins_over_the_person_s(cli: Cli) -> None:
    _user_config(cli, "max_file_size = 1000\n")
    (cli.root / ".earshot.toml").write_text('max_file_size = "50"\n')
    sub = cli.root / "src"
    sub.mkdir()
    cli.write("src/large.txt", "x" * 100)
    doc = cli.json("snapshot", cwd=sub)  # the settings file marks the root, too
    assert _too_large(doc) == ["src/large.txt"]


def test_a_project_may_not_name_a_pager_or_a_data_directory(cli: Cli, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere-data"
    (cli.root / ".earshot.toml").write_text(
        f'pager = "touch {tmp_path}/ran"\nhome = "{elsewhere}"\n'
    )
    ran = cli.run("snapshots")
    warnings = ran.stderr.splitlines()
    assert len(warnings) == 2, ran
    assert all(w.startswith("earshot: warning: ") for w in warnings), ran
    assert "'pager' is not read from a project's file" in ran.stderr, ran
    assert not elsewhere.exists()


def test_an_unknown_setting_is_one_warning_and_the_rest_apply(cli: Cli) -> None:
    _user_config(cli, "max_fiel_size = 10\nmax_file_size = 10\n")
    cli.write("large.txt", "x" * 100)
    ran = cli.run("snapshot", "--json")
    assert ran.stderr.startswith("earshot: warning: ") and "'max_fiel_size'" in ran.stderr, ran
    assert len(ran.stderr.splitlines()) == 1, ran
    assert _too_large(ran.json()) == ["large.txt"]


@pytest.mark.parametrize(
    "text",
    [b"max_file_size = [", b"max_file_size = [1, 2]\n", b'model = "\xff"\n'],
    ids=["not-toml", "a-list", "not-utf-8"],
)
def test_a_broken_file_is_one_line_and_nothing_is_made(
    cli: Cli, text: bytes, check_error: object
) -> None:
    path = _user_config(cli, "")
    path.write_bytes(text)
    before = sorted(p.name for p in cli.home.iterdir())
    ran = cli.run("snapshot", expect=1)
    line = check_error(ran)  # type: ignore[operator]
    assert str(path) in line, line
    assert sorted(p.name for p in cli.home.iterdir()) == before


def test_a_project_s_file_another_user_owns_is_not_read(cli: Cli, tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("giving a file to another user needs root")  # CI runs as root
    shared = tmp_path / "shared"  # as /tmp: a parent anyone may write in
    project = shared / "proj"
    project.mkdir(parents=True)
    planted = shared / ".earshot.toml"
    planted.write_text('max_file_size = "1"\n')
    os.chown(planted, 65534, 65534)
    (project / "b.txt").write_text("precious\n")
    ran = cli.run("snapshot", "--json", "--root", str(project), cwd=project)
    assert "owned by another user (uid 65534); not read" in ran.stderr, ran
    assert ran.json()["unrecorded"] == 0, ran


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ('home = "relative"\n', "home must be an absolute path"),
        ('color = "sometimes"\n', "color must be one of auto, always, never"),
        ('watch = "bogus"\n', "watch must be one of auto, always, never"),
    ],
    ids=["relative-home", "colour", "watch"],
)
def test_a_value_out_of_its_set_is_one_line(
    cli: Cli, text: str, said: str, check_error: object
) -> None:
    _user_config(cli, text)
    line = check_error(cli.run("snapshots", expect=1))  # type: ignore[operator]
    assert said in line, line
    assert not (cli.root / "relative").exists()


def test_a_settings_path_that_is_not_a_file_is_a_warning_and_a_huge_one_is_refused(
    cli: Cli,
) -> None:
    path = _user_config(cli, "")
    path.unlink()
    os.mkfifo(path)  # reading it would wait for a writer for ever
    ran = cli.run("snapshots", timeout=30)
    assert ran.stderr == f"earshot: warning: {path}: not a regular file; not read\n", ran
    path.unlink()
    with path.open("wb") as handle:
        handle.truncate(2 << 20)
    assert "over 1 MiB" in cli.run("snapshots", expect=1).stderr


def test_a_hook_with_a_broken_settings_file_says_so_and_strict_refuses(cli: Cli) -> None:
    (cli.root / ".earshot.toml").write_text("{")
    (cli.root / "important.txt").write_text("keep\n")
    event = {
        "session_id": "s1",
        "cwd": str(cli.root),
        "hook_event_name": "PreToolUse",
        "tool_name": "Bash",
        "tool_input": {"command": "rm important.txt"},
        "tool_use_id": "t1",
    }
    told = cli.run("hook", "claude", stdin=json.dumps(event)).json()
    assert "not valid TOML" in told["systemMessage"], told
    refused = cli.run("hook", "claude", "--strict", stdin=json.dumps(event)).json()
    decision = refused["hookSpecificOutput"]
    assert decision["permissionDecision"] == "deny", refused
    assert ".earshot.toml: not valid TOML" in decision["permissionDecisionReason"], refused


def test_json_errors_before_any_command_are_documents_too(cli: Cli, tmp_path: Path) -> None:
    _user_config(cli, "{")
    ran = cli.run("--json", "log", expect=1)
    assert ran.json()["error"]["code"] == "settings", ran
    (cli.home / "config" / "earshot" / "config.toml").unlink()
    gone = tmp_path / "gone"
    gone.mkdir()
    proc = subprocess.run(
        ["sh", "-c", f"cd {gone} && rmdir {gone} && exec {EARSHOT} --json log"],
        env=cli.env(),
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 1, proc
    assert json.loads(proc.stdout)["error"]["code"] == "cwd_gone", proc
