"""Rendering of ``earshot transcript``: a session's conversation along one path.

The JSON document is what a page reads too: one item per thing on the
path, its type's fields beside ``id``, ``type``, ``ts``, ``time``,
``parent`` and ``alternatives``. The text gives user and assistant
messages whole, and a tool call on one line with its result cut to its
first line.
"""

from __future__ import annotations

import json
from typing import Any

from earshot.agent.core.conversation import ts_ns
from earshot.agent.core.transcript import FROM, Alternative, Item, Transcript
from earshot.agent.log.entries import (
    AssistantMessage,
    BatchLink,
    Compaction,
    Entry,
    Navigation,
    OtherEntry,
    Permission,
    ToolCall,
    ToolResult,
    UserMessage,
)

from . import render_agent
from .render import one_line, when

_SHOWN = 72  # characters of a tool's input in the text
_INDENT = " " * 6  # where an item that is not a prompt starts, under a prompt's time
_MORE = " " * 8  # a message's further lines


def _time(ts: str) -> str:
    return when(ts_ns(ts))


def _result_doc(entry: Entry) -> dict[str, Any]:
    body = entry.body
    assert isinstance(body, ToolResult)
    return {
        "id": entry.id,
        "output": body.output,
        "is_error": body.is_error,
        "interrupted": body.interrupted,
    }


def _fields(item: Item) -> dict[str, Any]:
    """The fields of the item's type."""
    entry = item.entry
    body = entry.body
    if isinstance(body, UserMessage):
        return {"text": body.text, "n": item.n}
    if isinstance(body, AssistantMessage):
        return {"text": body.text}
    if isinstance(body, ToolCall):
        result = None if item.result is None else _result_doc(item.result)
        return {"call_id": body.call_id, "name": body.name, "input": body.input, "result": result}
    if isinstance(body, ToolResult):
        doc = _result_doc(entry)
        del doc["id"]
        return {"call_id": body.call_id, **doc}
    if isinstance(body, Compaction):
        return {"summary": body.summary, "first_kept_id": body.first_kept_id}
    if isinstance(body, BatchLink):
        return {"batch": body.batch}
    if isinstance(body, Permission):
        return {"tool": body.tool, "detail": body.detail}
    if isinstance(body, Navigation):
        return {
            "target": body.target,
            "from": entry.parent_id,
            "where": item.where,
            "prompt": item.prompt,
        }
    assert isinstance(body, OtherEntry), body  # label and repair entries are never items
    return {"entry_type": body.type_name, "fields": dict(body.data)}


def _alternative_doc(alt: Alternative) -> dict[str, Any]:
    return {"id": alt.id, "type": alt.type, "first_line": alt.first_line, "leaf": alt.leaf}


def item_doc(item: Item) -> dict[str, Any]:
    entry = item.entry
    return {
        "id": entry.id,
        # A type this version does not know is "other", its name in "entry_type".
        "type": OtherEntry.TYPE if isinstance(entry.body, OtherEntry) else entry.type,
        "ts": entry.ts,
        "time": _time(entry.ts),
        "parent": entry.parent_id,
        **_fields(item),
        "alternatives": [_alternative_doc(a) for a in item.alternatives],
    }


# -- text -------------------------------------------------------------------------


def _message(head: str, text: str) -> list[str]:
    """``head`` and the first line, then each further line indented, all shown."""
    first, *rest = text.strip("\n").split("\n") or [""]
    return [f"{head}{one_line(first)}", *(f"{_MORE}{one_line(line)}".rstrip() for line in rest)]


def _cut(text: str) -> str:
    line = one_line(text)
    return line if len(line) <= _SHOWN else line[: _SHOWN - 3] + "..."


def _tool_input(value: object) -> str:
    """A tool's input in one line: the one value of a one-field input (a command, a path),
    else its JSON."""
    if isinstance(value, dict) and len(value) == 1:
        (only,) = value.values()
        if isinstance(only, str):
            return _cut(only.split("\n", 1)[0])
    if isinstance(value, str):
        return _cut(value.split("\n", 1)[0])
    return _cut(json.dumps(value, ensure_ascii=False))


def _output(body: ToolResult) -> str:
    """``first line (+N lines)``, ``error: ...``, ``interrupted``, ``no output``."""
    if body.interrupted:
        return "interrupted"
    out = body.output
    text = out if isinstance(out, str) else json.dumps(out, ensure_ascii=False)
    lines = text.strip("\n").split("\n") if text.strip() else []
    shown = _cut(lines[0]) if lines else "no output"
    more = f" (+{len(lines) - 1} lines)" if len(lines) > 1 else ""
    return f"{'error: ' if body.is_error else ''}{shown}{more}"


def _branches(item: Item) -> str:
    if not item.alternatives:
        return ""
    others = ", ".join(f"--at {a.leaf}" for a in item.alternatives)
    return f"  [{len(item.alternatives) + 1} branches: earshot transcript {others}]"


def _navigation(item: Item) -> str:
    """``<- rewound to before prompt 2 (TIME)``; on the branch it left, ``rewound from here``.

    ASCII, as all of earshot's text: a terminal in a non-UTF-8 locale prints it too."""
    body = item.entry.body
    assert isinstance(body, Navigation)
    if item.prompt is not None:
        place = f"before prompt {item.prompt}"
    elif body.target is None:
        place = "the start"
    else:
        place = f"entry {body.target}"
    away = " from here" if item.where == FROM else ""
    return f"{_INDENT}<- rewound{away} to {place} ({_time(item.entry.ts)})"


def _result_body(entry: Entry) -> ToolResult:
    assert isinstance(entry.body, ToolResult)
    return entry.body


def item_lines(item: Item) -> list[str]:
    entry = item.entry
    body = entry.body
    mark = _branches(item)
    if isinstance(body, UserMessage):
        lines = _message(f"{item.n or 0:>4}  {_time(entry.ts)}  you: ", body.text)
        lines[0] += mark
        return lines
    if isinstance(body, AssistantMessage):
        lines = _message(f"{_INDENT}assistant: ", body.text)
    elif isinstance(body, ToolCall):
        result = item.result
        shown = "(no result)" if result is None else _output(_result_body(result))
        lines = [f"{_INDENT}{one_line(body.name)}: {_tool_input(body.input)} -> {shown}"]
    elif isinstance(body, ToolResult):
        lines = [f"{_INDENT}result of call {one_line(body.call_id)}: {_output(body)}"]
    elif isinstance(body, Compaction):
        lines = [f"{_INDENT}[compacted: {len(body.summary):,} characters of summary]"]
    elif isinstance(body, BatchLink):
        lines = [f"{_INDENT}batch {body.batch}"]
    elif isinstance(body, Permission):
        detail = "" if body.detail is None else f" {_tool_input(body.detail)}"
        lines = [f"{_INDENT}permission: {one_line(body.tool)}{detail}"]
    elif isinstance(body, Navigation):
        return [_navigation(item)]
    else:
        lines = [f"{_INDENT}[{one_line(entry.type)}]"]
    lines[0] += mark
    return lines


def transcript(t: Transcript | None) -> tuple[dict[str, Any], str]:
    """The document and the text of a transcript (None: the root has no session)."""
    if t is None:
        empty: dict[str, Any] = {"session": None, "leaf": None, "at": None, "current": True}
        return {**empty, "agent": None, "items": []}, render_agent.NO_SESSIONS
    doc: dict[str, Any] = {
        "session": t.session,
        "leaf": t.leaf,
        "at": t.shown,
        "current": t.current,
        "agent": None if t.agent is None else {"name": t.agent[0], "session": t.agent[1]},
        "items": [item_doc(i) for i in t.items],
    }
    which = "the current path" if t.current else f"the branch ending at {t.shown}"
    if not t.items:
        return doc, f"session {t.session}: nothing on {which}"
    prompts = sum(1 for i in t.items if isinstance(i.entry.body, UserMessage))
    aside = "" if t.current else " (not the current path)"
    lines = [f"session {t.session}: {which}{aside}, {prompts} prompt{'' if prompts == 1 else 's'}"]
    for item in t.items:
        lines += item_lines(item)
    return doc, "\n".join(lines)
