"""Running the real ``earshot`` console script in a subprocess, against a tmp root and home.

Every test gets its own ``EARSHOT_HOME`` and its own root; commands run with the
root as the working directory unless told otherwise, so the default root (the
current directory) is exercised everywhere.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

EARSHOT = Path(sys.executable).parent / "earshot"


@dataclass(frozen=True)
class Result:
    """What one ``earshot`` run did."""

    args: tuple[str, ...]
    rc: int
    stdout: str
    stderr: str

    def json(self) -> Any:
        """stdout as exactly one JSON document (json.loads rejects trailing data)."""
        try:
            return json.loads(self.stdout)
        except ValueError as exc:  # pragma: no cover - shown on failure only
            message = f"stdout of {self.args} is not one JSON document: {exc}\n{self}"
            raise AssertionError(message) from None

    def __str__(self) -> str:
        return (
            f"earshot {' '.join(self.args)} -> {self.rc}\n"
            f"--- stdout\n{self.stdout}\n--- stderr\n{self.stderr}"
        )


class Earshot:
    """The CLI of one test: a home, a root, and a way to run commands."""

    def __init__(self, home: Path, root: Path) -> None:
        self.home = home
        self.root = root

    def env(self, **extra: str) -> dict[str, str]:
        env = dict(os.environ)
        env.pop("XDG_DATA_HOME", None)
        env["EARSHOT_HOME"] = str(self.home)
        env.update(extra)
        return env

    def run(
        self,
        *args: str,
        cwd: Path | None = None,
        expect: int | None = 0,
        env: dict[str, str] | None = None,
        stdin: str | None = None,
        timeout: float = 60,
        prefix: tuple[str, ...] = (),
    ) -> Result:
        """Run ``earshot ARGS``; ``prefix`` goes before it (e.g. a privilege-dropping wrapper)."""
        proc = subprocess.run(
            [*prefix, str(EARSHOT), *args],
            cwd=cwd or self.root,
            env=env or self.env(),
            input=stdin if stdin is not None else "",
            capture_output=True,
            encoding="utf-8",
            errors="surrogateescape",
            timeout=timeout,
            check=False,
        )
        result = Result(tuple(args), proc.returncode, proc.stdout, proc.stderr)
        if expect is not None:
            assert result.rc == expect, str(result)
        return result

    def json(self, *args: str, expect: int | None = 0, **kwargs: Any) -> Any:
        return self.run(*args, "--json", expect=expect, **kwargs).json()

    def snap(self, *args: str) -> str:
        """Take a snapshot (``snapshot --json ARGS``) and return its id."""
        doc = self.json("snapshot", *args)
        snap_id: str = doc["id"]
        return snap_id

    def ids(self) -> list[str]:
        return [s["id"] for s in self.json("snapshots")["snapshots"]]

    def store_dir(self) -> Path:
        """The one checkpoints/<root-key>/ directory (after a first command)."""
        dirs = [p for p in (self.home / "checkpoints").iterdir() if p.is_dir()]
        assert len(dirs) == 1, dirs
        return dirs[0]

    def write(self, rel: str, data: str | bytes, mode: int | None = None) -> Path:
        path = self.root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(data, str):
            data = data.encode()
        path.write_bytes(data)
        if mode is not None:
            path.chmod(mode)
        return path


def one_line_error(result: Result, code: int = 1) -> str:
    """Assert the contract for errors: exit ``code``, empty stdout, one 'earshot: ' line."""
    assert result.rc == code, str(result)
    assert result.stdout == "", str(result)
    lines = result.stderr.splitlines()
    assert len(lines) == 1, str(result)
    assert lines[0].startswith("earshot: "), str(result)
    return lines[0]


def listing(root: Path, mtimes: bool = False) -> dict[str, tuple[object, ...]]:
    """Everything under ``root``: kind, permission bits, content or link target."""
    out: dict[str, tuple[object, ...]] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in [*dirnames, *filenames]:
            path = Path(dirpath) / name
            rel = path.relative_to(root).as_posix()
            st = path.lstat()
            perm = stat.S_IMODE(st.st_mode)
            extra: tuple[object, ...] = (st.st_mtime_ns,) if mtimes else ()
            if stat.S_ISLNK(st.st_mode):
                out[rel] = ("link", os.readlink(path), *extra)
            elif stat.S_ISDIR(st.st_mode):
                out[rel] = ("dir", perm, *extra)
            elif stat.S_ISREG(st.st_mode):
                out[rel] = ("file", perm, path.read_bytes(), *extra)
            else:
                out[rel] = ("special", stat.S_IFMT(st.st_mode), *extra)
    return out


@pytest.fixture
def es(tmp_path: Path) -> Earshot:
    home = tmp_path / "home"
    root = tmp_path / "root"
    root.mkdir()
    return Earshot(home, root)


@pytest.fixture
def check_error() -> Any:
    return one_line_error


@pytest.fixture
def list_tree() -> Any:
    return listing
