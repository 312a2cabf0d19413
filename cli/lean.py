"""JSON and a unix socket from the interpreter's C modules alone, for the thin client.

The ``earshot`` script runs on every hook event an agent fires and on every
hosted call. Importing ``json``, ``socket``, ``signal`` and ``contextlib``
costs it about 15 ms here (they pull in ``re``, ``enum`` and ``selectors``),
against 10 ms for a bare interpreter; their C halves (``_json``,
``_socket``, ``array``) cost about 1 ms (benchmarks/history/RESULTS-issues-2-25.md, "The hook's
client"). This module offers what the client needs of them: ``loads`` and
``dumps`` for plain JSON documents, and ``send_fds``. Where a C half is
missing (another Python), the full modules are used.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

try:
    import _json
    import _socket

    class _Context:
        """What ``_json``'s scanner reads off a ``json.JSONDecoder``."""

        strict = True
        object_hook = None
        object_pairs_hook = None
        parse_float = float
        parse_int = int

        @staticmethod
        def parse_constant(name: str) -> float:
            return float(name.replace("Infinity", "inf"))

    _scan: Any = _json.make_scanner(_Context())  # type: ignore[arg-type]
    _quote = _json.encode_basestring_ascii
    AF_UNIX = _socket.AF_UNIX
    SOCK_STREAM = _socket.SOCK_STREAM
    socket = _socket.socket
except (ImportError, AttributeError, TypeError):  # pragma: no cover - not CPython
    _scan = None
    import socket as _full_socket

    AF_UNIX = _full_socket.AF_UNIX
    SOCK_STREAM = _full_socket.SOCK_STREAM
    socket = _full_socket.socket  # type: ignore[assignment,misc]

_SPACE = " \t\n\r"


def loads(text: str) -> Any:
    """One JSON document; ``ValueError`` if ``text`` is not exactly one."""
    if _scan is None:  # pragma: no cover - not CPython
        import json

        return json.loads(text)
    start = len(text) - len(text.lstrip(_SPACE))
    try:
        value, end = _scan(text, start)
    except StopIteration:
        raise ValueError("not a JSON document") from None
    except SystemError:
        # The scanner words most errors with json.decoder's exception, which
        # it finds only once that module is imported: import it now, for a
        # document that is not JSON anyway, and let it say what is wrong.
        import json

        return json.loads(text)
    if text[end:].strip(_SPACE):
        raise ValueError("extra data after the JSON document")
    return value


def dumps(value: Any) -> str:
    """``value`` (dicts, lists, strings, numbers, booleans, None) as compact JSON."""
    if _scan is None:  # pragma: no cover - not CPython
        import json

        return json.dumps(value)
    out: list[str] = []
    _encode(value, out)
    return "".join(out)


def _encode(value: Any, out: list[str]) -> None:
    if isinstance(value, str):
        out.append(_quote(value))
    elif value is None:
        out.append("null")
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif isinstance(value, int | float):
        out.append(repr(value))
    elif isinstance(value, dict):
        out.append("{")
        for i, (key, item) in enumerate(value.items()):
            out.append("," if i else "")
            out.append(_quote(str(key)))
            out.append(":")
            _encode(item, out)
        out.append("}")
    elif isinstance(value, list | tuple):
        out.append("[")
        for i, item in enumerate(value):
            out.append("," if i else "")
            _encode(item, out)
        out.append("]")
    else:
        raise TypeError(f"not JSON: {type(value).__name__}")


def send_fds(sock: Any, data: bytes, fds: list[int]) -> None:
    """Send ``data`` with ``fds`` attached (SCM_RIGHTS), as ``socket.send_fds`` does."""
    if _scan is None:  # pragma: no cover - not CPython
        _full_socket.send_fds(sock, [data], fds)
        return
    import array  # registers itself with collections.abc: ~1.5 ms, for a run request only

    sock.sendmsg([data], [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS, array.array("i", fds))])
