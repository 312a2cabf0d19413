"""A tool call an agent runs itself, as its hooks describe it, and what kind of tool it is.

``ToolKind`` is what decides the policy for an agent's call: a read-only
tool costs nothing, a write restages what it names, a shell command is
judged destructive or not, a dispatch walks first, and a tool earshot does
not know is taken to change anything.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any

from earshot.agent.core.files import resolve
from earshot.cas.errors import EarshotError
from earshot.cas.restage import relative_path


class ToolKind(Enum):
    """How a tool the agent runs may change files, as far as earshot can tell."""

    #: Changes nothing: costs nothing.
    READ = "read"
    #: Writes only the files its input names (a Write, an Edit, a patch).
    WRITE = "write"
    #: A shell command: anything may change; judged destructive or not.
    SHELL = "shell"
    #: Starts subagents that run tools of their own: one unit with their calls.
    DISPATCH = "dispatch"
    #: A tool earshot does not know (an MCP server's): anything may change.
    UNKNOWN = "unknown"


@dataclass(frozen=True, slots=True)
class ExternalCall:
    """A tool call the agent runs itself, as its hook describes it."""

    #: The agent's own name for the tool (``Bash``, ``Write``, ``apply_patch``...).
    tool: str
    kind: ToolKind
    #: The agent's id for the call (``tool_use_id``), or one made up from the payload.
    key: str
    command: str | None = None
    #: What a write-kind tool names, as the agent gave them (absolute or relative).
    paths: tuple[str, ...] = ()
    #: Which agent made the call when it is not the main one (``subagent a1b2``).
    agent: str | None = None
    #: A write whose whole content the input carries: (path as given, BLAKE3 of
    #: the content), by which a killed batch's recovery proves the call made it.
    content: tuple[str, str] | None = None
    #: A command the agent runs on in the background: its end is reported at once,
    #: and what it does after is not this call's (the log says so).
    background: bool = False

    def describe(self, root: str) -> dict[str, Any]:
        """The call as its batch records it (``tool`` ``bash`` for any shell command,
        so it reads as the CLI's own calls do)."""
        doc: dict[str, Any] = {"tool": "bash" if self.kind is ToolKind.SHELL else self.tool}
        if self.kind is ToolKind.SHELL:
            doc["agent_tool"] = self.tool
        if self.command is not None:
            doc["command"] = self.command
        rels = relative_targets(root, self.paths)
        if rels:
            doc["path"] = rels[0]
        if len(rels) > 1:
            doc["paths"] = rels
        doc["id"] = self.key
        if self.kind is ToolKind.DISPATCH:
            doc["dispatch"] = True
        if self.background:
            doc["background"] = True
        if self.agent is not None:
            doc["agent"] = self.agent
        return doc


def relative_targets(root: str, paths: tuple[str, ...]) -> list[str]:
    """The root-relative paths a write names: each as given, and where an in-root
    link leads (the file really written). Paths outside the root are not earshot's."""
    out: dict[str, None] = {}
    for path in paths:
        try:
            out[relative_path(root, path)] = None
            out[resolve(root, path)] = None
        except (EarshotError, OSError, ValueError):
            continue
    return list(out)
