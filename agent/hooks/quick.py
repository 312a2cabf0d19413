"""What a hook's thin client decides before it imports anything of earshot.

Standard library only: the ``earshot`` script reads the payload, answers a
read-only tool's event with nothing at once (it costs an interpreter's
start-up and no more), and finds the root whose daemon runs the rest. The
agents' modules take their tool lists from here, so the two never disagree.
"""

from __future__ import annotations

import os

# Importing typing costs the hook's client about 3 ms; annotations are not
# evaluated here, so type checkers alone need it.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

AGENTS = ("claude", "codex", "gemini")

#: Each agent's tools that change no file. A subagent dispatch is not one.
READ_ONLY: dict[str, frozenset[str]] = {
    "claude": frozenset(
        {
            "Read",
            "Glob",
            "Grep",
            "LS",
            "WebFetch",
            "WebSearch",
            "TodoWrite",
            "TodoRead",
            "NotebookRead",
            "ExitPlanMode",
            "EnterPlanMode",
            "BashOutput",
            "TaskOutput",
            "KillShell",
            "KillBash",
            "ListMcpResourcesTool",
            "ReadMcpResourceTool",
            "AskUserQuestion",
            "ToolSearch",
        }
    ),
    "codex": frozenset(
        {
            "read_file",
            "list_dir",
            "grep_files",
            "view_image",
            "update_plan",
            "web_search",
            "list_mcp_resources",
            "list_mcp_resource_templates",
            "read_mcp_resource",
        }
    ),
    "gemini": frozenset(
        {
            "read_file",
            "read_many_files",
            "list_directory",
            "glob",
            "search_file_content",
            "grep_search",
            "google_web_search",
            "web_fetch",
            "write_todos",
            "save_memory",
            "get_internal_docs",
            "activate_skill",
        }
    ),
}

#: The event ``earshot doctor`` (and ``install``) feed a hook command to see it
#: run: no agent sends it, and the hook answers it without opening any store.
PROBE = "EarshotProbe"

#: The events that name one tool call: before it and after it.
TOOL_EVENTS: dict[str, frozenset[str]] = {
    "claude": frozenset({"PreToolUse", "PostToolUse", "PostToolUseFailure"}),
    "codex": frozenset({"PreToolUse", "PostToolUse"}),
    "gemini": frozenset({"BeforeTool", "AfterTool"}),
}

#: The events earshot acts on; any other costs nothing.
HANDLED: dict[str, frozenset[str]] = {
    "claude": TOOL_EVENTS["claude"]
    | {"SessionStart", "UserPromptSubmit", "PostToolBatch", "Stop", "SessionEnd", "PreCompact"}
    | {"SubagentStart", "SubagentStop"},
    "codex": TOOL_EVENTS["codex"]
    | {"SessionStart", "UserPromptSubmit", "Stop", "SessionEnd", "PreCompact"}
    | {"SubagentStart", "SubagentStop"},
    "gemini": TOOL_EVENTS["gemini"]
    | {"SessionStart", "BeforeAgent", "BeforeModel", "AfterAgent", "SessionEnd"},
}

#: The variable in which each agent gives its hooks the project's directory.
PROJECT_DIR = {"claude": "CLAUDE_PROJECT_DIR", "gemini": "GEMINI_PROJECT_DIR"}


def costs_nothing(agent: str, payload: Any) -> bool:
    """Whether the event needs nothing of earshot: a read-only tool's, or one it ignores."""
    if not isinstance(payload, dict) or agent not in AGENTS:
        return False
    name, tool = payload.get("hook_event_name"), payload.get("tool_name")
    if not isinstance(name, str):
        return False  # not an event at all: the command says what is wrong with it
    if name not in HANDLED[agent]:
        return True
    return name in TOOL_EVENTS[agent] and isinstance(tool, str) and tool in READ_ONLY[agent]


def project_dir(agent: str, payload: Any) -> str | None:
    """The root an agent's hook acts on: the project directory the agent gives its
    hooks, else the payload's ``cwd``; None when neither says."""
    variable = PROJECT_DIR.get(agent)
    given = os.environ.get(variable) if variable else None
    if given:
        return given
    cwd = payload.get("cwd") if isinstance(payload, dict) else None
    return cwd if isinstance(cwd, str) and cwd else None


#: The end of a model response, where the agent says so.
RESPONSE_ENDS: dict[str, frozenset[str]] = {
    "claude": frozenset({"PostToolBatch"}),
    "codex": frozenset(),
    "gemini": frozenset({"BeforeModel"}),
}


def daemon_may_answer(agent: str, payload: Any) -> bool:
    """Whether the daemon itself may answer the event, with no worker: a tool
    call's start or end (it notes them), or a response's end (nothing open)."""
    events = TOOL_EVENTS.get(agent, frozenset()) | RESPONSE_ENDS.get(agent, frozenset())
    name = payload.get("hook_event_name") if isinstance(payload, dict) else None
    return isinstance(name, str) and name in events


def refusal(agent: str, event: str, reason: str) -> dict[str, Any]:
    """The answer that refuses a tool call, with a reason the model sees, in the
    agent's own words (Gemini reads only ``decision``; the others the hook's)."""
    if agent == "gemini":
        return {"decision": "deny", "reason": reason}
    decision = {"hookEventName": event, "permissionDecision": "deny"}
    return {"hookSpecificOutput": {**decision, "permissionDecisionReason": reason}}


def blocking(agent: str, reason: str) -> dict[str, Any]:
    """The answer that stops a prompt before the model sees it; the reason is
    shown to the person (under ``-p`` Gemini prints a blocked prompt's
    ``systemMessage``, not its reason)."""
    if agent == "gemini":
        return {"decision": "deny", "reason": reason, "systemMessage": reason}
    return {"decision": "block", "reason": reason}


def lost_answer(agent: str, payload: Any, strict: bool, text: str) -> dict[str, Any]:
    """What the client answers when the daemon's worker died mid-event: the person
    is told, and with ``strict`` a tool about to run is refused."""
    name = payload.get("hook_event_name") if isinstance(payload, dict) else None
    before_tool = name in ("PreToolUse", "BeforeTool")
    if strict and before_tool:
        return refusal(agent, str(name), f"{text}; installed with --strict, the call was not run")
    return {"systemMessage": text}
