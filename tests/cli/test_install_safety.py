"""``earshot install`` that cannot break silently: a command that does not run is
refused, Codex's config.toml stays valid TOML whatever its shape, uninstall
leaves no litter, and machine paths go where only this machine reads them."""

from __future__ import annotations

import json
import os
import tomllib
from pathlib import Path

import pytest
from earshot_cli import Cli
from hanging import all_gone, hanging


@pytest.fixture(autouse=True)
def own_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "person"
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("CODEX_HOME", str(home / ".codex"))
    return home


@pytest.mark.parametrize("agent", ["claude", "codex", "gemini"])
def test_install_refuses_a_command_that_does_not_run_and_writes_nothing(
    cli: Cli, root: Path, agent: str, check_error: object
) -> None:
    ran = cli.run("install", agent, "--command", "/nonexistent/earshot", expect=1)
    (line,) = ran.stderr.splitlines()
    assert line.startswith("earshot: --command /nonexistent/earshot is not found")
    assert line.endswith("nothing was written")
    assert list(root.iterdir()) == []


def test_install_refuses_a_command_that_runs_but_is_not_earshot(
    cli: Cli, root: Path, tmp_path: Path
) -> None:
    fake = tmp_path / "bin" / "earshot"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\ncat >/dev/null\n")
    fake.chmod(0o755)
    ran = cli.run("install", "claude", "--command", str(fake), expect=1)
    assert f"--command {fake} runs, but does not answer as earshot's hook" in ran.stderr
    assert list(root.iterdir()) == []


def test_a_command_that_hangs_is_killed_with_its_children_at_the_timeout(
    cli: Cli, root: Path, tmp_path: Path
) -> None:
    pids = tmp_path / "pids"
    script = hanging(tmp_path / "bin", pids)
    env = cli.env(EARSHOT_PROBE_TIMEOUT="2")
    ran = cli.run("install", "claude", "--command", str(script), env=env, expect=1)
    (line,) = ran.stderr.splitlines()
    assert line == f"earshot: --command {script} did not answer within 2 s; nothing was written"
    assert all_gone(pids)


#: A config Codex reads, each setting ``hooks.state`` in another shape.
SHAPES = {
    "inline table": (
        'model = "gpt-5.5"  # mine\n'
        "[hooks]\n"
        'state = { "/elsewhere/hooks.json:stop:0:0" = { trusted_hash = "sha256:ab" } }\n'
        "[tui]\n"
        "animations = false\n"
    ),
    "dotted keys": (
        'model = "gpt-5.5"\n'
        "[hooks]\n"
        'state."/elsewhere/hooks.json:stop:0:0".trusted_hash = "sha256:ab"\n'
        "# the person's comment\n"
        "[tui]\n"
        "animations = false\n"
    ),
    "CRLF": (
        'model = "gpt-5.5"\r\n'
        '[hooks.state."/elsewhere/hooks.json:stop:0:0"]\r\n'
        'trusted_hash = "sha256:ab"\r\n'
        "[tui]\r\n"
        "animations = false\r\n"
    ),
}


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_codex_trust_keeps_the_config_valid_toml_and_the_person_s_content(
    cli: Cli, root: Path, own_home: Path, shape: str
) -> None:
    config = own_home / ".codex" / "config.toml"
    config.parent.mkdir(parents=True)
    text = SHAPES[shape]
    config.write_bytes(text.encode())
    before = tomllib.loads(text)
    cli.run("install", "codex", "--trust")
    after = tomllib.loads(config.read_bytes().decode())  # valid TOML, or this raises
    assert after["model"] == "gpt-5.5" and after["tui"] == {"animations": False}
    state = after["hooks"]["state"]
    assert state["/elsewhere/hooks.json:stop:0:0"] == {"trusted_hash": "sha256:ab"}
    assert sum(k.startswith(str(root.resolve())) for k in state) == 9
    assert after["projects"][str(root.resolve())] == {"trust_level": "trusted"}
    if shape == "CRLF":
        assert b"\n" not in config.read_bytes().replace(b"\r\n", b"")
    if shape == "dotted keys":
        assert "# the person's comment" in config.read_text()
    cli.run("uninstall", "codex")
    assert config.read_bytes() == text.encode() and tomllib.loads(text) == before
    assert not list(config.parent.glob("*.bak*"))


@pytest.mark.parametrize("agent", ["claude", "codex", "gemini"])
def test_uninstall_leaves_no_empty_file_and_no_backup(
    cli: Cli, root: Path, own_home: Path, agent: str
) -> None:
    cli.run("install", agent, *(["--trust"] if agent == "codex" else []))
    cli.run("install", agent, "--strict")  # a second install: still one backup at most
    cli.run("uninstall", agent)
    # The folders install made (.claude/, its commands/, Codex's home) go too.
    assert list(root.iterdir()) == []
    assert not own_home.exists()


@pytest.mark.parametrize("agent", ["claude", "codex", "gemini"])
def test_uninstall_keeps_the_person_s_own_empty_agent_folder(
    cli: Cli, root: Path, agent: str
) -> None:
    folder = root / f".{agent}"
    folder.mkdir()
    cli.run("install", agent)
    assert any(folder.iterdir())
    cli.run("uninstall", agent)
    assert list(root.iterdir()) == [folder] and list(folder.iterdir()) == []


def test_uninstall_gives_a_person_s_file_back_byte_for_byte(cli: Cli, root: Path) -> None:
    path = root / ".gemini" / "settings.json"
    path.parent.mkdir()
    text = '{\n    "theme": "dark",\n    "hooksConfig": {"enabled": false}\n}\n'
    path.write_text(text)
    cli.run("install", "gemini")
    assert (path.parent / "settings.json.earshot.bak").read_text() == text
    cli.run("uninstall", "gemini")
    assert path.read_text() == text
    assert sorted(p.name for p in path.parent.iterdir()) == ["settings.json"]


def test_claude_s_machine_paths_go_into_settings_local_json(cli: Cli, root: Path) -> None:
    shared = root / ".claude" / "settings.json"
    shared.parent.mkdir()
    shared.write_text('{"model": "opus"}')
    cli.run("install", "claude")
    assert json.loads(shared.read_text()) == {"model": "opus"}  # the team's file: untouched
    local = json.loads((root / ".claude" / "settings.local.json").read_text())
    assert "PreToolUse" in local["hooks"]


def test_an_install_before_in_the_shared_file_moves_to_the_personal_one(
    cli: Cli, root: Path
) -> None:
    shared = root / ".claude" / "settings.json"
    cli.run("install", "claude")
    local = root / ".claude" / "settings.local.json"
    # As earlier installs wrote it: the hooks in the shared file, beside the team's.
    doc = json.loads(local.read_text())
    local.unlink()
    shared.write_text(json.dumps({"model": "opus", **doc}))
    ran = cli.run("install", "claude")
    assert f"took earshot's hooks out of {shared}" in ran.stdout
    assert json.loads(shared.read_text()) == {"model": "opus"}
    assert "PreToolUse" in local.read_text()


def test_a_skipped_slash_command_is_not_advertised(cli: Cli, root: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (root / ".claude").mkdir()
    (root / ".claude" / "commands").symlink_to(elsewhere, target_is_directory=True)
    ran = cli.run("install", "claude")
    assert "leads out of the project" in ran.stderr
    assert "/earshot" not in ran.stdout
    assert "the prompt 'earshot undo' inside it" in ran.stdout
    assert list(elsewhere.iterdir()) == []


def test_no_hook_asks_a_timeout_its_agent_clamps(cli: Cli, root: Path) -> None:
    cli.run("install", "codex")
    codex = json.loads((root / ".codex" / "hooks.json").read_text())["hooks"]
    (end,) = codex["SessionEnd"][0]["hooks"]
    assert end["timeout"] == 3 and end["command"].endswith("--timeout 2")
    cli.run("install", "claude")
    claude = json.loads((root / ".claude" / "settings.local.json").read_text())["hooks"]
    assert claude["SessionEnd"][0]["hooks"][0]["timeout"] == 60


#: A trust level of the project the person set in Codex's config, in the shapes it reads.
PERSON_TRUST = {
    "dotted untrusted": 'projects."{root}".trust_level = "untrusted"\nmodel = "o3"\n',
    "table untrusted": 'model = "o3"\n\n[projects."{root}"]\ntrust_level = "untrusted"\n',
    "only the line": 'projects."{root}".trust_level = "untrusted"\n',
    "trusted": 'projects."{root}".trust_level = "trusted"\nmodel = "o3"\n',
}


@pytest.mark.parametrize("shape", sorted(PERSON_TRUST))
def test_a_project_trust_level_the_person_set_is_never_changed_and_uninstall_gives_it_back(
    cli: Cli, root: Path, own_home: Path, shape: str
) -> None:
    project = os.path.realpath(root)
    config = own_home / ".codex" / "config.toml"
    config.parent.mkdir(parents=True)
    text = PERSON_TRUST[shape].format(root=project)
    config.write_text(text)
    level = "trusted" if shape == "trusted" else "untrusted"
    ran = cli.run("install", "codex", "--trust", expect=0 if level == "trusted" else 3)
    assert tomllib.loads(config.read_text())["projects"][project] == {"trust_level": level}
    if level == "untrusted":
        (said,) = [x for x in ran.stdout.splitlines() if x.startswith("FAILED")]
        assert said.startswith("FAILED  codex trust: ")
        assert f'projects."{project}".trust_level = "untrusted"' in said
        assert 'change it to "trusted" by hand' in said
        doc = cli.run("install", "codex", "--trust", "--json", expect=3).json()
        assert doc["project_trust_kept"] == "untrusted"
    gone = cli.run("uninstall", "codex").stdout
    assert "which install added" not in gone
    assert config.read_bytes() == text.encode()
    assert sorted(p.name for p in config.parent.iterdir()) == ["config.toml"]


def test_uninstall_after_the_person_edited_codex_s_config_leaves_no_blank_line_of_earshot(
    cli: Cli, root: Path, own_home: Path
) -> None:
    config = own_home / ".codex" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text('model = "o3"\n')
    cli.run("install", "codex", "--user", "--trust")
    config.write_text("# mine\n" + config.read_text())  # the backup no longer matches
    cli.run("uninstall", "codex", "--user")
    assert config.read_bytes() == b'# mine\nmodel = "o3"\n'
