"""Commands that only read: with no store for the root yet, they answer without making one.

Opening a project creates its store directory; a command that only reads
(``log``, ``snapshots``, ``stats``, a dry run, ...) must leave no trace in a
root earshot never recorded, so it answers from here instead.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from typing import Any, TypeVar

from .common import configure_logging, discovered, error_kind, fail

F = TypeVar("F", bound=Callable[..., Any])

NOTHING_RECORDED = "nothing recorded in this root yet"


def _always(options: dict[str, Any]) -> bool:
    return True


def unless_recorded(
    empty: Callable[..., None], when: Callable[[dict[str, Any]], bool] = _always
) -> Callable[[F], F]:
    """Above ``project_command``: when the root has no store and ``when(options)``,
    ``empty(**options)`` answers (earshot errors become one line, exit 1)."""

    def decorate(func: F) -> F:
        @functools.wraps(func)
        def wrapper(**options: Any) -> Any:
            from earshot.cas.errors import EarshotError

            try:
                root = options["root"] = discovered(options["root"])
            except EarshotError as exc:
                fail(str(exc), exc.exit_code, error_kind(exc))
            except OSError as exc:  # the current directory is gone
                fail(exc.strerror or str(exc))
            if not os.path.isdir(root) or not when(options) or _has_store(root):
                return func(**options)
            configure_logging(options.get("verbose", 0))
            try:
                return empty(**options)
            except EarshotError as exc:
                fail(str(exc), exc.exit_code, error_kind(exc))

        return wrapper  # type: ignore[return-value]

    return decorate


def _has_store(root: str) -> bool:
    from earshot.cas.paths import checkpoints_dir

    return checkpoints_dir(root).exists()


def is_dry_run(options: dict[str, Any]) -> bool:
    return bool(options.get("dry_run"))


def no_sessions(**options: Any) -> None:
    """A dry run in a root with no store: there is no session to look at."""
    from earshot.agent.core.conversation import NoSessions

    raise NoSessions()
