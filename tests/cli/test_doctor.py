"""``earshot doctor``: each installed hook run with the probe event, and the rest
earshot needs to record, one line each with its fix; exit 1 when one failed."""

from __future__ import annotations

import json
import stat
import sys
from pathlib import Path
from typing import Any

import pytest
from earshot_cli import Cli
from hanging import all_gone, hanging

MAIN = Path(__file__).resolve().parents[2] / "cli" / "__main__.py"


@pytest.fixture(autouse=True)
def own_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A home of the test's own: doctor reads the person's settings too."""
    monkeypatch.setenv("HOME", str(tmp_path / "person"))
    monkeypatch.setenv("CODEX_HOME", str(tmp_path / "person" / ".codex"))


def _script(where: Path) -> Path:
    """An ``earshot`` of its own (a person's wrapper script), to remove later."""
    where.mkdir(parents=True, exist_ok=True)
    path = where / "earshot"
    path.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{MAIN}" "$@"\n')
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def _checks(doc: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    found: dict[str, list[dict[str, Any]]] = {}
    for check in doc["checks"]:
        found.setdefault(check["name"], []).append(check)
    return found


def test_doctor_is_all_ok_on_a_good_install(cli: Cli, root: Path) -> None:
    cli.run("install", "claude")
    ran = cli.run("doctor", "--json")
    doc = ran.json()
    assert doc["ok"] is True
    assert {c["name"]: c["status"] for c in doc["checks"]} == {
        "claude hooks": "ok",
        "daemon": "ok",
        "inotify": "ok",
        "store": "ok",
        "disk": "ok",
    }
    text = cli.run("doctor").stdout
    assert all(line.startswith("ok ") for line in text.splitlines()), text


def test_doctor_finds_a_hook_whose_command_is_gone_and_says_the_fix(
    cli: Cli, root: Path, tmp_path: Path
) -> None:
    script = _script(tmp_path / "bin")
    cli.run("install", "claude", "--command", str(script))
    assert cli.run("doctor", "claude", "--json").json()["ok"] is True
    script.unlink()
    ran = cli.run("doctor", "claude", expect=1)
    (line,) = [x for x in ran.stdout.splitlines() if x.startswith("FAILED")]
    assert line.startswith("FAILED  claude hooks: ")
    assert "settings.local.json: the hook command is not found (" in line
    fix = ran.stdout.splitlines()[ran.stdout.splitlines().index(line) + 1]
    assert fix.strip().startswith("fix: earshot install claude")
    doc = cli.run("doctor", "claude", "--json", expect=1).json()
    (hooks,) = _checks(doc)["claude hooks"]
    assert hooks["status"] == "failed" and hooks["fix"].startswith("earshot install claude")


def test_the_probe_leaves_no_session_and_no_store_behind(cli: Cli, root: Path) -> None:
    cli.run("install", "gemini")
    cli.run("doctor", "gemini")
    assert not (cli.home / "checkpoints").exists() or not any((cli.home / "checkpoints").iterdir())


def test_doctor_says_codex_runs_nothing_until_the_project_is_trusted(
    cli: Cli, root: Path, tmp_path: Path
) -> None:
    env = cli.env()
    cli.run("install", "codex", env=env)
    doc = cli.run("doctor", "codex", "--json", env=env, expect=1).json()
    (trust,) = _checks(doc)["codex trust"]
    assert trust["status"] == "failed"
    assert (
        "9 of earshot's hooks are not trusted and the project is not trusted: " in (trust["detail"])
    )
    assert trust["fix"] == "earshot install codex --trust"
    cli.run("install", "codex", "--trust", env=env)
    doc = cli.run("doctor", "codex", "--json", env=env).json()
    assert [c["status"] for c in _checks(doc)["codex trust"]] == ["ok"]


def test_doctor_warns_of_a_timeout_the_agent_would_clamp(
    cli: Cli, root: Path, tmp_path: Path
) -> None:
    env = cli.env()
    cli.run("install", "codex", "--trust", env=env)
    hooks = root / ".codex" / "hooks.json"
    doc = json.loads(hooks.read_text())
    assert doc["hooks"]["SessionEnd"][0]["hooks"][0]["timeout"] == 3
    doc["hooks"]["SessionEnd"][0]["hooks"][0]["timeout"] = 120  # as installs before did
    hooks.write_text(json.dumps(doc))
    found = _checks(cli.run("doctor", "codex", "--json", env=env, expect=None).json())
    assert any(
        c["status"] == "warning" and "SessionEnd asks 120 s; Codex CLI allows 3 s" in c["detail"]
        for c in found["codex hooks"]
    )


def test_doctor_with_nothing_installed_warns_and_names_the_install(cli: Cli, root: Path) -> None:
    ran = cli.run("doctor")
    assert "warning hooks: no agent's settings hold earshot's hooks" in ran.stdout
    assert "fix: earshot install claude" in ran.stdout
    named = cli.run("doctor", "gemini", expect=1)
    assert "FAILED  gemini hooks" in named.stdout


def test_doctor_exit_codes_are_in_its_help(cli: Cli) -> None:
    text = cli.run("doctor", "--help").stdout
    assert "0 every check ok" in text and "1 a check failed" in text


def test_doctor_kills_an_installed_hook_that_hangs_and_says_so_in_english(
    cli: Cli, root: Path, tmp_path: Path
) -> None:
    script = _script(tmp_path / "bin")
    cli.run("install", "claude", "--command", str(script))
    pids = tmp_path / "pids"
    script.write_text(hanging(tmp_path / "other", pids).read_text())
    ran = cli.run("doctor", "claude", env=cli.env(EARSHOT_PROBE_TIMEOUT="2"), expect=1)
    (line,) = [x for x in ran.stdout.splitlines() if x.startswith("FAILED")]
    assert line.endswith("settings.local.json: the hook command did not answer within 2 s")
    assert all_gone(pids)


def test_doctor_counts_in_english_one_directory_is_not_one_directories(
    cli: Cli, root: Path
) -> None:
    (inotify,) = _checks(cli.run("doctor", "--json").json())["inotify"]
    assert inotify["detail"].startswith("1 directory; max_user_watches ")
