"""Each agent's hook settings, and earshot's entries in them: added, found, removed.

Pure functions over the settings document (parsed JSON): everything else in
it, every other hook included, is kept as it was, in its order. An entry is
earshot's when its command runs ``earshot hook AGENT``, whatever path or
options it was installed with; adding replaces earshot's entries of the
agent, so installing twice changes nothing and installing again with other
options changes only them.
"""

from __future__ import annotations

import copy
import os
import shlex
from dataclasses import dataclass
from typing import Any

from earshot.agent.hooks.quick import READ_ONLY
from earshot.cas.errors import EarshotError


def _all_but_read_only(agent: str) -> str:
    """A matcher for every tool but the agent's read-only ones (a JS lookahead:
    Claude Code and Gemini CLI test tool names against it as a regex), so a
    Read or a Grep does not even start earshot. Unanchored, hence ^...$."""
    names = "|".join(sorted(READ_ONLY[agent]))
    return f"^(?!({names})$).*"


#: The events earshot hooks, per agent, each with its matcher (None: the
#: event takes none). Tool events match every tool but the read-only ones,
#: so a tool earshot does not know (an MCP server's) is recorded; Codex's
#: matchers have no lookahead, so its hook answers read-only tools at once.
EVENTS: dict[str, tuple[tuple[str, str | None], ...]] = {
    "claude": (
        ("SessionStart", None),
        ("UserPromptSubmit", None),
        ("PreToolUse", _all_but_read_only("claude")),
        ("PostToolUse", _all_but_read_only("claude")),
        ("PostToolUseFailure", _all_but_read_only("claude")),
        ("PostToolBatch", None),
        ("Stop", None),
        ("SessionEnd", None),
        ("PreCompact", None),
        ("SubagentStart", None),
        ("SubagentStop", None),
    ),
    "codex": (
        ("SessionStart", None),
        ("UserPromptSubmit", None),
        ("PreToolUse", None),
        ("PostToolUse", None),
        ("Stop", None),
        ("SessionEnd", None),
        ("PreCompact", None),
        ("SubagentStart", None),
        ("SubagentStop", None),
    ),
    "gemini": (
        ("SessionStart", None),
        ("BeforeAgent", None),
        ("BeforeModel", None),
        ("BeforeTool", _all_but_read_only("gemini")),
        ("AfterTool", _all_but_read_only("gemini")),
        ("AfterAgent", None),
        ("SessionEnd", None),
    ),
}
#: How long the agent waits for a hook (earshot gives up earlier itself).
AGENT_TIMEOUT_S = 120
#: Events whose wait the agent caps lower, so asking for more only earns a
#: warning: Codex clamps a SessionEnd hook's timeout to 3 s (and says so on
#: every run); Claude Code waits for its SessionEnd hooks 60 s at most.
CAPPED_TIMEOUT_S: dict[tuple[str, str], int] = {
    ("codex", "SessionEnd"): 3,
    ("claude", "SessionEnd"): 60,
}


def agent_timeout(agent: str, event: str | None) -> int:
    """Seconds the agent waits for earshot's hook of ``event``."""
    return CAPPED_TIMEOUT_S.get((agent, event or ""), AGENT_TIMEOUT_S)


def hook_timeout(agent: str, event: str | None) -> int:
    """Seconds earshot's hook gives itself (``--timeout``): 20 s less than the
    agent waits, or 1 s less where the agent waits only a few."""
    wait = agent_timeout(agent, event)
    return wait - 20 if wait > 40 else max(wait - 1, 1)


@dataclass(frozen=True, slots=True)
class HookCommand:
    """The command earshot's entries run."""

    #: What runs earshot, by absolute paths (the agent's PATH does not matter):
    #: the interpreter and earshot's ``cli/__main__.py``, or an ``earshot`` script.
    program: tuple[str, ...]
    agent: str
    strict: bool = False

    def line(self, event: str | None = None) -> str:
        """The command line of the hook of ``event`` (its ``--timeout`` depends on it)."""
        words = [*self.program, "hook", self.agent]
        if self.strict:
            words.append("--strict")
        words += ["--timeout", str(hook_timeout(self.agent, event))]
        return shlex.join(words)


def is_ours(command: Any, agent: str) -> bool:
    """Whether a hook command is one earshot installed for ``agent``: it runs an
    ``earshot`` program, or a Python running earshot's ``cli/__main__.py`` (an
    editable install's lies in the source tree, not under ``earshot/``), with
    ``hook AGENT`` (a command that merely mentions those words is someone else's)."""
    if not isinstance(command, str):
        return False
    try:
        words = shlex.split(command)
    except ValueError:
        return False
    if "hook" not in words[:3]:
        return False
    at = words.index("hook")
    if words[at + 1 : at + 2] != [agent]:
        return False
    program = words[:at]
    if len(program) == 1:
        return os.path.basename(program[0]) == "earshot"
    return (
        len(program) == 2
        and os.path.basename(program[0]).startswith("python")
        and program[1].replace(os.sep, "/").endswith("/cli/__main__.py")
    )


def _entry(agent: str, event: str, command: HookCommand) -> dict[str, Any]:
    line = command.line(event)
    wait = agent_timeout(agent, event)
    if agent == "gemini":  # Gemini counts in milliseconds
        return {"type": "command", "name": "earshot", "command": line, "timeout": wait * 1000}
    return {"type": "command", "command": line, "timeout": wait}


class NotHooks(EarshotError):
    """Settings whose hooks are not the agent's shape: earshot adds nothing to them."""

    def __init__(self, where: str, what: str) -> None:
        super().__init__(
            f"{where} is {what}, not what the agent reads; fix it or move it away "
            "(nothing was written)"
        )


def _without_ours(groups: Any, agent: str) -> Any:
    """An event's matcher groups with earshot's hooks taken out (a group left empty
    goes); anything that is not a list of groups is not earshot's, and stays."""
    if not isinstance(groups, list):
        return groups
    out = []
    for group in groups:
        hooks = group.get("hooks") if isinstance(group, dict) else None
        if not isinstance(hooks, list):
            out.append(group)
            continue
        kept = [h for h in hooks if not (isinstance(h, dict) and is_ours(h.get("command"), agent))]
        if kept:
            out.append({**group, "hooks": kept})
        elif len(kept) == len(hooks):
            out.append(group)
    return out


def add_hooks(doc: dict[str, Any], command: HookCommand) -> dict[str, Any]:
    """``doc`` with earshot's hooks for ``command.agent``, and nothing else changed."""
    agent = command.agent
    out = copy.deepcopy(doc)
    hooks = out.get("hooks", {})
    if not isinstance(hooks, dict):
        raise NotHooks('"hooks"', f"a {type(hooks).__name__}")
    for event, matcher in EVENTS[agent]:
        groups = _without_ours(hooks.get(event, []), agent)
        if not isinstance(groups, list):
            raise NotHooks(f'"hooks"."{event}"', f"a {type(groups).__name__}")
        group: dict[str, Any] = {"hooks": [_entry(agent, event, command)]}
        if matcher is not None:
            group = {"matcher": matcher, **group}
        hooks[event] = [*groups, group]
    out["hooks"] = hooks
    if agent == "gemini":
        config = out.get("hooksConfig")
        out["hooksConfig"] = {**(config if isinstance(config, dict) else {}), "enabled": True}
    return out


def remove_hooks(doc: dict[str, Any], agent: str) -> dict[str, Any]:
    """``doc`` without earshot's hooks for ``agent``; an event earshot's removal
    leaves with none goes, and so does ``hooks`` when that leaves it empty.
    Anything else stays as it was (Gemini's ``hooksConfig``: see the caller)."""
    out = copy.deepcopy(doc)
    hooks = out.get("hooks")
    if not isinstance(hooks, dict):
        return out
    removed = False
    for event in list(hooks):
        before = hooks[event]
        after = _without_ours(before, agent)
        if after != before:
            removed = True
            if after:
                hooks[event] = after
            else:
                del hooks[event]
    if removed and not hooks:
        del out["hooks"]
    return out


def installed(doc: dict[str, Any], agent: str) -> list[str]:
    """The events under which earshot's hooks for ``agent`` are in ``doc``."""
    hooks = doc.get("hooks")
    if not isinstance(hooks, dict):
        return []
    return [event for event, groups in hooks.items() if _without_ours(groups, agent) != groups]


def settings_file(agent: str, scope: str, root: str, home: str, codex_home: str | None) -> str:
    """Where the agent reads its hooks: the project's file (``scope`` "project"),
    or the person's own ("user")."""
    if agent == "codex":
        base = os.path.join(root, ".codex") if scope == "project" else codex_home
        return os.path.join(base or os.path.join(home, ".codex"), "hooks.json")
    folder = ".claude" if agent == "claude" else ".gemini"
    return os.path.join(root if scope == "project" else home, folder, "settings.json")


#: Each agent's custom command ``/earshot ARGS``, which expands to the prompt
#: ``earshot ARGS``: earshot's prompt hook runs it and the model never sees it.
_DESCRIPTION = "earshot on this session: undo [N], redo, log, tree, diff N, rewind N --code"
COMMAND_FILES: dict[str, tuple[str, str]] = {
    "claude": (
        os.path.join(".claude", "commands", "earshot.md"),
        "---\n"
        f"description: {_DESCRIPTION}\n"
        "argument-hint: undo [N] | redo | log | tree | diff N | rewind N --code\n"
        "---\n"
        "earshot $ARGUMENTS\n",
    ),
    "gemini": (
        os.path.join(".gemini", "commands", "earshot.toml"),
        f'description = "{_DESCRIPTION}"\nprompt = "earshot {{{{args}}}}"\n',
    ),
}


def command_file(agent: str, scope: str, root: str, home: str) -> tuple[str, str] | None:
    """Where the agent's ``/earshot`` command goes and what it holds; None: the agent
    has no custom commands (Codex: type ``earshot undo`` as the prompt)."""
    spec = COMMAND_FILES.get(agent)
    if spec is None:
        return None
    relative, text = spec
    return os.path.join(root if scope == "project" else home, relative), text


def personal_file(agent: str, root: str) -> str | None:
    """The project's settings file that stays on this machine: Claude Code's
    ``.claude/settings.local.json`` (which it keeps out of git). None: the
    agent reads no such file (Codex: the project's ``.codex/hooks.json`` and
    the person's own; Gemini CLI: the project's ``.gemini/settings.json``,
    the person's and the system's)."""
    return os.path.join(root, ".claude", "settings.local.json") if agent == "claude" else None


def machine_specific(program: tuple[str, ...]) -> bool:
    """Whether a hook command names paths of this machine (an interpreter in a
    venv, an absolute script): it then belongs in a personal settings file."""
    return any(os.path.isabs(word) for word in program)


def capped_entries(doc: dict[str, Any], agent: str) -> list[tuple[str, int, int]]:
    """earshot's entries whose timeout the agent caps: (event, asked, cap) each."""
    out = []
    hooks = doc.get("hooks")
    for (who, event), cap in CAPPED_TIMEOUT_S.items():
        if who != agent or not isinstance(hooks, dict):
            continue
        for hook in _hooks_of(hooks.get(event)):
            if not (isinstance(hook, dict) and is_ours(hook.get("command"), agent)):
                continue
            asked = hook.get("timeout")
            if isinstance(asked, int) and asked > cap:
                out.append((event, asked, cap))
    return out


def our_commands(doc: dict[str, Any], agent: str) -> list[str]:
    """The distinct command lines of earshot's entries for ``agent`` in ``doc``."""
    found: list[str] = []
    hooks = doc.get("hooks")
    for groups in hooks.values() if isinstance(hooks, dict) else ():
        for hook in _hooks_of(groups):
            command = hook.get("command") if isinstance(hook, dict) else None
            if isinstance(command, str) and is_ours(command, agent) and command not in found:
                found.append(command)
    return found


def _hooks_of(groups: Any) -> list[Any]:
    """Every hook of an event's matcher groups; none of what is not shaped as groups."""
    return [
        hook
        for group in (groups if isinstance(groups, list) else ())
        if isinstance(group, dict) and isinstance(group.get("hooks"), list)
        for hook in group["hooks"]
    ]
