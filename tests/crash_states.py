"""The states a power cut may leave the disk in, after a prefix of a command's operations.

A power cut keeps what was made durable and may keep any of the rest. The
model, for ext4 mounted ``data=ordered`` (the Linux default), made stricter
where other file systems are weaker:

- Names (create, mkdir, rmdir, unlink, rename, link, symlink, chmod) reach
  the disk in the order they were made (ext4's journal commits them in
  order), so the names a crash state keeps are a *prefix* of those made.
  The prefix reaches at least the last barrier that commits names: a
  directory's fsync, or ``sync``. ``names="strict"`` (the default) gives an
  fsync of a file no power over names, as POSIX and several file systems
  do not (ext4 would commit the whole journal); ``names="ext4"`` lets any
  fsync commit them.
- Bytes (write, truncate, fallocate) reach the disk in any order and any
  subset, unless an fsync or fdatasync of the same file, or ``sync``, came
  after them, or they were written through an ``O_SYNC``/``O_DSYNC``
  descriptor. One write may be torn: only its first sectors (512 bytes
  each) kept.

``states(cut)`` gives the crash states at one point of the run: names and
bytes all kept (what a kill leaves), all lost down to the barriers, each
half of that, the names cut at a half and a third, a random mix, and a torn write.
"""

from __future__ import annotations

import hashlib
import os
import random
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from fs_trace import BARRIERS, DATA, META, Node, Op, Tree

SECTOR = 512


@dataclass(frozen=True)
class CrashState:
    cut: int  # ops[:cut] were made before the power went
    names: int  # how many of their name changes reached the disk
    kept: frozenset[int]  # the not-yet-durable byte changes that did
    torn: tuple[int, int] | None  # (op, bytes kept) of a write cut short
    variant: str

    def describe(self) -> str:
        torn = f", write {self.torn[0]} torn at {self.torn[1]} bytes" if self.torn else ""
        return (
            f"{self.variant}: after {self.cut} ops, {self.names} name changes, "
            f"{len(self.kept)} volatile writes kept{torn}"
        )


class Persistence:
    """Which of a run's operations a power cut at each point may keep."""

    def __init__(self, ops: list[Op], names: str = "strict") -> None:
        if names not in ("strict", "ext4"):
            raise ValueError(f"names: strict or ext4, not {names!r}")
        self.ops = ops
        commits = ("dirsync", "sync") if names == "strict" else tuple(BARRIERS)
        self._name_rank: dict[int, int] = {}
        self._names_before: list[int] = []  # per cut: name changes made before it
        self._committed: list[int] = []  # per cut: name changes a barrier made durable
        count = committed = 0
        for i, op in enumerate(ops):
            self._names_before.append(count)
            self._committed.append(committed)
            if op.kind in META:
                self._name_rank[i] = count
                count += 1
            elif op.kind in commits:
                committed = count
        self._names_before.append(count)
        self._committed.append(committed)
        # For each byte change: the index of the first barrier that makes it durable.
        self._durable_at: dict[int, int] = {}
        waiting: dict[str, list[int]] = {}
        for i, op in enumerate(ops):
            if op.kind in DATA:
                if op.synced:
                    self._durable_at[i] = i
                else:
                    waiting.setdefault(op.node, []).append(i)
            elif op.kind in ("fsync", "fdatasync"):
                for j in waiting.pop(op.node, []):
                    self._durable_at[j] = i
            elif op.kind == "sync":
                for pending in waiting.values():
                    for j in pending:
                        self._durable_at[j] = i
                waiting.clear()

    def barriers(self) -> list[int]:
        """The cuts just before each barrier, and the end: where durability changes."""
        return [i for i, op in enumerate(self.ops) if op.kind in BARRIERS] + [len(self.ops)]

    def volatile(self, cut: int) -> list[int]:
        return [
            i
            for i in range(cut)
            if self.ops[i].kind in DATA and self._durable_at.get(i, len(self.ops) + 1) >= cut
        ]

    def states(self, cut: int, rng: random.Random) -> list[CrashState]:
        low, high = self._committed[cut], self._names_before[cut]
        volatile = self.volatile(cut)
        every = frozenset(volatile)
        none: frozenset[int] = frozenset()
        out = [
            CrashState(cut, high, every, None, "kill"),
            CrashState(cut, low, none, None, "unsynced lost"),
            CrashState(cut, high, none, None, "names kept, unsynced bytes lost"),
            CrashState(cut, low, every, None, "unsynced names lost, bytes kept"),
            CrashState(cut, (low + high) // 2, none, None, "half the unsynced names lost"),
            CrashState(
                cut, low + (high - low) // 3, none, None, "a third of the unsynced names kept"
            ),
            CrashState(
                cut,
                rng.randint(low, high),
                frozenset(i for i in volatile if rng.random() < 0.5),
                None,
                "a random mix",
            ),
        ]
        long_writes = [i for i in volatile if len(self.ops[i].data) > SECTOR]
        if long_writes:
            op = rng.choice(long_writes)
            keep = SECTOR * rng.randrange(1, (len(self.ops[op].data) - 1) // SECTOR + 1)
            out.append(CrashState(cut, high, every - {op}, (op, keep), "a torn write"))
        return out

    def build(self, state: CrashState, tree: Tree) -> Tree:
        """Apply the state's operations to ``tree`` (fresh, over the base) and return it."""
        for i in range(state.cut):
            op = self.ops[i]
            if op.kind in META:
                if self._name_rank[i] < state.names:
                    tree.apply(op)
            elif op.kind in DATA:
                durable = self._durable_at.get(i, len(self.ops) + 1) < state.cut
                if state.torn is not None and state.torn[0] == i:
                    tree.apply(op, keep=state.torn[1])
                elif durable or i in state.kept:
                    tree.apply(op)
        return tree


def digest(tree: Tree) -> str:
    """What a state holds, to explore each distinct one once."""
    h = hashlib.sha256()
    for path in sorted(tree.entries):
        node = tree.entries[path]
        h.update(path.encode() + b"\0")
        if node is None:
            h.update(b"-")
            continue
        h.update(f"{node.kind} {node.mode} {node.id} {node.target}".encode())
        h.update(hashlib.sha256(node.data).digest())
    return h.hexdigest()


def materialize(
    tree: Tree, pairs: list[tuple[Path, Path]], to_base: Callable[[str], str | None]
) -> None:
    """Lay the state on disk: each live directory copied from its base, then what changed."""
    for base, live in pairs:
        if live.exists():
            shutil.rmtree(live)
        shutil.copytree(base, live, symlinks=True)
    placed: dict[str, str] = {}
    for path in sorted(tree.entries, key=lambda p: p.split("/")):
        node = tree.entries[path]
        if node is None:
            _remove(path)
        elif node.kind == "dir":
            _place_dir(path, node, to_base)
        else:
            _remove(path)
            if node.kind == "link":
                os.symlink(node.target, path)
            elif node.id in placed:
                os.link(placed[node.id], path)
            else:
                Path(path).write_bytes(bytes(node.data))
                os.chmod(path, node.mode)
                placed[node.id] = path


def _place_dir(path: str, node: Node, to_base: Callable[[str], str | None]) -> None:
    if node.origin is None or node.origin != to_base(path) or not os.path.isdir(path):
        _remove(path)
        if node.origin is not None:
            shutil.copytree(node.origin, path, symlinks=True)
        else:
            os.mkdir(path)
    os.chmod(path, node.mode)


def _remove(path: str) -> None:
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path)
    elif os.path.lexists(path):
        os.unlink(path)
