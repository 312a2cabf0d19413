"""Fixtures for the agent tests: the project opened in-process.

``lib`` opens the project of the test's root and home (``Project`` + a
session + ``Engine``), so a test can look at what the engine did from the
inside and then at what the CLI (``cli``, tests/conftest.py) says.
"""

from __future__ import annotations

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
def lib(root: Path, home: Path) -> Iterator[Lib]:
    opened = Lib(root, home)
    try:
        yield opened
    finally:
        opened.project.close()
