"""The cost of the git fingerprint earshot takes before and after every shell command.

Builds a repository with a big ``.git`` (packed objects, loose objects in
every fan-out directory, many loose tags, the sample hooks) and a small
one, then times ``fingerprint()`` on each. Prints a Markdown table.

    python benchmarks/bench_git_fingerprint.py [--objects 300000] [--loose 6000] [--tags 2000]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from earshot.agent.core.git_fingerprint import fingerprint

ENV = {
    "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_AUTHOR_NAME": "b",
    "GIT_AUTHOR_EMAIL": "b@example.com",
    "GIT_COMMITTER_NAME": "b",
    "GIT_COMMITTER_EMAIL": "b@example.com",
}


def _git(root: Path, *args: str, data: bytes | None = None) -> None:
    env = {**ENV, "HOME": str(root.parent)}
    subprocess.run(["git", *args], cwd=root, env=env, input=data, check=True, capture_output=True)


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
    _git(root, "hash-object", "-w", "--stdin-paths", data="\n".join(names).encode())
    for name in names:
        (root / name).unlink()
    head = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, check=True
    ).stdout.strip()
    refs = "".join(f"create refs/tags/t{i} {head}\n" for i in range(tags))
    _git(root, "update-ref", "--stdin", data=refs.encode())


def measure(root: Path, repeat: int) -> tuple[int, float, float, float]:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        stamps = len(fingerprint(str(root)).stamps)
        times.append((time.perf_counter() - start) * 1000)
    return stamps, statistics.median(times), min(times), max(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--objects", type=int, default=300_000)
    parser.add_argument("--loose", type=int, default=6_000)
    parser.add_argument("--tags", type=int, default=2_000)
    parser.add_argument("--repeat", type=int, default=300)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="earshot-gitfp-") as work:
        big, small = Path(work, "big"), Path(work, "small")
        build(big, args.objects, args.loose, args.tags)
        build(small, 10, 0, 0)
        git_dir = big / ".git"
        fan_out = sum(1 for p in (git_dir / "objects").iterdir() if len(p.name) == 2)
        print("| repository | entries stamped | median ms | min-max ms |")
        print("|---|---|---|---|")
        label = (
            f"big: {args.objects:,} packed + {args.loose:,} loose objects "
            f"({fan_out} fan-out dirs), {args.tags:,} loose tags"
        )
        for name, root in ((label, big), ("small: 10 objects, one commit", small)):
            stamps, median, low, high = measure(root, args.repeat)
            print(f"| {name} | {stamps} | {median:.3f} | {low:.3f}-{high:.3f} |")


if __name__ == "__main__":
    main()
