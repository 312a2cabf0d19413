"""The remotes a person has named, and the secret that opens each.

Remotes belong to the person, not to one root (a clone starts a new root
from one): ``$EARSHOT_HOME/remotes.json``, ``{name: {url, endpoint,
key_file}}``, written whole through a temp file. The secret is the key file's
content when the remote names one; else ``$EARSHOT_REMOTE_PASSPHRASE``;
else the caller asks (the CLI prompts on a terminal).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from earshot.cas.errors import EarshotError
from earshot.cas.paths import data_home

from .storage import Storage, parse_url

ENV_PASSPHRASE = "EARSHOT_REMOTE_PASSPHRASE"
#: A key file is a few dozen bytes; one of /dev/zero must not fill the memory.
_KEY_FILE_MAX = 64 << 10
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


class RemoteConfigError(EarshotError):
    pass


@dataclass(frozen=True, slots=True)
class RemoteSpec:
    name: str
    url: str
    endpoint: str | None = None
    key_file: str | None = None

    def storage(self) -> Storage:
        return Storage(self.url, self.endpoint)

    def secret(self, ask: Callable[[str], str] | None = None) -> bytes:
        if self.key_file:
            try:
                with open(self.key_file, "rb") as handle:
                    data = handle.read(_KEY_FILE_MAX + 1).strip()
                if len(data) > _KEY_FILE_MAX:
                    raise RemoteConfigError(
                        f"remote {self.name}: key file {self.key_file} is over "
                        f"{_KEY_FILE_MAX // 1024} KiB: not a key file"
                    )
            except OSError as exc:
                raise RemoteConfigError(
                    f"remote {self.name}: key file {self.key_file}: {exc.strerror}"
                ) from None
            if not data:
                raise RemoteConfigError(f"remote {self.name}: key file {self.key_file} is empty")
            return data
        given = os.environ.get(ENV_PASSPHRASE)
        if given:
            return given.encode()
        if ask is not None:
            text = ask(f"passphrase for remote {self.name}")
            if text:
                return text.encode()
        raise RemoteConfigError(
            f"remote {self.name}: no passphrase (set {ENV_PASSPHRASE}, or give the remote "
            "a key file: 'earshot remote add NAME URL --key-file PATH')"
        )


def _path(home: Path | None) -> Path:
    return (home or data_home()) / "remotes.json"


def load(home: Path | None = None) -> dict[str, RemoteSpec]:
    path = _path(home)
    try:
        doc = json.loads(path.read_text())
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        raise RemoteConfigError(f"{path}: cannot read the remotes ({exc})") from None
    if not isinstance(doc, dict):
        raise RemoteConfigError(f"{path}: cannot read the remotes (not a JSON object)")
    out = {}
    for name, spec in doc.items():
        if not isinstance(spec, dict) or not isinstance(spec.get("url"), str):
            raise RemoteConfigError(f"{path}: remote {name!r} has no URL")
        for key in ("endpoint", "key_file"):
            if spec.get(key) is not None and not isinstance(spec[key], str):
                raise RemoteConfigError(f"{path}: remote {name!r}: {key} is not a string")
        out[name] = RemoteSpec(name, spec["url"], spec.get("endpoint"), spec.get("key_file"))
    return out


def save(remotes: dict[str, RemoteSpec], home: Path | None = None) -> None:
    path = _path(home)
    path.parent.mkdir(parents=True, exist_ok=True)
    doc = {
        r.name: {
            k: v
            for k, v in (("url", r.url), ("endpoint", r.endpoint), ("key_file", r.key_file))
            if v
        }
        for r in remotes.values()
    }
    temp = path.with_name(f".remotes.{os.getpid()}.tmp")
    temp.write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n")
    os.replace(temp, path)


def get(name: str, home: Path | None = None) -> RemoteSpec:
    remotes = load(home)
    if name not in remotes:
        known = ", ".join(sorted(remotes)) or "none yet"
        raise RemoteConfigError(
            f"no remote named {name!r} (known: {known}; 'earshot remote add NAME URL')"
        )
    return remotes[name]


def check_new(name: str, url: str) -> None:
    if not _NAME.match(name):
        raise RemoteConfigError(
            f"{name!r} cannot name a remote (letters, digits, '.', '_' and '-', 64 at most)"
        )
    parse_url(url)


def cache_dir(home: Path | None = None) -> Path:
    return (home or data_home()) / "remote-cache"
