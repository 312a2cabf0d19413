"""Codex's ``config.toml``: earshot's hooks trusted there, and the project trusted.

Codex runs a hook only once someone trusted that exact hook: an entry
``[hooks.state."<file>:<event>:<group>:<handler>"]`` with ``trusted_hash``,
SHA-256 of the group's canonical JSON (sorted keys, no spaces: its event,
matcher if any, and each hook with ``async`` and ``timeout`` filled in). A
project's own ``.codex/hooks.json`` is read only in a trusted project:
``[projects."<root>"]`` with ``trust_level = "trusted"``. A trust level the
person set for the project (any value: "untrusted" says no) is theirs: earshot
never changes it, and only says what to change by hand.

The file is the person's, so it is edited through tomlkit, which keeps its
comments, order and shapes. tomlkit mishandles a table added under dotted
keys, so every edit is checked: the text written must parse (tomllib) to
exactly the document intended, or the next way of writing it is tried
(inline tables), or nothing is written and the person is told what to add.
"""

from __future__ import annotations

import copy
import hashlib
import json
import tomllib
from collections.abc import Callable
from typing import Any

import tomlkit
from tomlkit.items import InlineTable

from earshot.agent.hooks.settings import is_ours
from earshot.cas.errors import EarshotError

#: Codex's names for the events, as its hook trust keys spell them.
_CODEX_SNAKE = {
    "SessionStart": "session_start",
    "UserPromptSubmit": "user_prompt_submit",
    "PreToolUse": "pre_tool_use",
    "PostToolUse": "post_tool_use",
    "Stop": "stop",
    "SessionEnd": "session_end",
    "PreCompact": "pre_compact",
    "SubagentStart": "subagent_start",
    "SubagentStop": "subagent_stop",
}
TRUSTED = "trusted"


class ConfigShape(EarshotError):
    """A config.toml earshot cannot edit without changing something of the person's."""

    def __init__(self, why: str) -> None:
        super().__init__(why)
        self.why = why


def codex_trust(hooks_file: str, doc: dict[str, Any]) -> dict[str, str]:
    """What Codex keeps to trust earshot's hooks in ``doc`` (read from ``hooks_file``):
    the key of each (``<file>:<event>:<group>:<handler>``) and its hash."""
    trust: dict[str, str] = {}
    hooks_of = doc.get("hooks")
    for event, groups in hooks_of.items() if isinstance(hooks_of, dict) else ():
        snake = _CODEX_SNAKE.get(event)
        if snake is None or not isinstance(groups, list):
            continue
        for g, group in enumerate(groups):
            hooks = group.get("hooks") if isinstance(group, dict) else None
            if not isinstance(hooks, list):
                continue
            for h, hook in enumerate(hooks):
                if not (isinstance(hook, dict) and is_ours(hook.get("command"), "codex")):
                    continue
                timeout = hook.get("timeout", 600)
                if type(timeout) is not int:
                    continue  # a timeout Codex cannot read: no hash it would compute
                canonical: dict[str, Any] = {
                    "event_name": snake,
                    "hooks": [
                        {
                            "async": bool(hook.get("async", False)),
                            "command": hook["command"],
                            "timeout": timeout,
                            "type": "command",
                        }
                    ],
                }
                if isinstance(group.get("matcher"), str):
                    canonical["matcher"] = group["matcher"]
                text = json.dumps(canonical, sort_keys=True, separators=(",", ":"))
                digest = hashlib.sha256(text.encode()).hexdigest()
                trust[f"{hooks_file}:{snake}:{g}:{h}"] = f"sha256:{digest}"
    return trust


def parse(text: str) -> dict[str, Any]:
    """The config as plain values; a config Codex could not read either is refused."""
    try:
        return tomllib.loads(text)
    except ValueError as exc:  # TOMLDecodeError, or an integer of 5,000 digits
        raise ConfigShape(f"not TOML ({exc}); fix it or move it away") from None
    except RecursionError:
        raise ConfigShape("nested too deeply to read; fix it or move it away") from None


def _table(doc: dict[str, Any], *path: str) -> dict[str, Any] | None:
    """The table at ``path`` in a plain document; None if absent. Something else
    there (a string where a table belongs) is the person's: refused."""
    at: Any = doc
    for depth, key in enumerate(path):
        if not isinstance(at, dict):
            where = ".".join(path[:depth])
            raise ConfigShape(f"{where} is not a table; fix it or move it away")
        at = at.get(key)
        if at is None:
            return None
    if not isinstance(at, dict):
        raise ConfigShape(f"{'.'.join(path)} is not a table; fix it or move it away")
    return at


def _wanted(
    plain: dict[str, Any], trust: dict[str, str], project: str | None
) -> list[tuple[tuple[str, str], str, str]]:
    """What must be set and is not: ((table, key), field, value) each."""
    out = []
    state = _table(plain, "hooks", "state") or {}
    for key, digest in trust.items():
        entry = state.get(key)
        if not isinstance(entry, dict) or entry.get("trusted_hash") != digest:
            out.append((("state", key), "trusted_hash", digest))
    if project is not None and not trusted_project(plain, project):
        out.append((("projects", project), "trust_level", TRUSTED))
    return out


def project_level(plain: dict[str, Any], project: str) -> Any:
    """The trust level the config sets for ``project``, whatever its value; None: none.
    A project that is not a table is the person's: refused (``ConfigShape``)."""
    entry = _table(plain, "projects", project)
    return entry.get("trust_level") if entry is not None else None


def kept_level(text: str, project: str | None) -> Any:
    """The person's trust level of ``project`` that is not "trusted" (earshot
    leaves it as it is); None: the project is trusted, or sets none."""
    if project is None:
        return None
    level = project_level(parse(text), project)
    return None if level in (None, TRUSTED) else level


def missing(text: str, trust: dict[str, str], project: str | None) -> list[str]:
    """What Codex still needs to run earshot's hooks, one line each (empty: nothing)."""
    lines = []
    for (table, key), field, value in _wanted(parse(text), trust, project):
        if table == "projects":
            lines.append(f'[projects."{key}"] trust_level = "{value}"')
        else:
            lines.append(f'[hooks.state."{key}"] {field} = "{value}"')
    return lines


def _container(doc: Any, path: tuple[str, ...], inline_leaf: bool) -> Any:
    """The tomlkit table at ``path``, made as a table header where absent (an
    inline table inside an inline one)."""
    at = doc
    for depth, key in enumerate(path):
        if key not in at:
            leaf = depth == len(path) - 1
            if isinstance(at, InlineTable) or (leaf and inline_leaf):
                at[key] = tomlkit.inline_table()
            else:
                at[key] = tomlkit.table(is_super_table=not leaf)
        at = at[key]
    return at


def _edited(text: str, change: Callable[[Any, bool], None], inline: bool) -> str:
    doc = tomlkit.parse(text)
    change(doc, inline)
    out = tomlkit.dumps(doc)
    if "\r\n" in text:  # a CRLF file stays CRLF (tomlkit writes new lines with LF)
        out = out.replace("\r\n", "\n").replace("\n", "\r\n")
    return out


def _checked(text: str, expected: dict[str, Any], change: Callable[[Any, bool], None]) -> str:
    """``text`` changed by ``change``, in the first way whose result parses to
    ``expected``; refused when none does."""
    for inline in (False, True):
        try:
            out = _edited(text, change, inline)
            if tomllib.loads(out) == expected:
                return out
        except (tomllib.TOMLDecodeError, tomlkit.exceptions.TOMLKitError, ValueError):
            continue
    raise ConfigShape("earshot cannot edit it without changing the rest; add by hand")


def with_trust(text: str, trust: dict[str, str], project: str | None) -> str:
    """The config's text with earshot's hooks trusted (and ``project``, when given
    and the config sets no trust level for it, trusted as a project); everything
    else as it was, byte for byte."""
    plain = parse(text)
    if project is not None and project_level(plain, project) is not None:
        project = None  # the person's word on the project, whatever it says
    wanted = _wanted(plain, trust, project)
    if not wanted:
        return text
    expected = copy.deepcopy(plain)
    for (table, key), field, value in wanted:
        path = ("hooks", "state", key) if table == "state" else ("projects", key)
        at = expected
        for part in path:
            at = at.setdefault(part, {})
        at[field] = value

    def change(doc: Any, inline: bool) -> None:
        for (table, key), field, value in wanted:
            path = ("hooks", "state", key) if table == "state" else ("projects", key)
            _container(doc, path, inline)[field] = value

    try:
        return _checked(text, expected, change)
    except ConfigShape:
        lines = "; ".join(missing(text, trust, project))
        raise ConfigShape(
            f"earshot cannot edit it without changing the rest; add: {lines}"
        ) from None


def without_trust(text: str, keys: list[str], project: str | None) -> str:
    """The config's text without earshot's trust entries of ``keys`` (and without
    ``project``'s trust, when earshot added it): tables left empty go too."""
    plain = parse(text)
    expected = copy.deepcopy(plain)
    drops: list[tuple[str, ...]] = []
    state = _table(expected, "hooks", "state") or {}
    for key in keys:
        entry = state.get(key)
        # The hash is earshot's; anything else Codex keeps beside it stays.
        if isinstance(entry, dict) and "trusted_hash" in entry:
            del entry["trusted_hash"]
            drops.append(("hooks", "state", key, "trusted_hash"))
            if not entry:
                del state[key]
                drops.append(("hooks", "state", key))
    projects = _table(expected, "projects") or {}
    if project is not None and isinstance(projects.get(project), dict):
        entry = projects[project]
        if entry.get("trust_level") == TRUSTED:
            del entry["trust_level"]
            drops.append(("projects", project, "trust_level"))
            if not entry:
                del projects[project]
                drops.append(("projects", project))
    if not drops:
        return text
    for path in (("hooks", "state"), ("hooks",), ("projects",)):
        table = _table(expected, *path)
        if table == {} and _was_made(plain, path, drops):
            parent = _table(expected, *path[:-1]) if path[:-1] else expected
            assert parent is not None
            del parent[path[-1]]
            drops.append(path)

    def change(doc: Any, inline: bool) -> None:
        for path in drops:
            at = doc
            for part in path[:-1]:
                at = at[part]
            if path[-1] in at:
                del at[path[-1]]

    return _no_longer_tail(text, _checked(text, expected, change))


def _no_longer_tail(text: str, out: str) -> str:
    """``out`` without the one blank line tomlkit put before tables it added at
    the end, which stays when they go: an ending of exactly one blank line
    where ``text`` ended in a single line break. (A file that itself ended in
    one blank line loses it here; its backup, when it matches, gives it back.)"""
    for newline in ("\r\n", "\n"):
        if text.endswith(newline) and not text.endswith(newline * 2):
            body = out.removesuffix(newline * 2)
            if body != out and body.strip() and not body.endswith(newline):
                return body + newline
            return out
    return out


def _was_made(plain: dict[str, Any], path: tuple[str, ...], drops: list[tuple[str, ...]]) -> bool:
    """Whether the table at ``path`` held only what earshot drops (so it goes too)."""
    table: Any = plain
    for key in path:
        table = table.get(key) if isinstance(table, dict) else None
    if not isinstance(table, dict) or not table:
        return False  # none, a value, or empty before this uninstall: the person's
    return all((*path, key) in drops or _was_made(plain, (*path, key), drops) for key in table)


def trusted_project(plain: dict[str, Any], project: str) -> bool:
    entry = (_table(plain, "projects") or {}).get(project)
    return isinstance(entry, dict) and entry.get("trust_level") == TRUSTED
