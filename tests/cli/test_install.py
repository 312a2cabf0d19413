"""``earshot install`` / ``uninstall``: earshot's hooks in an agent's own settings,
everything else kept, twice changing nothing, a backup before any write."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from earshot_cli import Cli

AGENT_FILES = {
    "claude": ".claude/settings.local.json",
    "codex": ".codex/hooks.json",
    "gemini": ".gemini/settings.json",
}


def settings(root: Path, agent: str) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((root / AGENT_FILES[agent]).read_text())
    return doc


def commands_of(doc: dict[str, Any], event: str) -> list[str]:
    return [h["command"] for g in doc["hooks"].get(event, []) for h in g["hooks"]]


OTHERS = {
    "model": "opus",
    "permissions": {"allow": ["Bash(make:*)"]},
    "hooks": {
        "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "lint"}]}],
        "Stop": [{"hooks": [{"type": "command", "command": "notify-send done"}]}],
    },
}


@pytest.mark.parametrize("agent", ["claude", "codex", "gemini"])
def test_install_adds_earshot_and_keeps_every_other_key_and_hook(
    cli: Cli, root: Path, agent: str
) -> None:
    path = root / AGENT_FILES[agent]
    path.parent.mkdir()
    path.write_text(json.dumps(OTHERS))
    ran = cli.run("install", agent, "--json").json()
    assert ran["changed"] is True and ran["backup"] is not None
    assert json.loads(Path(ran["backup"]).read_text()) == OTHERS
    doc = settings(root, agent)
    assert doc["model"] == "opus" and doc["permissions"] == OTHERS["permissions"]
    pre = "BeforeTool" if agent == "gemini" else "PreToolUse"
    ours = [c for c in commands_of(doc, pre) if " hook " in c]
    assert len(ours) == 1 and ours[0].split()[-4:] == ["hook", agent, "--timeout", "100"]
    if agent != "gemini":
        assert commands_of(doc, "PreToolUse")[0] == "lint"
        assert commands_of(doc, "Stop")[0] == "notify-send done"
    else:
        assert doc["hooksConfig"] == {"enabled": True}


@pytest.mark.parametrize("agent", ["claude", "codex", "gemini"])
def test_installing_twice_changes_nothing_and_uninstall_gives_the_file_back(
    cli: Cli, root: Path, agent: str
) -> None:
    path = root / AGENT_FILES[agent]
    path.parent.mkdir()
    path.write_text(json.dumps(OTHERS))
    cli.run("install", agent)
    first = path.read_text()
    again = cli.run("install", agent, "--json").json()
    assert again["changed"] is False and again["backup"] is None
    assert path.read_text() == first
    removed = cli.run("uninstall", agent, "--json").json()
    assert removed["changed"] is True
    # Gemini's hooksConfig.enabled, which install turned on, goes too.
    assert json.loads(path.read_text()) == OTHERS
    assert cli.run("uninstall", agent, "--json").json()["changed"] is False


def test_installing_with_other_options_replaces_earshot_s_entries_only(
    cli: Cli, root: Path
) -> None:
    cli.run("install", "claude")
    cli.run("install", "claude", "--strict")
    doc = settings(root, "claude")
    for event, groups in doc["hooks"].items():
        (group,) = groups
        (hook,) = group["hooks"]
        assert "--strict" in hook["command"], event


def test_dry_run_writes_nothing(cli: Cli, root: Path) -> None:
    ran = cli.run("install", "claude", "--dry-run")
    assert "would add" in ran.stdout
    assert not (root / ".claude").exists()


def test_user_scope_writes_the_agent_s_own_settings(cli: Cli, root: Path, tmp_path: Path) -> None:
    home = tmp_path / "person"
    home.mkdir()
    cli.run("install", "claude", "--user", env=cli.env(HOME=str(home)))
    assert (home / ".claude" / "settings.json").exists()
    assert (home / ".claude" / "commands" / "earshot.md").exists()
    assert not (root / ".claude").exists()
    codex_home = tmp_path / "codex-home"
    cli.run("install", "codex", "--user", env=cli.env(HOME=str(home), CODEX_HOME=str(codex_home)))
    assert (codex_home / "hooks.json").exists()


def test_a_settings_file_that_is_not_json_is_refused_and_left_alone(
    cli: Cli, root: Path, check_error: Any
) -> None:
    path = root / ".claude" / "settings.local.json"
    path.parent.mkdir()
    path.write_text('{"model": "x",}  // a comment\n')
    ran = cli.run("install", "claude", expect=1)
    assert "not JSON" in check_error(ran) and "nothing was written" in ran.stderr
    assert path.read_text() == '{"model": "x",}  // a comment\n'


def test_the_person_s_own_earshot_command_file_is_never_touched(cli: Cli, root: Path) -> None:
    mine = root / ".claude" / "commands" / "earshot.md"
    mine.parent.mkdir(parents=True)
    mine.write_text("my own command\n")
    ran = cli.run("install", "claude")
    assert "left" in ran.stdout and "not earshot's" in ran.stdout
    cli.run("uninstall", "claude")
    assert mine.read_text() == "my own command\n"


def test_the_slash_command_is_written_and_removed_with_the_hooks(cli: Cli, root: Path) -> None:
    cli.run("install", "gemini")
    command = root / ".gemini" / "commands" / "earshot.toml"
    assert 'prompt = "earshot {{args}}"' in command.read_text()
    cli.run("uninstall", "gemini")
    assert not command.exists()


def test_tool_hooks_skip_the_agent_s_read_only_tools(cli: Cli, root: Path) -> None:
    cli.run("install", "claude")
    (group,) = settings(root, "claude")["hooks"]["PreToolUse"]
    matcher = re.compile(group["matcher"])
    assert not matcher.search("Read") and not matcher.search("Grep")
    for tool in ("Bash", "Write", "Edit", "NotebookEdit", "Agent", "mcp__db__query", "ReadWrite"):
        assert matcher.search(tool), tool


def test_the_installed_command_runs_the_hook(cli: Cli, root: Path) -> None:
    import subprocess

    cli.run("install", "claude")
    (group,) = settings(root, "claude")["hooks"]["SessionStart"]
    (hook,) = group["hooks"]
    payload = {"session_id": "s", "cwd": str(root), "hook_event_name": "SessionStart"}
    done = subprocess.run(
        ["/bin/sh", "-c", hook["command"]],
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        env=cli.env(),
        cwd=root,
        check=False,
    )
    assert (done.returncode, done.stdout) == (0, "")
    assert cli.run("sessions", "--json").json()["sessions"]


def test_codex_trust_is_written_once_kept_beside_other_settings_and_taken_out(
    cli: Cli, root: Path, tmp_path: Path
) -> None:
    codex_home = tmp_path / "codex"
    codex_home.mkdir()
    config = codex_home / "config.toml"
    config.write_text('model = "gpt-5.5"\n')
    env = cli.env(CODEX_HOME=str(codex_home))
    ran = cli.run("install", "codex", "--user", "--trust", "--json", env=env).json()
    assert ran["trusted"] == str(config)
    text = config.read_text()
    assert text.startswith('model = "gpt-5.5"\n')
    hooks_file = (codex_home / "hooks.json").resolve()
    assert f'[hooks.state."{hooks_file}:pre_tool_use:0:0"]' in text
    assert text.count('trusted_hash = "sha256:') == 9
    again = cli.run("install", "codex", "--user", "--trust", "--json", env=env).json()
    assert again["changed"] is False and config.read_text() == text
    cli.run("uninstall", "codex", "--user", env=env)
    assert config.read_text() == 'model = "gpt-5.5"\n'


def test_trust_is_for_codex_only(cli: Cli, root: Path, check_error: Any) -> None:
    ran = cli.run("install", "claude", "--trust", expect=1)
    assert "--trust is for codex" in check_error(ran)
    assert not (root / ".claude").exists()  # refused before anything was written


def test_a_hook_that_only_mentions_earshot_is_someone_else_s(cli: Cli, root: Path) -> None:
    path = root / ".claude" / "settings.local.json"
    path.parent.mkdir()
    mine = {"type": "command", "command": "say earshot hook claude finished"}
    path.write_text(json.dumps({"hooks": {"Stop": [{"hooks": [mine]}]}}))
    cli.run("install", "claude")
    cli.run("uninstall", "claude")
    assert json.loads(path.read_text())["hooks"]["Stop"] == [{"hooks": [mine]}]


def test_a_settings_file_that_is_a_link_is_written_where_it_leads(
    cli: Cli, root: Path, tmp_path: Path
) -> None:
    home = tmp_path / "person"
    dotfiles = tmp_path / "dotfiles"
    dotfiles.mkdir()
    target = dotfiles / "claude-settings.json"
    target.write_text('{"model": "opus"}')
    (home / ".claude").mkdir(parents=True)
    (home / ".claude" / "settings.json").symlink_to(target)
    cli.run("install", "claude", "--user", env=cli.env(HOME=str(home)))
    assert (home / ".claude" / "settings.json").is_symlink()
    assert "PreToolUse" in json.loads(target.read_text())["hooks"]
    # Codex's config.toml too: trusted where the link leads, the link kept.
    codex_home = tmp_path / "codex"
    codex_home.mkdir()
    config = dotfiles / "codex-config.toml"
    config.write_text('model = "gpt-5.5"\n')
    (codex_home / "config.toml").symlink_to(config)
    env = cli.env(HOME=str(home), CODEX_HOME=str(codex_home))
    cli.run("install", "codex", "--user", "--trust", env=env)
    assert (codex_home / "config.toml").is_symlink() and "trusted_hash" in config.read_text()


@pytest.mark.parametrize("where", ["nowhere", "outside"])
def test_a_project_s_settings_link_to_nothing_or_out_of_the_project_is_never_followed(
    cli: Cli, root: Path, tmp_path: Path, where: str
) -> None:
    target = tmp_path / "elsewhere" / "x.json"
    if where == "outside":
        target.parent.mkdir()
        target.write_text('{"other": "program"}')
    (root / ".claude").mkdir()
    (root / ".claude" / "settings.local.json").symlink_to(target)
    ran = cli.run("install", "claude", expect=1)
    assert "not followed; nothing was written" in ran.stderr
    if where == "outside":
        assert target.read_text() == '{"other": "program"}'
    else:
        assert not target.parent.exists()


def test_uninstall_keeps_every_hook_and_key_it_does_not_own(cli: Cli, root: Path) -> None:
    path = root / ".claude" / "settings.local.json"
    path.parent.mkdir()
    theirs = {
        "hooks": {
            "Notification": {"matcher": "", "hooks": [{"type": "command", "command": "notify"}]},
            "Stop": [],
        },
        "model": "opus",
    }
    path.write_text(json.dumps(theirs))
    ran = cli.run("uninstall", "claude", "--json").json()
    assert ran["changed"] is False and json.loads(path.read_text()) == theirs
    path.write_text(json.dumps({"hooks": {}, "model": "opus"}))
    cli.run("uninstall", "claude")
    assert json.loads(path.read_text()) == {"hooks": {}, "model": "opus"}


@pytest.mark.parametrize("hooks", ['"mine"', "[]", '{"PreToolUse": {"x": 1}}'])
def test_hooks_that_are_not_the_agent_s_shape_are_refused_not_replaced(
    cli: Cli, root: Path, hooks: str
) -> None:
    path = root / ".claude" / "settings.local.json"
    path.parent.mkdir()
    text = f'{{"hooks": {hooks}}}'
    path.write_text(text)
    ran = cli.run("install", "claude", expect=1)
    assert "not what the agent reads" in ran.stderr and path.read_text() == text


def test_gemini_hooks_turned_off_are_said_turned_on_and_turned_off_again(
    cli: Cli, root: Path
) -> None:
    path = root / ".gemini" / "settings.json"
    path.parent.mkdir()
    theirs = {
        "hooks": {
            "BeforeTool": [{"matcher": "*", "hooks": [{"type": "command", "command": "audit"}]}]
        },
        "hooksConfig": {"enabled": False},
    }
    path.write_text(json.dumps(theirs))
    ran = cli.run("install", "gemini")
    assert "hooksConfig.enabled, which was off" in ran.stdout
    assert settings(root, "gemini")["hooksConfig"] == {"enabled": True}
    cli.run("uninstall", "gemini")
    assert json.loads(path.read_text()) == theirs


def test_one_backup_is_kept_the_file_before_earshot_and_goes_when_uninstall_gives_it_back(
    cli: Cli, root: Path
) -> None:
    path = root / ".claude" / "settings.local.json"
    path.parent.mkdir()
    original = '{"model":"the original"}'  # compact: install writes it indented
    path.write_text(original)
    first = cli.json("install", "claude")["backup"]
    assert first == f"{path}.earshot.bak"
    assert cli.json("install", "claude", "--strict")["backup"] is None  # the first stays
    assert Path(first).read_text() == original
    cli.run("uninstall", "claude")
    assert path.read_text() == original  # its own bytes, not a rewrite
    assert sorted(p.name for p in path.parent.iterdir()) == ["settings.local.json"]


@pytest.mark.parametrize("kind", ["fifo", "directory", "not utf-8", "deep"])
def test_settings_earshot_cannot_read_are_one_line_never_a_hang(
    cli: Cli, root: Path, tmp_path: Path, kind: str
) -> None:
    import os

    path = root / ".claude" / "settings.local.json"
    path.parent.mkdir()
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "directory":
        path.mkdir()
    elif kind == "not utf-8":
        path.write_bytes(b'{"model": "\xff"}')
    else:
        path.write_text('{"x": ' + "[" * 600 + "]" * 600 + "}")
    for command in ("install", "uninstall"):
        ran = cli.run(command, "claude", expect=1, timeout=20)
        (line,) = ran.stderr.splitlines()
        assert line.startswith("earshot: ") and line.endswith("nothing was written")
    assert not list(path.parent.glob("*.bak*"))


def test_a_codex_config_earshot_cannot_read_leaves_uninstall_working(
    cli: Cli, root: Path, tmp_path: Path
) -> None:
    codex_home = tmp_path / "codex"
    codex_home.mkdir()
    env = cli.env(CODEX_HOME=str(codex_home))
    cli.run("install", "codex", "--user", "--trust", env=env)
    config = codex_home / "config.toml"
    config.unlink()
    config.mkdir()
    ran = cli.run("uninstall", "codex", "--user", env=env)
    (said,) = ran.stderr.splitlines()
    assert said.startswith("earshot: warning: ") and "config.toml: not a regular file" in said
    assert "nothing was written" not in said  # the hooks file was
    assert not (codex_home / "hooks.json").exists()  # install made it; nothing else is in it
    # A --trust install that cannot read the config writes nothing at all.
    ran = cli.run("install", "codex", "--user", "--trust", env=env, expect=1)
    assert not (codex_home / "hooks.json").exists()


@pytest.mark.parametrize("text", ['{"x": 1e999}', '{"y": "\\ud800"}'])
def test_settings_json_cannot_write_back_as_they_were_are_refused_or_kept_escaped(
    cli: Cli, root: Path, text: str
) -> None:
    path = root / ".claude" / "settings.local.json"
    path.parent.mkdir()
    path.write_text(text)
    ran = cli.run("install", "claude", expect=None)
    if "1e999" in text:
        assert ran.rc == 1 and "too large" in ran.stderr and path.read_text() == text
    else:
        assert ran.rc == 0
        assert json.loads(path.read_text())["y"] == "\ud800"


def test_a_link_where_the_command_would_go_is_never_written_through(
    cli: Cli, root: Path, tmp_path: Path
) -> None:
    elsewhere = tmp_path / "elsewhere" / "evil.md"
    commands = root / ".claude" / "commands"
    commands.mkdir(parents=True)
    (commands / "earshot.md").symlink_to(elsewhere)  # dangling
    cli.run("install", "claude")
    assert not elsewhere.exists()


def test_a_project_s_agent_directory_linked_out_of_the_project_is_never_written_through(
    cli: Cli, root: Path, tmp_path: Path
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (root / ".claude").symlink_to(elsewhere, target_is_directory=True)
    ran = cli.run("install", "claude", expect=1)
    assert "a link out of the project" in ran.stderr and "nothing was written" in ran.stderr
    assert list(elsewhere.iterdir()) == []


@pytest.mark.without_dac_override
def test_an_uninstall_that_cannot_write_the_settings_keeps_what_gives_gemini_its_switch_back(
    cli: Cli, root: Path
) -> None:
    path = root / ".gemini" / "settings.json"
    path.parent.mkdir()
    theirs = {"hooksConfig": {"enabled": False}}
    path.write_text(json.dumps(theirs))
    cli.run("install", "gemini")
    path.parent.chmod(0o555)  # no new file there: the settings cannot be replaced
    try:
        ran = cli.run("uninstall", "gemini", expect=1)
    finally:
        path.parent.chmod(0o755)
    assert "nothing was written" in ran.stderr
    assert settings(root, "gemini")["hooksConfig"] == {"enabled": True}
    cli.run("uninstall", "gemini")  # once it can: the switch is given back
    assert json.loads(path.read_text()) == theirs
