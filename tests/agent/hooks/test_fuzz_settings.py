"""The agents' settings fed damage, as install, uninstall and doctor read them: adding
earshot's hooks keeps everything else, removing them gives it back, and what is
not the agent's shape is refused in words (``NotHooks``, ``ConfigShape``).
"""

from __future__ import annotations

import copy
import tomllib
from typing import Any

import pytest
from fuzz import damaged, examples, json_values, mutated_doc
from hypothesis import example, given
from hypothesis import strategies as st

from earshot.agent.hooks.codex_config import (
    ConfigShape,
    codex_trust,
    missing,
    parse,
    project_level,
    with_trust,
    without_trust,
)
from earshot.agent.hooks.settings import (
    EVENTS,
    HookCommand,
    NotHooks,
    add_hooks,
    capped_entries,
    installed,
    is_ours,
    our_commands,
    remove_hooks,
)

AGENTS = sorted(EVENTS)
OURS = "/usr/bin/earshot hook {agent} --timeout 100"
commands = st.sampled_from(
    [OURS, "echo hi", "earshot hook", "'unclosed", "python x/cli/__main__.py hook {agent}"]
)
hook_entries = st.fixed_dictionaries(
    {"type": st.just("command"), "command": commands},
    optional={"timeout": st.integers(0, 200) | json_values, "async": json_values},
)
groups = st.fixed_dictionaries(
    {"hooks": st.lists(hook_entries, max_size=2)}, optional={"matcher": st.text(max_size=4)}
)
event_names = st.sampled_from(sorted({e for a in AGENTS for e, _ in EVENTS[a]})) | st.text(
    max_size=6
)
settings_docs = st.fixed_dictionaries(
    {},
    optional={
        "hooks": st.dictionaries(event_names, st.lists(groups, max_size=2), max_size=3),
        "hooksConfig": st.fixed_dictionaries({}, optional={"enabled": json_values}),
        "model": json_values,
    },
)


def docs(agent: str) -> st.SearchStrategy[Any]:
    def named(doc: Any) -> Any:
        return _fill(doc, agent)

    return (settings_docs | mutated_doc(settings_docs)).map(named)


def _fill(value: Any, agent: str) -> Any:
    """``{agent}`` in command strings made the agent's own."""
    if isinstance(value, str):
        return value.replace("{agent}", agent)
    if isinstance(value, list):
        return [_fill(v, agent) for v in value]
    if isinstance(value, dict):
        return {k: _fill(v, agent) for k, v in value.items()}
    return value


def others(doc: dict[str, Any], agent: str) -> Any:
    """Everything of ``doc`` that is not earshot's hooks of ``agent`` (Gemini's switch aside)."""
    rest = {k: v for k, v in doc.items() if k not in ("hooks", "hooksConfig")}
    hooks = doc.get("hooks", {})
    if not isinstance(hooks, dict):
        return rest, hooks
    kept: dict[str, Any] = {}
    for event, event_groups in hooks.items():
        if not isinstance(event_groups, list):
            kept[event] = event_groups
            continue
        left = []
        for group in event_groups:
            if isinstance(group, dict) and isinstance(group.get("hooks"), list):
                theirs = [
                    h
                    for h in group["hooks"]
                    if not (isinstance(h, dict) and is_ours(h.get("command"), agent))
                ]
                if theirs:
                    left.append({**group, "hooks": theirs})
            else:
                left.append(group)
        if left:
            kept[event] = left
    return rest, kept


@pytest.mark.parametrize("agent", AGENTS)
@examples(1)
@given(data=st.data())
def test_adding_and_removing_earshot_s_hooks_keeps_everything_else(
    agent: str, data: st.DataObject
) -> None:
    doc = data.draw(docs(agent))
    if not isinstance(doc, dict):
        return  # install refuses a file that is not a JSON object before this
    capped_entries(doc, agent), our_commands(doc, agent), installed(doc, agent)
    try:
        added = add_hooks(doc, HookCommand(("/usr/bin/earshot",), agent))
    except NotHooks:
        assert not isinstance(doc.get("hooks", {}), dict) or any(
            not isinstance(doc["hooks"].get(event, []), list) for event, _ in EVENTS[agent]
        )
        return
    assert set(installed(added, agent)) >= {event for event, _ in EVENTS[agent]}
    assert add_hooks(added, HookCommand(("/usr/bin/earshot",), agent)) == added
    removed = remove_hooks(added, agent)
    assert installed(removed, agent) == []
    assert others(added, agent) == others(doc, agent) == others(removed, agent)
    assert our_commands(added, agent) and not capped_entries(added, agent)


@examples(2)
@given(docs("codex"))
@example({"hooks": [1]})
@example({"hooks": {"Stop": [{"hooks": [{"command": "earshot hook codex", "timeout": "x"}]}]}})
@example({"hooks": {"Stop": [{"hooks": [{"command": "earshot hook codex", "timeout": 1e999}]}]}})
def test_codex_trust_of_any_hooks_file_is_a_hash_per_hook_of_earshot_s(doc: Any) -> None:
    if isinstance(doc, dict):
        trust = codex_trust("/p/.codex/hooks.json", doc)
        assert all(v.startswith("sha256:") and len(v) == 71 for v in trust.values())


CONFIGS = [
    "",
    'model = "o3"\n# mine\n[projects."/p"]\ntrust_level = "untrusted"\n',
    '[hooks.state."/p/.codex/hooks.json:stop:0:0"]\ntrusted_hash = "sha256:old"\n',
    "hooks = { state = { } }\r\nprojects = {}\r\n",
    '[hooks]\nstate."x".trusted_hash = "y"\n',
]
configs = damaged(st.sampled_from(CONFIGS).map(str.encode), max_size=80).map(
    lambda b: b.decode("utf-8", "replace")
)
TRUST = {"/p/.codex/hooks.json:stop:0:0": "sha256:" + "a" * 64}


@examples(1)
@given(configs, st.sampled_from([None, "/p", "/q"]))
@example("a = " + "[" * 2000, None)
@example("a = " + "1" * 5000, None)
@example('[hooks.state."/p/.codex/hooks.json:stop:0:0"]\nt=""', None)
@example("[projects]\n'/p' = 5\n", "/p")
def test_trusting_and_untrusting_in_codex_s_config_keeps_the_rest_or_refuses(
    text: str, project: str | None
) -> None:
    try:
        before = parse(text)
        out = with_trust(text, TRUST, project)
    except ConfigShape:
        return
    assert missing(out, TRUST, project) == [] or parse(out).get("projects", {}).get(project)
    assert missing(out, TRUST, None) == []
    untrusted = without_trust(
        out, list(TRUST), project if project_level(before, project or "") is None else None
    )
    # Everything else means what it meant; an empty table, which means nothing to
    # Codex, may go with earshot's entries (a hooks.state that held only them).
    assert theirs(tomllib.loads(untrusted)) == theirs(before)


def theirs(config: dict[str, Any]) -> Any:
    """The config without the hashes of earshot's hooks (install writes over a stale
    one, uninstall takes it out), and without empty tables."""
    config = copy.deepcopy(config)
    hooks = config.get("hooks")
    state = hooks.get("state") if isinstance(hooks, dict) else None
    for key in TRUST:
        entry = state.get(key) if isinstance(state, dict) else None
        if isinstance(entry, dict):
            entry.pop("trusted_hash", None)
    return pruned(config)


def pruned(value: Any) -> Any:
    """``value`` without its empty tables, at any depth."""
    if not isinstance(value, dict):
        return value
    kept = {k: pruned(v) for k, v in value.items()}
    return {k: v for k, v in kept.items() if v != {}}
