"""Structured logs that stay silent, and cost nothing, unless asked for.

structlog's default prints to stdout, which a library must never do (stdout
may be a JSON document, or another program's). So earshot's loggers sit on
stdlib loggers named ``earshot.*``: silent by default; the CLI's ``-v``
points them at stderr. structlog itself (~25 ms to import, asyncio included)
is loaded only when a message is actually enabled: every CLI call pays
Python's start-up, and that path is kept lean.
"""

from __future__ import annotations

import logging
from typing import Any

#: Set by the CLI when no ``-v`` was given: a warning or error is then one
#: line for a person (``earshot: warning: session unlisted: path /x, ...``),
#: never a log record; ``-v`` brings back the structured records.
_PLAIN = {"on": False}


def set_plain(on: bool) -> None:
    """Render warnings and errors as one plain line (see ``_PLAIN``)."""
    _PLAIN["on"] = on


def plain_line(level: int, event: str, fields: dict[str, Any]) -> str:
    """``earshot: warning: hook failed: hook_event PreToolUse, error ...``, one line."""
    name = "error" if level >= logging.ERROR else "warning"
    shown = ", ".join(f"{k} {v}" for k, v in fields.items() if k != "exc_info")
    text = event.replace("_", " ") + (f": {shown}" if shown else "")
    return f"earshot: {name}: " + " ".join(text.split())


class Logger:
    """``debug``/``info``/``warning`` with key-value fields, rendered by structlog."""

    __slots__ = ("_bound", "_std")

    def __init__(self, name: str) -> None:
        self._std = logging.getLogger(name)
        self._bound: Any = None

    def _emit(self, level: int, event: str, fields: dict[str, Any]) -> None:
        if not self._std.isEnabledFor(level):
            return
        if _PLAIN["on"] and level >= logging.WARNING:
            self._std.log(level, "%s", plain_line(level, event, fields))
            return
        if self._bound is None:
            import structlog

            self._bound = structlog.wrap_logger(
                self._std,
                processors=[
                    structlog.processors.add_log_level,
                    structlog.processors.TimeStamper(fmt="%H:%M:%S"),
                    structlog.processors.format_exc_info,
                    structlog.processors.KeyValueRenderer(
                        key_order=["timestamp", "level", "event"]
                    ),
                ],
                wrapper_class=structlog.stdlib.BoundLogger,
            )
        self._bound.log(level, event, **fields)

    def debug(self, event: str, **fields: Any) -> None:
        self._emit(logging.DEBUG, event, fields)

    def info(self, event: str, **fields: Any) -> None:
        self._emit(logging.INFO, event, fields)

    def warning(self, event: str, **fields: Any) -> None:
        self._emit(logging.WARNING, event, fields)

    def error(self, event: str, **fields: Any) -> None:
        self._emit(logging.ERROR, event, fields)

    def exception(self, event: str, **fields: Any) -> None:
        """An error with the traceback of the exception being handled."""
        self._emit(logging.ERROR, event, {**fields, "exc_info": True})


def get_logger(name: str) -> Logger:
    """The logger ``name`` (under ``earshot``)."""
    return Logger(name)
