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

# typing costs milliseconds of every call; annotations are not evaluated here.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import NoReturn

PROJECT_FILE = ".earshot.toml"
#: Set, for the hook handler, when a settings file could not be read: the line to say.
BROKEN = "EARSHOT_SETTINGS_BROKEN"
#: A settings file is a few lines; a larger one is refused unread.
MAX_BYTES = 1 << 20
#: Settings with a fixed set of values.
_CHOICES = {"watch": ("auto", "always", "never"), "color": ("auto", "always", "never")}

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
        if path is None or not os.path.lexists(path):
            continue
        if not os.path.isfile(path):
            warnings.append(f"{path}: not a regular file; not read")
            continue
        if is_project and os.stat(path).st_uid != os.geteuid():
            # As git ignores a repository another user owns: a file in a
            # shared parent (/tmp) must not choose what is recorded.
            warnings.append(f"{path}: owned by another user (uid {os.stat(path).st_uid}); not read")
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
            data = handle.read(MAX_BYTES + 1)
        if len(data) > MAX_BYTES:
            raise SettingsError(f"{path}: over {MAX_BYTES >> 20} MiB: not a settings file")
        return tomllib.loads(data.decode("utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise SettingsError(f"{path}: not valid TOML: {exc}") from None
    except UnicodeDecodeError:
        raise SettingsError(f"{path}: not valid TOML: not UTF-8") from None
    except ValueError as exc:  # tomllib's int() of a number of 5,000 digits
        raise SettingsError(f"{path}: not valid TOML: {exc}") from None
    except RecursionError:
        raise SettingsError(f"{path}: not valid TOML: nested too deeply") from None
    except OSError as exc:
        raise SettingsError(f"{path}: cannot be read: {exc.strerror or exc}") from None


def _text(path: str, key: str, value: object) -> str:
    """A setting's value as its variable holds it (``true`` is ``1``)."""
    if isinstance(value, bool):
        return "1" if value else "0"
    if not isinstance(value, (int, str)):
        raise SettingsError(
            f"{path}: {key} must be a string, a number or true/false, not {type(value).__name__}"
        )
    text = str(value)
    if key == "home":
        text = os.path.expanduser(text)
        if not os.path.isabs(text):
            raise SettingsError(f"{path}: home must be an absolute path (or start with ~)")
    if key in _CHOICES and text not in _CHOICES[key]:
        raise SettingsError(f"{path}: {key} must be one of {', '.join(_CHOICES[key])}")
    return text


def apply_or_exit(start: str, argv: list[str]) -> None:
    """``apply``, saying warnings on stderr; a broken file is a one-line error,
    exit 1 (and the error document on stdout when ``argv`` asks for ``--json``)."""
    try:
        warnings = apply(start)
    except SettingsError as exc:
        early_error(argv, str(exc), "settings")
    for line in warnings:
        print(f"earshot: warning: {line}", file=sys.stderr)


def apply_or_note(start: str) -> None:
    """``apply`` for a hook event: a broken file is noted in ``$EARSHOT_SETTINGS_BROKEN``
    for the handler to say to the agent (and refuse the tool with ``--strict``)."""
    try:
        warnings = apply(start)
    except SettingsError as exc:
        os.environ[BROKEN] = str(exc)
        return
    for line in warnings:
        print(f"earshot: warning: {line}", file=sys.stderr)


def early_error(argv: list[str], message: str, kind: str) -> NoReturn:
    """An error before any command runs: one line on stderr, exit 1; with
    ``--json`` (before ``--``) also the error document on stdout, as every command."""
    end = argv.index("--") if "--" in argv else len(argv)
    if "--json" in argv[:end]:
        import json

        doc = {"error": {"code": kind, "message": message, "exit": 1}}
        print(json.dumps(doc, indent=2, ensure_ascii=True))
    print(f"earshot: {message}", file=sys.stderr)
    sys.exit(1)
