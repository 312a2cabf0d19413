"""Running the real ``earshot`` console script in a subprocess, against one home and one root.

Commands run with the root as the working directory unless told otherwise,
so the default root (the current directory) is exercised everywhere; each
test has its own ``EARSHOT_HOME``. The fixture is ``cli`` (tests/conftest.py).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

EARSHOT = Path(sys.executable).parent / "earshot"


@dataclass(frozen=True)
class Ran:
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


class Cli:
    """The real ``earshot`` script against one home and one root."""

    def __init__(self, home: Path, root: Path) -> None:
        self.home = home
        self.root = root

    def env(self, session: str | None = None, **extra: str) -> dict[str, str]:
        """The environment a run gets: this home, and ``session`` as $EARSHOT_SESSION."""
        env = dict(os.environ)
        env.pop("XDG_DATA_HOME", None)
        env.pop("EARSHOT_SESSION", None)
        env["EARSHOT_HOME"] = str(self.home)
        # No person's settings file (~/.config/earshot/config.toml) reaches a test.
        env["XDG_CONFIG_HOME"] = str(self.home / "config")
        if session is not None:
            env["EARSHOT_SESSION"] = session
        env.update(extra)
        return env

    def run(
        self,
        *args: str,
        cwd: Path | None = None,
        expect: int | None = 0,
        stdin: bytes | str | None = None,
        session: str | None = None,
        env: dict[str, str] | None = None,
        timeout: float = 60,
        prefix: tuple[str, ...] = (),
    ) -> Ran:
        """Run ``earshot ARGS`` and check its exit code is ``expect`` (None: any).

        ``prefix`` goes before it (e.g. a privilege-dropping wrapper).
        """
        data = stdin.encode() if isinstance(stdin, str) else stdin
        proc = subprocess.run(
            [*prefix, str(EARSHOT), *args],
            cwd=cwd or self.root,
            env=env or self.env(session),
            input=data if data is not None else b"",
            capture_output=True,
            timeout=timeout,
            check=False,
        )
        ran = Ran(
            tuple(args),
            proc.returncode,
            proc.stdout.decode("utf-8", "surrogateescape"),
            proc.stderr.decode("utf-8", "surrogateescape"),
        )
        if expect is not None:
            assert ran.rc == expect, str(ran)
        return ran

    def json(self, *args: str, expect: int | None = 0, **kwargs: Any) -> Any:
        return self.run(*args, "--json", expect=expect, **kwargs).json()

    def new_session(self) -> str:
        sid: str = self.json("session", "new")["id"]
        return sid

    def snap(self, *args: str) -> str:
        """Take a snapshot (``snapshot --json ARGS``) and return its id."""
        snap_id: str = self.json("snapshot", *args)["id"]
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


def one_line_error(ran: Ran, code: int = 1) -> str:
    """Assert the contract for errors: exit ``code``, one 'earshot: ' line on
    stderr, and stdout empty; with ``--json``, stdout is the error as one
    document (``{"error": {"code", "message", "exit"}}``) saying the same."""
    assert ran.rc == code, str(ran)
    lines = ran.stderr.splitlines()
    assert len(lines) == 1, str(ran)
    assert lines[0].startswith("earshot: "), str(ran)
    if "--json" in ran.args:
        error = ran.json()["error"]
        assert error["exit"] == code and lines[0] == f"earshot: {error['message']}", str(ran)
        assert isinstance(error["code"], str) and error["code"], str(ran)
    else:
        assert ran.stdout == "", str(ran)
    return lines[0]
