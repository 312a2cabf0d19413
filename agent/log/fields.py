"""The JSON fields of a session file's lines, shared by the header and the entries.

:class:`EntryFormatError` is a line that is JSON but not a well-formed header
or entry; the ``read_*`` functions read one typed field of a parsed line or
raise it; :func:`dumps` writes a line. The line formats themselves are in
:mod:`.header` and :mod:`.entries`.
"""

from __future__ import annotations

import json
from typing import Any

from earshot.agent.log.ids import EntryId
from earshot.cas.errors import EarshotError


class EntryFormatError(EarshotError):
    """A line that is JSON but not a well-formed header or entry."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def read_str(obj: dict[str, Any], key: str) -> str:
    value = obj.get(key)
    if type(value) is str:
        return value
    raise EntryFormatError(f"field {key!r} must be a string")


def read_opt_id(obj: dict[str, Any], key: str) -> EntryId | None:
    value = obj.get(key)
    if value is None or isinstance(value, str):
        return EntryId(value) if value is not None else None
    raise EntryFormatError(f"field {key!r} must be an id or null")


def read_int(obj: dict[str, Any], key: str) -> int:
    value = obj.get(key)
    if not isinstance(value, int) or isinstance(value, bool):
        raise EntryFormatError(f"field {key!r} must be an integer")
    return value


def read_bool(obj: dict[str, Any], key: str) -> bool:
    value = obj.get(key, False)
    if not isinstance(value, bool):
        raise EntryFormatError(f"field {key!r} must be true or false")
    return value


def dumps(obj: dict[str, Any]) -> bytes:
    """``obj`` as one JSON line, newline included."""
    # json escapes control characters inside strings, so a line never holds a
    # raw newline; non-ASCII stays readable.
    text = json.dumps(obj, ensure_ascii=False, separators=(",", ":")) + "\n"
    try:
        return text.encode()
    except UnicodeEncodeError:
        # Lone surrogates (undecodable bytes of a tool's output) are not UTF-8;
        # escaped as \udcxx they read back exactly.
        return (json.dumps(obj, separators=(",", ":")) + "\n").encode()
