"""The soak's batches: a few operations on a session's own directory, planned ahead.

A batch is planned as operations (create, append, edit, delete, remove a
folder, move, chmod, symlink, and a read of a shared file into one of the
session's own), on a model of the directory as it will be: a window's
batches are all planned before the first runs. Every batch first creates or
appends something, so each one changes the tree (undo steps over a batch
that changed nothing). Lines are unique (a running number in fixed width),
so an edit's old line occurs once. Each operation is also one POSIX shell
command (``shell``), and can be done here as an agent's own tool would
(``perform``).
"""

from __future__ import annotations

import os
import random
import shlex
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

#: The folder every session reads and none writes.
SHARED = "shared"


@dataclass(frozen=True)
class Op:
    """One change to the session's directory (paths relative to the root).

    ``kind``: create, append, edit, delete, rmtree, move, chmod, link, or
    share (append a shared file's content: a shared read)."""

    kind: str
    path: str
    text: str = ""  # create/append: the text; edit: the new line; link: the target
    old: str = ""  # edit: the line replaced; move: the destination; share: the source


@dataclass
class Tree:
    """The session's directory as the planner believes it: files, dirs, links."""

    own: str
    files: dict[str, str]
    dirs: set[str]
    links: dict[str, str]

    @classmethod
    def read(cls, root: Path, own: str) -> Tree:
        tree = cls(own, {}, {own}, {})
        for dirpath, dirnames, filenames in os.walk(root / own):
            rel = Path(dirpath).relative_to(root).as_posix()
            tree.dirs.update(f"{rel}/{d}" for d in dirnames if not (Path(dirpath) / d).is_symlink())
            for name in [*filenames, *(d for d in dirnames if (Path(dirpath) / d).is_symlink())]:
                path = Path(dirpath) / name
                if path.is_symlink():
                    tree.links[f"{rel}/{name}"] = os.readlink(path)
                else:
                    tree.files[f"{rel}/{name}"] = path.read_text()
        return tree

    def taken(self, path: str) -> bool:
        return path in self.files or path in self.dirs or path in self.links

    def parents(self, path: str) -> None:
        parent = path.rsplit("/", 1)[0]
        while parent != self.own and parent not in self.dirs:
            self.dirs.add(parent)
            parent = parent.rsplit("/", 1)[0]


#: What a batch does after its first change, each as likely as its count here.
KINDS = ("create", "append", "edit", "edit", "delete", "rmtree", "move", "chmod", "link", "share")


class Planner:
    """Plans each batch of one session, seeded: the same seed, the same plan."""

    def __init__(self, own: str, shared: Sequence[str], seed: int) -> None:
        self.own = own
        self.shared = list(shared)
        self.rng = random.Random(seed)
        self.lines = 0
        #: The path of the batch's first change, which the rest leaves in place.
        self.keep = ""

    def line(self, batch: int) -> str:
        """A line no other line contains (fixed widths, a running number)."""
        self.lines += 1
        return f"{self.own}-b{batch:04d}-l{self.lines:05d}-{self.rng.randrange(16**6):06x}"

    def batch(self, tree: Tree, batch: int) -> list[Op]:
        """One batch's operations, applied to ``tree`` as they are planned."""
        rng = self.rng
        fresh = rng.random() < 0.5 or not tree.files
        ops = [self._create(tree, batch) if fresh else self._append(tree, batch)]
        # What the first one made stays: a batch that made a file and removed
        # it again changed nothing, and undo rightly steps over such a batch.
        self.keep = ops[0].path
        for _ in range(rng.randrange(4)):
            op = self._other(tree, batch, rng.choice(KINDS))
            if op is not None:
                ops.append(op)
        return ops

    def _pick(self, tree: Tree) -> str | None:
        return self.rng.choice(sorted(tree.files)) if tree.files else None

    def _create(self, tree: Tree, batch: int) -> Op:
        rng = self.rng
        folders = sorted(tree.dirs)
        where = rng.choice(folders)
        if rng.random() < 0.2 and where.count("/") < 4:
            where = f"{where}/d{batch:04d}{rng.randrange(100):02d}"
        path = f"{where}/f{batch:04d}-{self.lines:05d}.txt"
        text = "".join(f"{self.line(batch)}\n" for _ in range(rng.randrange(1, 4)))
        tree.parents(path)
        tree.files[path] = text
        return Op("create", path, text)

    def _append(self, tree: Tree, batch: int) -> Op:
        path = self._pick(tree)
        assert path is not None
        text = f"{self.line(batch)}\n"
        tree.files[path] += text
        return Op("append", path, text)

    def _other(self, tree: Tree, batch: int, kind: str) -> Op | None:
        rng = self.rng
        if kind == "create" or (len(tree.files) < 6 and kind in ("delete", "rmtree", "move")):
            return self._create(tree, batch)
        if kind == "append":
            return self._append(tree, batch) if tree.files else None
        path = self._pick(tree)
        if path is None:
            return None
        if kind == "edit":
            lines = [x for x in tree.files[path].splitlines() if x.startswith(self.own)]
            if not lines:
                return None
            old = rng.choice(lines)
            new = f"{old} edited-b{batch:04d}"
            tree.files[path] = tree.files[path].replace(f"{old}\n", f"{new}\n", 1)
            return Op("edit", path, new, old)
        if kind == "delete":
            if path == self.keep:
                return None
            del tree.files[path]
            return Op("delete", path)
        if kind == "rmtree":
            inner = sorted(
                d for d in tree.dirs if d != self.own and not self.keep.startswith(f"{d}/")
            )
            if not inner:
                return None
            gone = rng.choice(inner)
            for table in (tree.files, tree.links):
                for p in [p for p in table if p.startswith(f"{gone}/")]:
                    del table[p]
            tree.dirs -= {d for d in tree.dirs if d == gone or d.startswith(f"{gone}/")}
            return Op("rmtree", gone)
        if kind == "move":
            if path == self.keep:
                return None
            dst = f"{rng.choice(sorted(tree.dirs))}/m{batch:04d}-{self.lines:05d}.txt"
            self.lines += 1
            tree.files[dst] = tree.files.pop(path)
            return Op("move", path, old=dst)
        if kind == "chmod":
            return Op("chmod", path, rng.choice(["755", "644", "600"]))
        if kind == "link":
            folder, name = path.rsplit("/", 1)
            link = f"{folder}/l{batch:04d}-{self.lines:05d}"
            self.lines += 1
            tree.links[link] = name
            return Op("link", link, name)
        assert kind == "share"
        source = rng.choice(self.shared)
        tree.files[path] += SHARED_TEXT[source]
        return Op("share", path, old=source)


#: Each shared file's content (read by every session, written by none).
SHARED_TEXT = {f"{SHARED}/s{i}.txt": f"shared line {i}\n" * (i + 1) for i in range(4)}


def shell(op: Op) -> str:
    """The operation as one POSIX shell command, run in the root."""
    q = shlex.quote
    if op.kind in ("create", "append"):
        into = ">" if op.kind == "create" else ">>"
        folder = op.path.rsplit("/", 1)[0]
        return f"mkdir -p {q(folder)} && printf %s {q(op.text)} {into} {q(op.path)}"
    if op.kind == "edit":
        return f"sed -i 's/^{op.old}$/{op.text}/' {q(op.path)}"
    if op.kind == "delete":
        return f"rm {q(op.path)}"
    if op.kind == "rmtree":
        return f"rm -r {q(op.path)}"
    if op.kind == "move":  # the folder too: another session's undo may have removed it empty
        return f"mkdir -p {q(op.old.rsplit('/', 1)[0])} && mv {q(op.path)} {q(op.old)}"
    if op.kind == "chmod":
        return f"chmod {op.text} {q(op.path)}"
    if op.kind == "link":
        return f"ln -s {q(op.text)} {q(op.path)}"
    assert op.kind == "share"
    return f"cat {q(op.old)} >> {q(op.path)}"


def perform(root: Path, op: Op) -> str | None:
    """Do the operation here, as an agent's own tool would (files by Python, the
    rest through the shell); the tool's error when it cannot: an edit whose line
    is gone (another session's undo restored the file as it was before it)."""
    path = root / op.path
    if op.kind == "create":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(op.text)
    elif op.kind == "append":
        path.write_text(path.read_text() + op.text)
    elif op.kind == "edit":
        text = path.read_text()
        if text.count(f"{op.old}\n") != 1:
            return f"old_string not found in {op.path}"
        path.write_text(text.replace(f"{op.old}\n", f"{op.text}\n"))
    else:
        run_shell(root, shell(op))
    return None


def run_shell(root: Path, command: str) -> None:
    done = subprocess.run(
        ["/bin/sh", "-c", command], cwd=root, capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise RuntimeError(f"{command!r} -> {done.returncode}: {done.stderr.strip()}")


def writes(op: Op) -> bool:
    """Whether an agent's file tool would do this (else its shell does)."""
    return op.kind in ("create", "append", "edit")
