"""``earshot install``, ``uninstall`` and ``doctor`` on damaged settings files: each
says what it did, or refuses in one line naming the file; never a traceback.

The files are read and written in-process first (``Settings``, with a
damaged ``installs.json`` of earshot's own beside them); then each example
of the last test runs the real script three times, so its count is cut to 6%.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest
from earshot_cli import Cli, Ran
from fuzz import DEEP_JSON, damaged, examples, json_values, mutated_doc
from hypothesis import example, given
from hypothesis import strategies as st

from earshot.agent.hooks.settings import HookCommand, NotHooks, add_hooks, remove_hooks
from earshot.cli.install_files import Settings
from earshot.cli.settings_io import SettingsError

AGENTS = ("claude", "codex", "gemini")
SETTINGS = {
    "claude": ".claude/settings.json",
    "codex": ".codex/hooks.json",
    "gemini": ".gemini/settings.json",
}
#: A program that is not there: doctor's probe of it fails at once.
OURS = "/nonexistent/earshot hook {agent} --timeout 100"


def settings_doc(agent: str) -> st.SearchStrategy[object]:
    hook = st.fixed_dictionaries(
        {"type": st.just("command"), "command": st.sampled_from([OURS, "echo x"])},
        optional={"timeout": st.sampled_from([100, 9999, "x", 1e999, None])},
    ).map(lambda h: {**h, "command": h["command"].format(agent=agent)})
    groups = st.lists(st.fixed_dictionaries({"hooks": st.lists(hook, max_size=2)}), max_size=2)
    events = st.sampled_from(["SessionStart", "SessionEnd", "Stop", "BeforeTool", "Other"])
    doc = st.fixed_dictionaries(
        {"hooks": st.dictionaries(events, groups, max_size=3)},
        optional={"hooksConfig": st.just({"enabled": False}), "theirs": json_values},
    )
    return doc | mutated_doc(doc)


@examples(1)
@given(
    st.sampled_from(AGENTS),
    st.data(),
    damaged(json_values.map(lambda v: json.dumps(v).encode()), max_size=40) | st.just(DEEP_JSON),
)
def test_a_damaged_settings_file_is_read_and_written_back_or_refused(
    agent: str, data: st.DataObject, installs: bytes
) -> None:
    valid = settings_doc(agent).map(lambda d: json.dumps(d, indent=2).encode())
    raw = data.draw(damaged(valid, max_size=60) | st.just(DEEP_JSON))
    with tempfile.TemporaryDirectory() as tmp, pytest.MonkeyPatch.context() as env:
        env.setenv("EARSHOT_HOME", tmp)
        (Path(tmp) / "installs.json").write_bytes(installs)  # earshot's own notes, damaged
        path = Path(tmp) / SETTINGS[agent]
        path.parent.mkdir(parents=True)
        path.write_bytes(raw)
        try:
            settings = Settings.read(path, None)
            added = add_hooks(settings.doc, HookCommand(("/usr/bin/earshot",), agent))
        except (SettingsError, NotHooks):
            return
        settings.write(added)
        assert Settings.read(path, None).doc == added
        Settings.read(path, None).write(remove_hooks(added, agent))
        assert Settings.read(path, None).doc == remove_hooks(added, agent)


CONFIG = '[projects."/elsewhere"]\ntrust_level = "trusted"\n[hooks.state]\n'


def refused_in_one_line(ran: Ran) -> None:
    assert "Traceback" not in ran.stderr, str(ran)
    assert ran.rc in (0, 1, 3), str(ran)
    if ran.rc == 1 and (ran.args[0] != "doctor" or ran.stderr):  # doctor's report is on stdout
        errors = [line for line in ran.stderr.splitlines() if not line.startswith("earshot: warn")]
        assert len(errors) == 1 and errors[0].startswith("earshot: "), str(ran)


@examples(0.06)
@given(st.sampled_from(AGENTS), st.data())
@example("codex", json.dumps({"hooks": [1]}).encode())
@example(
    "claude", json.dumps({"hooks": {"Stop": [{"hooks": [{"command": OURS}]}], "SessionEnd": 5}})
)
def test_install_uninstall_and_doctor_take_any_settings_file_or_refuse_it_in_words(
    agent: str, data: st.DataObject | bytes | str
) -> None:
    if isinstance(data, st.DataObject):
        valid = settings_doc(agent).map(lambda d: json.dumps(d, indent=2).encode())
        settings = data.draw(damaged(valid, max_size=60))
        config = data.draw(damaged(st.just(CONFIG.encode()), max_size=40))
    else:
        settings = data.encode() if isinstance(data, str) else data
        settings = settings.replace(b"{agent}", agent.encode())
        config = CONFIG.encode()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "project"
        path = root / SETTINGS[agent]
        path.parent.mkdir(parents=True)
        path.write_bytes(settings)
        (Path(tmp) / "codex").mkdir()
        (Path(tmp) / "codex" / "config.toml").write_bytes(config)
        cli = Cli(Path(tmp) / "home", root)
        env = cli.env(HOME=str(Path(tmp) / "user"), CODEX_HOME=str(Path(tmp) / "codex"))
        trust = ["--trust"] if agent == "codex" else []
        for args in (
            ("install", agent, "--dry-run", *trust),
            ("uninstall", agent),
            ("doctor", agent),
        ):
            refused_in_one_line(cli.run(*args, env=env, expect=None, timeout=120))
