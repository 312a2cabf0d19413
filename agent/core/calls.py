"""The tools an agent calls, as values, and their results.

``read_file`` and ``edit`` never touch the store: ``edit`` is a pure string
transform (text in, text out). ``write_file`` and ``bash`` are the mutating
calls the snapshot policy is about. ``edit_file`` (read, edit, write) is the
one-call convenience the CLI's ``earshot edit`` and ``exec`` offer; it counts
as a ``write_file``.
"""

from __future__ import annotations

import os
import signal
from dataclasses import dataclass
from typing import Any

from earshot.cas.errors import EarshotError


class BadCall(EarshotError):
    """A tool call that does not make sense (unknown tool, missing field)."""

    def __init__(self, index: int, why: str) -> None:
        super().__init__(f"call {index}: {why}")


class EditMismatch(EarshotError):
    """``edit``'s old text is absent, or present more than once without ``all``."""

    def __init__(self, count: int) -> None:
        found = "not found" if count == 0 else f"found {count} times (use --all)"
        super().__init__(f"the text to replace was {found}")
        self.count = count


class EmptyEdit(EarshotError):
    """``edit``'s old text is empty: there is nothing to find."""

    def __init__(self) -> None:
        super().__init__("the old text is empty; give the exact text to replace")


@dataclass(frozen=True, slots=True)
class ReadFile:
    path: str


@dataclass(frozen=True, slots=True)
class WriteFile:
    path: str
    content: bytes


@dataclass(frozen=True, slots=True)
class EditFile:
    """Read ``path``, apply ``edit``, write the result back."""

    path: str
    old: str
    new: str
    all: bool = False


@dataclass(frozen=True, slots=True)
class Bash:
    command: str


Call = ReadFile | WriteFile | EditFile | Bash


def edit(text: str, old: str, new: str, replace_all: bool = False) -> str:
    """The ``edit`` tool: replace ``old`` by ``new`` in ``text`` (once, unless all)."""
    if not old:
        raise EmptyEdit()
    count = text.count(old)
    if count == 0 or (count > 1 and not replace_all):
        raise EditMismatch(count)
    return text.replace(old, new) if replace_all else text.replace(old, new, 1)


def is_mutating(call: Call) -> bool:
    return isinstance(call, WriteFile | EditFile | Bash)


def describe(call: Call) -> dict[str, Any]:
    """The call as recorded in the batch (content summarised, not stored twice)."""
    if isinstance(call, ReadFile):
        return {"tool": "read_file", "path": call.path}
    if isinstance(call, WriteFile):
        return {"tool": "write_file", "path": call.path, "bytes": len(call.content)}
    if isinstance(call, EditFile):
        return {"tool": "edit", "path": call.path, "all": call.all}
    return {"tool": "bash", "command": call.command}


def parse_call(index: int, doc: Any) -> Call:
    """One call from ``earshot exec``'s JSON."""
    if not isinstance(doc, dict):
        raise BadCall(index, "each call is a JSON object")
    tool = doc.get("tool")

    def field(name: str) -> str:
        value = doc.get(name)
        if not isinstance(value, str):
            raise BadCall(index, f"{tool} needs a string {name!r}")
        return value

    if tool == "read_file":
        return ReadFile(field("path"))
    if tool == "write_file":
        content = field("content")
        try:
            data = content.encode()
        except UnicodeEncodeError as exc:  # a lone surrogate, such as "\udcff"
            raise BadCall(
                index, f"write_file content is not text (a lone surrogate at {exc.start})"
            ) from None
        return WriteFile(field("path"), data)
    if tool == "edit":
        return EditFile(field("path"), field("old"), field("new"), bool(doc.get("all", False)))
    if tool == "bash":
        return Bash(field("command"))
    raise BadCall(index, f"unknown tool {tool!r} (read_file, write_file, edit, bash)")


@dataclass(frozen=True, slots=True)
class CallResult:
    """What a call returned to the agent."""

    index: int
    tool: str
    ok: bool
    output: str | None = None
    exit_code: int | None = None
    error: str | None = None
    #: What a shell command changed in the user's git directories: undo
    #: does not cover it (``git_fingerprint``).
    git: tuple[str, ...] = ()
    #: Done, but with a limit the caller must know of (e.g. not undoable).
    warning: str | None = None

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"index": self.index, "tool": self.tool, "ok": self.ok}
        if self.output is not None:
            doc["output"] = self.output
        if self.exit_code is not None:
            doc["exit_code"] = self.exit_code
        if self.error is not None:
            doc["error"] = self.error
        if self.tool == "bash":
            doc["git_changed"] = list(self.git)
        if self.warning is not None:
            doc["warning"] = self.warning
        return doc


def error_text(exc: BaseException) -> str:
    """A call's error as its result says it: the file named, the reason, no class name."""
    if isinstance(exc, OSError):
        where = f"{os.fsdecode(exc.filename)}: " if exc.filename else ""
        return f"{where}{exc.strerror or exc}"
    return str(exc)


def exit_status(signum: int) -> int:
    """The exit status a shell reports for a process ended by ``signum``."""
    return 128 + int(signal.Signals(signum))
