"""What ``earshot install`` notes of the files it edits, in earshot's data home
(``installs.json``), never in the files: that it created a file, or a
directory on its way (``.claude/``); the projects whose trust it added to
Codex's config; what it last wrote there; what Gemini's
``hooksConfig.enabled`` was before it turned it on. Uninstall reads these to
give back exactly what was there before, and to remove only what install made.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from .settings_io import SettingsError, read_bytes, write_bytes


def _installs_file() -> Path:
    from earshot.cas.paths import data_home

    return data_home() / "installs.json"


def _installs() -> dict[str, Any]:
    try:
        data = read_bytes(_installs_file())
        doc = json.loads(data) if data else {}
    except (SettingsError, ValueError, RecursionError):  # nested past what json reads
        return {}
    return doc if isinstance(doc, dict) else {}


def noted(path: Path) -> dict[str, Any]:
    """What earshot noted of a file it edited (in its data home, not the file)."""
    entry = _installs().get(str(path))
    return entry if isinstance(entry, dict) else {}


def note(path: Path, key: str, value: Any) -> None:
    doc = _installs()
    entry = doc.get(str(path))
    doc[str(path)] = {**(entry if isinstance(entry, dict) else {}), key: value}
    write_bytes(_installs_file(), json.dumps(doc, indent=2).encode() + b"\n", None)


def unnote(path: Path, key: str) -> None:
    doc = _installs()
    entry = doc.get(str(path))
    if not isinstance(entry, dict) or key not in entry:
        return
    del entry[key]
    if not entry:
        del doc[str(path)]
    write_bytes(_installs_file(), json.dumps(doc, indent=2).encode() + b"\n", None)


def note_made_dirs(path: Path) -> None:
    """Note each directory on the way to ``path`` that is not there yet, before
    it is made: uninstall removes the ones it leaves empty, and none other (a
    ``.claude/`` the person had stays)."""
    missing = []
    at = Path(os.path.abspath(path)).parent
    while not at.exists() and not at.is_symlink() and at != at.parent:
        missing.append(at)
        at = at.parent
    for directory in reversed(missing):
        note(directory, "created", True)


def remove_made_dirs(path: Path) -> None:
    """Remove the directories on the way to ``path`` that install made and that
    are left empty, deepest first; stop at the first one that is not both."""
    at = Path(os.path.abspath(path)).parent
    while noted(at).get("created"):
        try:
            at.rmdir()
        except FileNotFoundError:
            pass
        except OSError:
            return  # something is in it (the person's, or earshot's still): it stays
        unnote(at, "created")
        at = at.parent
