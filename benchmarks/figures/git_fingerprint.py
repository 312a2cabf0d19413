"""The git fingerprint earshot takes before and after every shell command.

Two repositories are built: a big ``.git`` (objects packed by ``git
fast-import``, loose objects in every fan-out directory, many loose tags)
and a small one (10 objects, one commit). ``fingerprint()`` is then timed on
each, in this process, by the installed library (not ``--earshot``):
300,000 packed and 6,000 loose objects and 2,000 tags, 300 times each
(``--quick``: 20,000, 600 and 200, 50 times). The repositories are the
figure's own, so it runs once, on the plan's first tree.
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

from benchmarks.suite.plan import Plan
from benchmarks.suite.runner import Context, Tree
from benchmarks.suite.trees import TreeSpec
from earshot.agent.core.git_fingerprint import fingerprint

NAME = "git_fingerprint"
FULL = (300_000, 6_000, 2_000, 300)  # packed objects, loose objects, tags, repeats
QUICK = (20_000, 600, 200, 50)

ENV = {
    "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_AUTHOR_NAME": "b",
    "GIT_AUTHOR_EMAIL": "b@example.com",
    "GIT_COMMITTER_NAME": "b",
    "GIT_COMMITTER_EMAIL": "b@example.com",
}


def _git(root: Path, *args: str, data: bytes | None = None) -> str:
    env = {**ENV, "HOME": str(root.parent)}
    done = subprocess.run(
        ["git", *args], cwd=root, env=env, input=data, check=True, capture_output=True
    )
    return done.stdout.decode()


def build(root: Path, objects: int, loose: int, tags: int) -> None:
    """A repository: ``objects`` blobs in a pack, ``loose`` loose blobs, ``tags`` loose tags."""
    root.mkdir()
    _git(root, "init", "-q")
    stream = []
    for i in range(objects):
        blob = f"blob {i}\n".encode()
        stream.append(b"blob\nmark :%d\ndata %d\n%s\n" % (i + 1, len(blob), blob))
    stream.append(b"commit refs/heads/main\ncommitter b <b@e> 0 +0000\ndata 2\nc\n")
    stream += [b"M 100644 :%d d%d/f%d\n" % (i + 1, i % 500, i) for i in range(objects)]
    stream.append(b"\n")
    _git(root, "fast-import", "--quiet", data=b"".join(stream))
    _git(root, "symbolic-ref", "HEAD", "refs/heads/main")
    names = []
    for i in range(loose):
        path = root / f"loose{i}"
        path.write_text(f"loose {i}\n")
        names.append(path.name)
    if names:
        _git(root, "hash-object", "-w", "--stdin-paths", data="\n".join(names).encode())
    for name in names:
        (root / name).unlink()
    head = _git(root, "rev-parse", "HEAD").strip()
    refs = "".join(f"create refs/tags/t{i} {head}\n" for i in range(tags))
    _git(root, "update-ref", "--stdin", data=refs.encode())


class GitFingerprint:
    name = NAME
    title = "The git fingerprint taken around every shell command"

    def applies(self, tree: TreeSpec, plan: Plan) -> bool:
        return tree == plan.trees[0]

    def weight(self, tree: TreeSpec, plan: Plan) -> float:
        return (QUICK if plan.quick else FULL)[0] / 2

    def run(self, ctx: Context, tree: Tree) -> None:
        objects, loose, tags, repeat = QUICK if ctx.plan.quick else FULL
        repos = ctx.scratch("repos")
        big, small = repos / "big", repos / "small"
        ctx.progress.step(f"building a repository of {objects:,} objects")
        build(big, objects, loose, tags)
        build(small, 10, 0, 0)
        record = ctx.results.measure
        note = (
            f"big: {objects:,} packed + {loose:,} loose objects, {tags:,} loose tags; "
            f"small: 10 objects, one commit; {repeat} calls each, in-process"
        )
        for label, root in (("big", big), ("small", small)):
            ctx.progress.step(f"fingerprint of the {label} repository, {repeat} times")
            for _ in range(repeat):
                start = time.perf_counter()
                stamps = len(fingerprint(str(root)).stamps)
                seconds = time.perf_counter() - start
                record(NAME, f"git_fingerprint_{label}", tree.key, "earshot", seconds, note=note)
            record(NAME, f"git_fingerprint_{label}_stamps", tree.key, "earshot", stamps, "count")


FIGURE = GitFingerprint()
