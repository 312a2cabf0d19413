"""Settings files: what the ``EARSHOT_*`` variables set, written down once.

Two files, TOML, read with tomllib:

- the person's: ``$XDG_CONFIG_HOME/earshot/config.toml``, else
  ``~/.config/earshot/config.toml``;
- the project's: the nearest ``.earshot.toml`` at or above the root given
  (``--root``) or the current directory.

A variable set in the environment wins over both files, the project's file
over the person's. A setting becomes its variable before anything else
reads one, so every part of earshot (and a daemon's worker, which gets the
client's environment) sees one set of values.

A project's file travels with a repository a person may only have cloned:
it may not name a data directory or a pager (a command to run); those are
the person's to set. Standard library only, as
``earshot.cli.entry``; a person with no settings file pays two ``stat``
calls and a walk up the tree.
"""

from __future__ import annotations

import os
import sys

PROJECT_FILE = ".earshot.toml"

#: setting -> (the variable it sets, whether a project's file may set it)
SETTINGS: dict[str, tuple[str, bool]] = {
    "home": ("EARSHOT_HOME", False),
    "pager": ("EARSHOT_PAGER", False),
    "watch": ("EARSHOT_WATCH", True),
    "color": ("EARSHOT_COLOR", True),
    "model": ("EARSHOT_MODEL", True),
    "max_file_size": ("EARSHOT_MAX_FILE_SIZE", True),
    "keep_ignored": ("EARSHOT_KEEP_IGNORED", True),
    "ignored_max_file": ("EARSHOT_IGNORED_MAX_FILE", True),
    "ignored_dir_files": ("EARSHOT_IGNORED_DIR_FILES", True),
    "ignored_dir_bytes": ("EARSHOT_IGNORED_DIR_BYTES", True),
    "target_budget": ("EARSHOT_TARGET_BUDGET", True),
    "restage_budget_ms": ("EARSHOT_RESTAGE_BUDGET_MS", True),
    "chat_output_cap": ("EARSHOT_CHAT_OUTPUT_CAP", True),
}


class SettingsError(Exception):
    """A settings file that cannot be read as settings: one line, naming the file."""


def user_file() -> str:
    config = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return os.path.join(config, "earshot", "config.toml")


def project_file(start: str) -> str | None:
    """The nearest ``.earshot.toml`` at or above ``start``, if any."""
    here = os.path.abspath(start)
    while True:
        candidate = os.path.join(here, PROJECT_FILE)
        if os.path.isfile(candidate):
            return candidate
        parent = os.path.dirname(here)
        if parent == here:
            return None
        here = parent


def apply(start: str) -> list[str]:
    """Set the variables the settings files name and the environment does not.

    Returns warnings (one line each: an unknown setting, one a project may
    not set); raises ``SettingsError`` for a file that is not valid TOML or
    holds a value of the wrong kind.
    """
    warnings: list[str] = []
    chosen: dict[str, str] = {}
    found = project_file(start)
    for path, is_project in ((user_file(), False), (found, True)):
        if path is None or not os.path.isfile(path):
            continue
        for key, value in _read(path).items():
            spec = SETTINGS.get(key)
            if spec is None:
                warnings.append(
                    f"{path}: unknown setting {key!r} (known: {', '.join(sorted(SETTINGS))})"
                )
            elif is_project and not spec[1]:
                warnings.append(
                    f"{path}: {key!r} is not read from a project's file; set it in {user_file()}"
                )
            else:
                chosen[spec[0]] = _text(path, key, value)
    for variable, value in chosen.items():
        os.environ.setdefault(variable, value)
    return warnings


def _read(path: str) -> dict[str, object]:
    import tomllib

    try:
        with open(path, "rb") as handle:
            return tomllib.load(handle)
    except tomllib.TOMLDecodeError as exc:
        raise SettingsError(f"{path}: not valid TOML: {exc}") from None
    except UnicodeDecodeError:
        raise SettingsError(f"{path}: not valid TOML: not UTF-8") from None
    except OSError as exc:
        raise SettingsError(f"{path}: cannot be read: {exc.strerror or exc}") from None


def _text(path: str, key: str, value: object) -> str:
    """A setting's value as its variable holds it (``true`` is ``1``)."""
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, (int, str)):
        return os.path.expanduser(value) if key == "home" and isinstance(value, str) else str(value)
    raise SettingsError(
        f"{path}: {key} must be a string, a number or true/false, not {type(value).__name__}"
    )


def apply_or_exit(start: str) -> None:
    """``apply``, saying warnings on stderr; a broken file is a one-line error, exit 1."""
    try:
        warnings = apply(start)
    except SettingsError as exc:
        print(f"earshot: {exc}", file=sys.stderr)
        sys.exit(1)
    for line in warnings:
        print(f"earshot: warning: {line}", file=sys.stderr)
