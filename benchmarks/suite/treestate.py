"""A tree's files as a map, and how far a restore is from what it should be.

``capture(root)`` maps each regular file and symlink under ``root`` to its
kind, permission bits (files), size and git blob id (of the content, or of
a link's target), skipping every ``.git`` entry at any depth: the project's
repository is not the work an undo gives back (see ``judge``).

``judge`` compares three maps of one run: what the tree should be (the tree
before the run, plus the person's hand edits), the tree after the run, and
the tree after a peer's restore. Its counts, for the peer's row:

* **changed by the run**: paths whose state after the run differs from
  what it should be (changed, deleted, or created by the run);
* **restored exactly**: of those, the paths the restore put right (same
  kind, content and mode again, or gone again where the run made them);
* **left wrong**: every path, the person's aside, whose state after the
  restore differs from what it should be: wrong content or mode, missing,
  or left behind by the run (a restore that broke a path the run never
  touched is counted here too);
* **person's lost**: the person's paths (the file they edited, the notes
  they made) not as they left them: deleted or overwritten;
* **bytes lost**: for each path left wrong or person's lost whose right
  content is in no file of the restored tree and in no object of the
  project's repository (``git cat-file``), that content's size: work that
  is gone, not only out of place (a tracked file git still holds is wrong,
  not lost).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class Entry:
    kind: str  # "file" or "link"
    mode: int  # permission bits of a file; 0 for a link
    size: int
    blob: str  # git's blob id of the content (a link: of its target)


State = dict[str, Entry]


def blob_id(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data, usedforsecurity=False).hexdigest()


def capture(root: Path) -> State:
    """Every regular file and symlink under ``root``, ``.git`` skipped at every depth."""
    out: State = {}
    stack = [(str(root), "")]
    while stack:
        top, prefix = stack.pop()
        with os.scandir(top) as it:
            for e in it:
                if e.name == ".git":
                    continue
                rel = prefix + e.name
                st = e.stat(follow_symlinks=False)
                if stat.S_ISLNK(st.st_mode):
                    target = os.fsencode(os.readlink(e.path))
                    out[rel] = Entry("link", 0, len(target), blob_id(target))
                elif stat.S_ISDIR(st.st_mode):
                    stack.append((e.path, rel + "/"))
                elif stat.S_ISREG(st.st_mode):
                    with open(e.path, "rb") as f:
                        data = f.read()
                    out[rel] = Entry("file", stat.S_IMODE(st.st_mode), len(data), blob_id(data))
    return out


def expected(before: State, root_after_person: Path, person: Iterable[str]) -> State:
    """The tree before the run with the person's files as they left them."""
    want = dict(before)
    for rel in person:
        path = root_after_person / rel
        data = path.read_bytes()
        want[rel] = Entry("file", stat.S_IMODE(path.lstat().st_mode), len(data), blob_id(data))
    return want


def in_repository(root: Path, blobs: set[str], env: dict[str, str]) -> set[str]:
    """Which of ``blobs`` the repository at ``root`` holds as objects."""
    if not blobs or not (root / ".git").exists():
        return set()
    proc = subprocess.run(
        ["git", "cat-file", "--batch-check"],
        cwd=root,
        env=env,
        input="".join(f"{b}\n" for b in sorted(blobs)),
        capture_output=True,
        text=True,
        check=True,
    )
    return {line.split()[0] for line in proc.stdout.splitlines() if not line.endswith("missing")}


@dataclass
class Verdict:
    changed: int = 0
    restored: int = 0
    wrong: list[str] = field(default_factory=list)
    persons_lost: list[str] = field(default_factory=list)
    bytes_lost: int = 0
    lost: list[str] = field(default_factory=list)  # paths whose content is gone

    def describe(self, want: State, got: State, limit: int = 2) -> str:
        """The wrong paths in a few words: how many of each kind, a few named."""
        kinds: dict[str, list[str]] = {}
        for rel in self.wrong + self.persons_lost:
            kind = (
                "missing"
                if rel not in got
                else "left behind"
                if rel not in want
                else "not as it was"
            )
            kinds.setdefault(kind, []).append(rel)
        parts = [
            f"{len(paths)} {kind} (e.g. {', '.join(sorted(paths)[:limit])})"
            for kind, paths in sorted(kinds.items())
        ]
        if self.lost:
            parts.append(f"content gone: {', '.join(sorted(self.lost)[:limit])}")
        return "; ".join(parts)


def judge(
    want: State, after_run: State, after_restore: State, person: set[str], repo_blobs: set[str]
) -> Verdict:
    """How far ``after_restore`` is from ``want`` (see the module's docstring);
    ``repo_blobs``: the blobs the project's repository holds, of those asked."""
    v = Verdict()
    paths = set(want) | set(after_run) | set(after_restore)
    for rel in sorted(paths):
        right, now = want.get(rel), after_restore.get(rel)
        if after_run.get(rel) != right:
            v.changed += 1
            v.restored += now == right
        if now == right:
            continue
        (v.persons_lost if rel in person else v.wrong).append(rel)
    present = {e.blob for e in after_restore.values()}
    for rel in v.wrong + v.persons_lost:
        right = want.get(rel)
        if right is not None and right.blob not in present and right.blob not in repo_blobs:
            v.bytes_lost += right.size
            v.lost.append(rel)
    return v


def blobs_to_look_up(want: State, after_restore: State) -> set[str]:
    """The blobs ``judge`` needs the repository's answer for."""
    present = {e.blob for e in after_restore.values()}
    return {
        e.blob for rel, e in want.items() if after_restore.get(rel) != e and e.blob not in present
    }


def _dirs(root: Path) -> set[str]:
    out: set[str] = set()
    for dirpath, dirnames, _files in os.walk(root):
        dirnames[:] = [d for d in dirnames if d != ".git"]
        rel = os.path.relpath(dirpath, root)
        if rel != ".":
            out.add(rel)
    return out


def repair(tree: Path, base: Path, before: State, now: State) -> None:
    """Make ``tree`` (in state ``now``) a copy of ``base`` (in state ``before``)
    again by rewriting only what differs: cheaper than a new copy of the whole
    tree. Its ``.git`` is copied again but for ``objects``, which a run only
    ever adds to. Checked: the tree's state after is ``before``."""
    for entry in os.scandir(base / ".git"):
        if entry.name == "objects":
            continue
        mine = tree / ".git" / entry.name
        if mine.is_dir() and not mine.is_symlink():
            shutil.rmtree(mine)
        elif mine.exists() or mine.is_symlink():
            mine.unlink()
        if entry.is_dir(follow_symlinks=False):
            shutil.copytree(entry.path, mine, symlinks=True)
        else:
            shutil.copy2(entry.path, mine, follow_symlinks=False)
    for rel in sorted(set(before) | set(now)):
        if before.get(rel) == now.get(rel):
            continue
        path = tree / rel
        if path.is_symlink() or path.is_file():
            path.unlink()
        elif path.is_dir():
            shutil.rmtree(path)
        if rel in before:
            path.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(base / rel, path, follow_symlinks=False)
    want_dirs = _dirs(base)
    for rel in sorted(_dirs(tree) - want_dirs, key=len, reverse=True):
        shutil.rmtree(tree / rel, ignore_errors=True)
    for rel in sorted(want_dirs):
        (tree / rel).mkdir(exist_ok=True)
    if capture(tree) != before:
        raise RuntimeError(f"{tree}: not the same as {base} after the repair")
