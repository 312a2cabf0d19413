"""The tools ``earshot chat`` offers the model: the ones ``earshot exec`` runs.

Same names and fields as a call of ``exec``'s JSON (``read_file {path}``,
``write_file {path, content}``, ``edit {path, old, new, all}``,
``bash {command}``), so a tool call of the model is parsed by the very
function that parses ``exec`` (``calls.parse_call``). What goes back to the
model is text: a command's output capped (``OUTPUT_CAP``, the cap said in
the result), an error said as an error.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from earshot.agent.core.calls import BadCall, Call, CallResult, EditFile, WriteFile, parse_call

#: Characters of a command's output (or a file read) sent back to the model:
#: its head and its tail, the cut said in between. $EARSHOT_CHAT_OUTPUT_CAP.
OUTPUT_CAP = 30_000

#: The tools that change files: each asks for permission first.
MUTATING = ("bash", "write_file", "edit")

_STRING = {"type": "string"}

#: Name -> (description, JSON schema of the input).
SCHEMAS: dict[str, tuple[str, dict[str, Any]]] = {
    "read_file": (
        "Read a text file under the root. `path` is relative to the root.",
        {"type": "object", "properties": {"path": _STRING}, "required": ["path"]},
    ),
    "write_file": (
        "Create or replace a file under the root with `content` (the whole file).",
        {
            "type": "object",
            "properties": {"path": _STRING, "content": _STRING},
            "required": ["path", "content"],
        },
    ),
    "edit": (
        "Replace the exact text `old` by `new` in a file. `old` must occur once, "
        "unless `all` is true (then every occurrence is replaced).",
        {
            "type": "object",
            "properties": {
                "path": _STRING,
                "old": _STRING,
                "new": _STRING,
                "all": {"type": "boolean"},
            },
            "required": ["path", "old", "new"],
        },
    ),
    "bash": (
        "Run a shell command in the root; its output (stdout and stderr) and exit "
        "code come back. Long output is cut in the middle.",
        {"type": "object", "properties": {"command": _STRING}, "required": ["command"]},
    ),
}


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """One tool as offered to a model: each provider shapes it its own way."""

    name: str
    description: str
    schema: dict[str, Any]


TOOLS = tuple(ToolSpec(name, text, schema) for name, (text, schema) in SCHEMAS.items())


def output_cap() -> int:
    try:
        return max(200, int(os.environ.get("EARSHOT_CHAT_OUTPUT_CAP", OUTPUT_CAP)))
    except ValueError:
        return OUTPUT_CAP


def to_call(name: str, tool_input: object) -> Call | str:
    """The call a model's tool use asks for, or why it cannot run (said to the model)."""
    if name not in SCHEMAS:
        return f"unknown tool {name!r}: the tools are {', '.join(SCHEMAS)}"
    if not isinstance(tool_input, dict):
        return f"{name}: the input must be a JSON object"
    try:
        return parse_call(0, {**tool_input, "tool": name})
    except BadCall as exc:
        return str(exc).removeprefix("call 0: ")


def capped(text: str, cap: int) -> str:
    """``text`` cut to about ``cap`` characters: its head and tail, the cut said."""
    if len(text) <= cap:
        return text
    head = cap * 2 // 3
    tail = cap - head
    cut = len(text) - head - tail
    return (
        f"{text[:head]}\n[... {cut:,} characters cut: the output was {len(text):,} "
        f"characters, capped at {cap:,}; the first {head:,} and last {tail:,} are shown ...]\n"
        f"{text[len(text) - tail :]}"
    )


def done_text(call: Call) -> str:
    """What a write or edit that printed nothing is said to have done."""
    if isinstance(call, WriteFile):
        return f"wrote {call.path} ({len(call.content):,} bytes)"
    if isinstance(call, EditFile):
        return f"edited {call.path}"
    return "done"


def result_text(result: CallResult, cap: int, done: str = "done") -> tuple[str, bool]:
    """What the model is told of a call's result, and whether it is an error."""
    if result.error is not None and result.exit_code is None:
        return result.error, True
    parts: list[str] = []
    if result.output:
        parts.append(capped(result.output, cap))
    if result.exit_code is not None:
        parts.append(f"[exit code {result.exit_code}]")
    elif not result.output:
        parts.append(done)
    if result.error is not None:
        parts.append(result.error)
    if result.warning is not None:
        parts.append(f"[warning: {result.warning}]")
    if result.git:
        parts.append(
            f"[changed in the git repository, not covered by undo: {', '.join(result.git)}]"
        )
    return "\n".join(parts), bool(result.exit_code)
