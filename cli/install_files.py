"""The agents' files ``earshot install`` edits, as documents: read, checked, written.

``Settings`` is an agent's JSON settings (or Codex's ``hooks.json``);
``CodexConfig`` Codex's ``config.toml``, where ``--trust`` marks earshot's
hooks (and the project) trusted. What uninstall needs to give a file back as
it was is noted in earshot's data home (``install_notes``). The bytes go
through ``settings_io``: links, FIFOs, backups.
"""

from __future__ import annotations

import copy
import hashlib
import json
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from earshot.agent.hooks.codex_config import (
    ConfigShape,
    codex_trust,
    kept_level,
    parse,
    project_level,
    with_trust,
    without_trust,
)

from .install_notes import note, note_made_dirs, noted, remove_made_dirs, unnote
from .settings_io import (
    SettingsError,
    read_bytes,
    real_file,
    remove_file,
    restore_backup,
    saved_backup,
    write_bytes,
)


def _parse(path: Path, data: bytes | None) -> dict[str, Any]:
    """The settings document in ``data`` (the file's bytes; None: no file yet)."""
    if data is None or not data.strip():
        return {}
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SettingsError(path, f"not UTF-8 text (byte {exc.start})") from None
    try:
        doc = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise SettingsError(path, f"not JSON ({exc}); fix it or move it away") from None
    if not isinstance(doc, dict):
        raise SettingsError(path, "not a JSON object; fix it or move it away")
    try:
        writable = _writable_back(doc)
        copy.deepcopy(doc)  # what adding and removing hooks do: deep enough to edit?
    except RecursionError:
        raise SettingsError(path, "nested too deeply to edit safely") from None
    if not writable:
        raise SettingsError(path, "holds a number too large for JSON to write back (1e999)")
    return dict(doc)


def _writable_back(value: Any) -> bool:
    """Whether ``value`` survives a write (json reads 1e999 as inf, then writes Infinity)."""
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, dict):
        return all(_writable_back(v) for v in value.values())
    if isinstance(value, list):
        return all(_writable_back(v) for v in value)
    return True


def _encode(doc: dict[str, Any]) -> bytes:
    try:
        return (json.dumps(doc, indent=2, ensure_ascii=False) + "\n").encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate escaped in the file: keep it escaped
        return (json.dumps(doc, indent=2, ensure_ascii=True) + "\n").encode()


def _means(saved: bytes | None, doc: dict[str, Any]) -> bool:
    """Whether the backup's bytes hold ``doc``."""
    if saved is None:
        return False
    try:
        return _parse(Path(), saved) == doc
    except SettingsError:
        return False


@dataclass
class Settings:
    """One settings file, read: where it is, where it leads, its bytes and document."""

    path: Path
    real: Path
    old: bytes | None
    doc: dict[str, Any]

    @classmethod
    def read(cls, path: Path, inside: Path | None) -> Settings:
        real = real_file(path, inside)
        old = read_bytes(real)
        return cls(path, real, old, _parse(real, old))

    def write(self, doc: dict[str, Any]) -> str | None:
        """Write ``doc`` where the file leads; the backup made, if one was.

        A ``doc`` that means what the backup holds (an uninstall with nothing
        else changed) gets the backup's own bytes back, and the backup goes;
        an empty one in a file earshot created removes the file."""
        if restore_backup(self.real, _means(saved_backup(self.real), doc)):
            return None
        created = bool(noted(self.real).get("created"))
        if not doc and created:
            remove_file(self.real)
            unnote(self.real, "created")
            remove_made_dirs(self.real)
            return None
        if self.old is None:
            note_made_dirs(self.real)
            note(self.real, "created", True)  # before the file: never one without it
            created = True
        # A file earshot created had nothing of the person's before it: no backup.
        return write_bytes(self.real, _encode(doc), None if created else self.old)


def codex_config_file() -> Path:
    home = os.environ.get("CODEX_HOME") or os.path.join(os.path.expanduser("~"), ".codex")
    return Path(home) / "config.toml"


@dataclass
class CodexConfig:
    """Codex's config.toml, read: where it is, where it leads, its bytes and text."""

    path: Path
    real: Path
    old: bytes | None
    text: str

    @classmethod
    def read(cls, path: Path | None = None) -> CodexConfig:
        path = path or codex_config_file()
        real = real_file(path, None)
        old = read_bytes(real)
        try:
            text = old.decode("utf-8") if old is not None else ""
        except UnicodeDecodeError as exc:
            raise SettingsError(real, f"not UTF-8 text (byte {exc.start})") from None
        try:
            parse(text)
        except ConfigShape as exc:
            raise SettingsError(real, exc.why) from None
        return cls(path, real, old, text)

    def write(self, text: str) -> None:
        """Write ``text``; the backup's bytes instead when it means the same and
        the file is as earshot last wrote it (a comment the person added since
        means nothing to TOML, and stays)."""
        saved = saved_backup(self.real)
        try:
            same = saved is not None and parse(saved.decode("utf-8")) == parse(text)
        except (ConfigShape, UnicodeDecodeError):
            same = False
        wrote = noted(self.real).get("wrote")
        if wrote is not None and self.old is not None and _digest(self.old) != wrote:
            same = False
        if restore_backup(self.real, same):
            unnote(self.real, "wrote")
            return
        created = bool(noted(self.real).get("created"))
        if not text.strip() and created:
            remove_file(self.real)
            unnote(self.real, "created")
            unnote(self.real, "wrote")
            remove_made_dirs(self.real)
            return
        if self.old is None:
            note_made_dirs(self.real)
            note(self.real, "created", True)
            created = True
        data = text.encode("utf-8")
        write_bytes(self.real, data, None if created else self.old)
        note(self.real, "wrote", _digest(data))


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


#: A plan to write Codex's config: the config read, its new text, and the
#: project whose trust earshot adds (None: none).
TrustPlan = tuple[CodexConfig, str, str | None]


def trust_plan(hooks_file: Path, doc: dict[str, Any], project: str | None) -> TrustPlan | None:
    """Codex's config and its text with earshot's hooks trusted, and ``project``
    (a project's own hooks run only in a trusted project) unless the config
    sets its trust level already, whatever to; None: nothing to add."""
    config = CodexConfig.read()
    try:
        new = with_trust(config.text, codex_trust(str(hooks_file.resolve()), doc), project)
    except ConfigShape as exc:
        raise SettingsError(config.real, exc.why) from None
    if new == config.text:
        return None
    added = None
    if project is not None and project_level(parse(config.text), project) is None:
        added = project  # noted: uninstall takes out only the trust install added
    return config, new, added


def kept_trust(project: str | None) -> Any:
    """The trust level the person set for ``project`` in Codex's config, when it
    is not "trusted" (earshot leaves it: theirs to change); None: none such."""
    if project is None:
        return None
    try:
        return kept_level(CodexConfig.read().text, project)
    except SettingsError:
        return None


def untrust_plan(hooks_file: Path, doc: dict[str, Any], project: str | None) -> TrustPlan | None:
    """Codex's config and its text without earshot's trust entries (and the
    project's trust, if earshot added it); None: none there. A config earshot
    cannot read holds none of its entries: it is said and left."""
    keys = list(codex_trust(str(hooks_file.resolve()), doc))
    try:
        config = CodexConfig.read()
    except SettingsError as exc:
        if keys:
            click.echo(
                f"earshot: warning: {exc.path}: {exc.why} (earshot's trust entries there, "
                "if any, stay)",
                err=True,
            )
        return None
    ours = project if project in noted(config.real).get("projects", []) else None
    if not keys and ours is None:
        return None
    try:
        new = without_trust(config.text, keys, ours)
    except ConfigShape as exc:
        click.echo(
            f"earshot: warning: {config.real}: {exc.why} (earshot's trust entries stay)", err=True
        )
        return None
    return None if new == config.text else (config, new, ours)


def write_config(plan: TrustPlan, adding: bool) -> None:
    """Write the plan; note (or forget) the project whose trust earshot added."""
    config, text, project = plan
    if adding and project is not None:
        projects = list(noted(config.real).get("projects", []))
        note(config.real, "projects", sorted({*projects, project}))
    config.write(text)
    if not adding and project is not None:
        projects = [p for p in noted(config.real).get("projects", []) if p != project]
        if projects:
            note(config.real, "projects", projects)
        else:
            unnote(config.real, "projects")


#: Gemini's switch for every hook in its settings.
_HOOKS_CONFIG = "hooksConfig"


def _switch(doc: dict[str, Any]) -> Any:
    config = doc.get(_HOOKS_CONFIG)
    return config.get("enabled", _ABSENT) if isinstance(config, dict) else _ABSENT


_ABSENT = "absent"


def turns_on_hooks(agent: str, before: dict[str, Any], after: dict[str, Any]) -> bool:
    """Whether installing turns on Gemini's hooks the person had turned off."""
    return agent == "gemini" and _switch(before) is False and _switch(after) is True


def remember_hooks_config(agent: str, settings: Settings, new: dict[str, Any]) -> None:
    """Keep what Gemini's ``hooksConfig.enabled`` was before earshot turned it on,
    so that uninstalling gives it back (in earshot's data home, not the settings)."""
    before = _switch(settings.doc)
    if agent != "gemini" or before is True or _switch(new) is not True:
        return
    note(settings.real, "hooksConfig.enabled", before)


def restore_hooks_config(agent: str, settings: Settings, doc: dict[str, Any]) -> bool:
    """Give Gemini's ``hooksConfig.enabled`` in ``doc`` back what earshot found;
    whether a note of it was there (``forget_hooks_config`` drops it, once
    ``doc`` is written)."""
    if agent != "gemini":
        return False
    found = noted(settings.real)
    if "hooksConfig.enabled" not in found:
        return False
    config = doc.get(_HOOKS_CONFIG)
    if isinstance(config, dict) and config.get("enabled") is True:
        before = found["hooksConfig.enabled"]
        if before == _ABSENT:
            del config["enabled"]
            if not config:
                del doc[_HOOKS_CONFIG]
        else:
            config["enabled"] = before
    return True


def forget_hooks_config(settings: Settings) -> None:
    unnote(settings.real, "hooksConfig.enabled")
