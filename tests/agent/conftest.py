"""Fixtures for the checkpoint tests: a real store in a tmp home, a real root, the real CLI.

``cli`` runs the installed ``earshot`` console script in a subprocess with the
root as its working directory and its own ``EARSHOT_HOME``. ``lib`` opens the
same project in-process (``Project`` + a session + ``Engine``), so a test can
look at what the engine did from the inside and then at what the CLI says.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from earshot.agent.core.batch import Batch
from earshot.agent.core.engine import Engine
from earshot.agent.core.records import TABLES, session_batches
from earshot.agent.core.sessions import create_session
from earshot.cas.project import Project, Recorded

EARSHOT = Path(sys.executable).parent / "earshot"


@dataclass(frozen=True)
class Ran:
    """What one ``earshot`` run did."""

    args: tuple[str, ...]
    rc: int
    stdout: str
    stderr: str

    def json(self) -> Any:
        try:
            return json.loads(self.stdout)
        except ValueError as exc:  # pragma: no cover - shown on failure only
            raise AssertionError(f"stdout is not one JSON document: {exc}\n{self}") from None

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
        env = dict(os.environ)
        env.pop("XDG_DATA_HOME", None)
        env.pop("EARSHOT_SESSION", None)
        env["EARSHOT_HOME"] = str(self.home)
        if session is not None:
            env["EARSHOT_SESSION"] = session
        env.update(extra)
        return env

    def run(
        self,
        *args: str,
        expect: int | None = 0,
        stdin: bytes | str | None = None,
        session: str | None = None,
        env: dict[str, str] | None = None,
    ) -> Ran:
        data = stdin.encode() if isinstance(stdin, str) else stdin
        proc = subprocess.run(
            [str(EARSHOT), *args],
            cwd=self.root,
            env=env or self.env(session),
            input=data if data is not None else b"",
            capture_output=True,
            timeout=60,
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

    def store_dir(self) -> Path:
        dirs = [p for p in (self.home / "checkpoints").iterdir() if p.is_dir()]
        assert len(dirs) == 1, dirs
        return dirs[0]


def listing(top: Path) -> dict[str, tuple[object, ...]]:
    """Everything under ``top``: kind, permission bits, content or link target."""
    out: dict[str, tuple[object, ...]] = {}
    for dirpath, dirnames, filenames in os.walk(top):
        dirnames.sort()
        for name in [*dirnames, *filenames]:
            path = Path(dirpath) / name
            rel = path.relative_to(top).as_posix()
            st = path.lstat()
            if stat.S_ISLNK(st.st_mode):
                out[rel] = ("link", os.readlink(path))
            elif stat.S_ISDIR(st.st_mode):
                out[rel] = ("dir", stat.S_IMODE(st.st_mode))
            else:
                out[rel] = ("file", stat.S_IMODE(st.st_mode), path.read_bytes())
    return out


def files(top: Path) -> dict[str, bytes]:
    """The regular files under ``top`` and their bytes (the simplest tree picture)."""
    return {k: v[2] for k, v in listing(top).items() if v[0] == "file"}  # type: ignore[misc]


@dataclass
class Spy:
    """Every ``Project.record`` call: "full", or ("scoped", paths), with its note."""

    calls: list[tuple[object, str]] = field(default_factory=list)

    def kinds(self) -> list[object]:
        return [k for k, _ in self.calls]

    def clear(self) -> None:
        self.calls.clear()


class Lib:
    """A project opened in-process, with one session, and engines on it."""

    def __init__(self, root: Path, home: Path) -> None:
        self.root = root
        self.home = home
        self.project = Project(root, home=home, extra_tables=TABLES)
        self.session = create_session(self.project).id

    def engine(self, session: str | None = None, **kwargs: Any) -> Engine:
        return Engine(self.project, session or self.session, **kwargs)

    def batches(self, session: str | None = None) -> list[Batch]:
        with self.project.store.backend.read() as view:
            return session_batches(view, session or self.session)

    def spy(self, monkeypatch: pytest.MonkeyPatch) -> Spy:
        """Wrap this project's ``record`` to see which restage each step took."""
        spy = Spy()
        real: Callable[..., Recorded] = self.project.record

        def record(paths: list[str] | None, *args: Any, **kwargs: Any) -> Recorded:
            kind: object = "full" if paths is None else ("scoped", tuple(sorted(paths)))
            spy.calls.append((kind, str(kwargs.get("note", ""))))
            return real(paths, *args, **kwargs)

        monkeypatch.setattr(self.project, "record", record)
        return spy

    def tree_files(self, snapshot: Any) -> set[str]:
        """The file paths recorded in a snapshot's tree."""
        from earshot.cas.tree import Kind

        out: set[str] = set()
        with self.project.store.reader() as reader:
            stack = [("", reader.read_snapshot(snapshot).tree)]
            while stack:
                prefix, tree = stack.pop()
                for entry in reader.read_tree(tree):
                    name = prefix + entry.name.decode("utf-8", "surrogateescape")
                    if entry.kind is Kind.DIR and entry.digest is not None:
                        stack.append((name + "/", entry.digest))
                    else:
                        out.add(name)
        return out


@pytest.fixture
def root(tmp_path: Path) -> Path:
    path = tmp_path / "root"
    path.mkdir()
    return path


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "home"
    monkeypatch.setenv("EARSHOT_HOME", str(path))
    monkeypatch.delenv("EARSHOT_SESSION", raising=False)
    return path


@pytest.fixture
def cli(home: Path, root: Path) -> Cli:
    return Cli(home, root)


@pytest.fixture
def lib(root: Path, home: Path) -> Iterator[Lib]:
    opened = Lib(root, home)
    try:
        yield opened
    finally:
        opened.project.close()


@pytest.fixture
def tree() -> Callable[[Path], dict[str, tuple[object, ...]]]:
    return listing


@pytest.fixture
def file_tree() -> Callable[[Path], dict[str, bytes]]:
    return files
