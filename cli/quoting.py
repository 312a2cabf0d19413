"""Paths and messages made safe for one line of text, as git quotes them.

A path holding a control character, a backslash or a double quote is quoted
(``quote_path``), so no name can pass for several lines of output; JSON
keeps the real name.
"""

from __future__ import annotations

import re

_C_ESCAPES = {
    "\a": "\\a",
    "\b": "\\b",
    "\t": "\\t",
    "\n": "\\n",
    "\v": "\\v",
    "\f": "\\f",
    "\r": "\\r",
    '"': '\\"',
    "\\": "\\\\",
}
# C0 and C1 controls, DEL, the Unicode line and paragraph separators, and
# undecodable bytes (surrogate escapes): each could end or garble a line.
_CONTROL = "\x00-\x1f\x7f-\x9f\u2028\u2029\udc80-\udcff"
_NEEDS_QUOTES = re.compile(f'[{_CONTROL}"\\\\]')
_UNSAFE = re.compile(f"[{_CONTROL}]")


def _escape_char(match: re.Match[str]) -> str:
    char = match.group()
    known = _C_ESCAPES.get(char)
    if known is not None:
        return known
    code = ord(char)
    if 0xDC80 <= code <= 0xDCFF:  # an undecodable byte, as a surrogate escape
        return f"\\{code - 0xDC00:03o}"
    return "".join(f"\\{byte:03o}" for byte in char.encode("utf-8"))


def quote_path(path: str) -> str:
    """``path`` for text output, as git prints it with ``core.quotePath`` off.

    In double quotes with C-style escapes (``\\n``, ``\\t``, ``\\"``,
    ``\\\\``, octal bytes) when it holds a control character, a backslash or
    a double quote; unchanged otherwise (other non-ASCII letters stay).
    """
    if _NEEDS_QUOTES.search(path) is None:
        return path
    return '"' + _NEEDS_QUOTES.sub(_escape_char, path) + '"'


def one_line(text: str) -> str:
    """A message or command for one line of text: control characters escaped, no quotes."""
    return _UNSAFE.sub(_escape_char, text)
