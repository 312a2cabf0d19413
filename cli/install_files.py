"""The agents' files ``earshot install`` edits, as documents: read, checked, written.

``Settings`` is an agent's JSON settings (or Codex's ``hooks.json``);
``CodexConfig`` Codex's ``config.toml``, where ``--trust`` marks earshot's
hooks trusted; and what Gemini's ``hooksConfig.enabled`` was before install
turned it on, kept in earshot's data home so that uninstall gives it back.
The bytes go through ``settings_io``: links, FIFOs, backups.
"""

from __future__ import annotations

import copy
import json
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from earshot.agent.hooks.settings import codex_trust, with_trust, without_trust

from .settings_io import SettingsError, read_bytes, real_file, write_bytes


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
        """Write ``doc`` where the file leads; the backup of what was there, if any."""
        return write_bytes(self.real, _encode(doc), self.old)


def _codex_config() -> Path:
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
    def read(cls, path: Path) -> CodexConfig:
        real = real_file(path, None)
        old = read_bytes(real)
        try:
            text = old.decode("utf-8") if old is not None else ""
        except UnicodeDecodeError as exc:
            raise SettingsError(real, f"not UTF-8 text (byte {exc.start})") from None
        return cls(path, real, old, text)


def trust_plan(hooks_file: Path, doc: dict[str, Any]) -> tuple[CodexConfig, str] | None:
    """Codex's config and its text with earshot's hooks trusted; None: already so."""
    config = CodexConfig.read(_codex_config())
    new = with_trust(config.text, codex_trust(str(hooks_file.resolve()), doc))
    return None if new == config.text else (config, new)


def untrust_plan(hooks_file: Path, doc: dict[str, Any]) -> tuple[CodexConfig, str] | None:
    """Codex's config and its text without earshot's trust entries; None: none there.
    A config earshot cannot read holds none of its entries: it is said and left."""
    keys = list(codex_trust(str(hooks_file.resolve()), doc))
    if not keys:
        return None
    try:
        config = CodexConfig.read(_codex_config())
    except SettingsError as exc:
        click.echo(f"earshot: {exc} (earshot's trust entries there, if any, stay)", err=True)
        return None
    new = without_trust(config.text, keys)
    return None if new == config.text else (config, new)


def write_config(plan: tuple[CodexConfig, str]) -> None:
    config, text = plan
    write_bytes(config.real, text.encode("utf-8"), config.old)


#: Gemini's switch for every hook in its settings.
_HOOKS_CONFIG = "hooksConfig"


def _switch(doc: dict[str, Any]) -> Any:
    config = doc.get(_HOOKS_CONFIG)
    return config.get("enabled", _ABSENT) if isinstance(config, dict) else _ABSENT


_ABSENT = "absent"


def turns_on_hooks(agent: str, before: dict[str, Any], after: dict[str, Any]) -> bool:
    """Whether installing turns on Gemini's hooks the person had turned off."""
    return agent == "gemini" and _switch(before) is False and _switch(after) is True


def _installs_file() -> Path:
    from earshot.cas.paths import data_home

    return data_home() / "installs.json"


def _installs() -> dict[str, Any]:
    try:
        data = read_bytes(_installs_file())
        doc = json.loads(data) if data else {}
    except (SettingsError, ValueError):
        return {}
    return doc if isinstance(doc, dict) else {}


def remember_hooks_config(agent: str, settings: Settings, new: dict[str, Any]) -> None:
    """Keep what Gemini's ``hooksConfig.enabled`` was before earshot turned it on,
    so that uninstalling gives it back (in earshot's data home, not the settings)."""
    before = _switch(settings.doc)
    if agent != "gemini" or before is True or _switch(new) is not True:
        return
    doc = _installs()
    doc[str(settings.real)] = {"hooksConfig.enabled": before}
    path = _installs_file()
    write_bytes(path, json.dumps(doc, indent=2).encode() + b"\n", None)


def restore_hooks_config(agent: str, settings: Settings, doc: dict[str, Any]) -> bool:
    """Give Gemini's ``hooksConfig.enabled`` in ``doc`` back what earshot found;
    whether a note of it was there (``forget_hooks_config`` drops it, once
    ``doc`` is written)."""
    if agent != "gemini":
        return False
    installs = _installs()
    noted = installs.get(str(settings.real))
    if not isinstance(noted, dict) or "hooksConfig.enabled" not in noted:
        return False
    config = doc.get(_HOOKS_CONFIG)
    if isinstance(config, dict) and config.get("enabled") is True:
        before = noted["hooksConfig.enabled"]
        if before == _ABSENT:
            del config["enabled"]
            if not config:
                del doc[_HOOKS_CONFIG]
        else:
            config["enabled"] = before
    return True


def forget_hooks_config(settings: Settings) -> None:
    installs = _installs()
    if installs.pop(str(settings.real), None) is not None:
        write_bytes(_installs_file(), json.dumps(installs, indent=2).encode() + b"\n", None)
