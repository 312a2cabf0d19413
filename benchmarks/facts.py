"""The storage facts the design relies on, measured on this machine (docs/FACTS.md).

Each is a small experiment with the libraries earshot uses, repeated, median
and min-max:

- LMDB's bytes on disk per value, by value size (why objects are packed);
- zstd's ratio and speed on real source files, by level (why level 3, per object);
- hashing small files in a thread pool against a plain loop (why the scan is serial);
- a scandir + lstat walk per file (what a full restage costs before any hashing).

    python -m benchmarks facts --source /work/trees/linux-source-6.1 [--json OUT]
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import blake3
import lmdb
import zstandard


def _stat(values: list[float]) -> dict[str, float]:
    return {
        "median": round(statistics.median(values), 4),
        "min": round(min(values), 4),
        "max": round(max(values), 4),
    }


def _times(fn: Callable[[], object], repeat: int) -> list[float]:
    out = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        out.append(time.perf_counter() - start)
    return out


def lmdb_bytes_per_value(sizes: list[int], count: int) -> dict[int, float]:
    """On-disk bytes per value of each size, 32-byte random keys, one environment each."""
    out = {}
    for size in sizes:
        with tempfile.TemporaryDirectory() as tmp:
            env = lmdb.open(tmp, map_size=1 << 32, max_dbs=1)
            with env.begin(write=True) as txn:
                for _ in range(count):
                    txn.put(os.urandom(32), os.urandom(size))
            env.close()
            used = os.path.getsize(Path(tmp) / "data.mdb")
        out[size] = round(used / count, 1)
    return out


def lmdb_write_memory(total_mib: int, commit_every_mib: int | None) -> float:
    """Peak RSS (MiB) of a child writing ``total_mib`` of 4 MiB values, in one
    transaction (``commit_every_mib`` None) or committing every so often."""
    import subprocess

    code = f"""
import os, resource, tempfile, lmdb
with tempfile.TemporaryDirectory() as tmp:
    env = lmdb.open(tmp, map_size=1 << 34)
    value = os.urandom(4 << 20)
    txn = env.begin(write=True)
    for i in range({total_mib} // 4):
        txn.put(i.to_bytes(8, 'big'), value)
        if {commit_every_mib or 0} and (i + 1) * 4 % {commit_every_mib or 1} == 0:
            txn.commit()
            txn = env.begin(write=True)
    txn.commit()
    env.close()
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return round(float(out.stdout), 1)


def source_files(top: Path, limit_bytes: int) -> list[bytes]:
    """Real source files (.c, .h, .py, .md, .txt, .rs, .js) up to ``limit_bytes`` in all."""
    out: list[bytes] = []
    total = 0
    for dirpath, dirnames, filenames in os.walk(top):
        dirnames[:] = sorted(d for d in dirnames if d != ".git")
        for name in sorted(filenames):
            if not name.endswith((".c", ".h", ".py", ".md", ".txt", ".rs", ".js")):
                continue
            try:
                data = Path(dirpath, name).read_bytes()
            except OSError:
                continue
            out.append(data)
            total += len(data)
            if total >= limit_bytes:
                return out
    return out


def zstd_levels(files: list[bytes], levels: list[int], repeat: int) -> dict[int, dict[str, Any]]:
    """Ratio and speed (MB/s of input) of per-file compression at each level."""
    raw = sum(len(f) for f in files)
    out = {}
    for level in levels:
        cctx = zstandard.ZstdCompressor(level=level)
        stored = sum(len(cctx.compress(f)) for f in files)

        def compress_all(c: zstandard.ZstdCompressor = cctx) -> list[bytes]:
            return [c.compress(f) for f in files]

        took = _times(compress_all, repeat)
        out[level] = {
            "ratio": round(raw / stored, 2),
            "mb_per_s": _stat([raw / t / 1e6 for t in took]),
        }
    small = [f for f in files if len(f) < 512]
    if small:
        cctx = zstandard.ZstdCompressor(level=3)
        out_small = sum(len(cctx.compress(f)) for f in small)
        out[-1] = {"ratio_under_512_bytes": round(sum(map(len, small)) / out_small, 2)}
    return out


def _hash_file(path: str) -> bytes:
    fd = os.open(path, os.O_RDONLY)
    try:
        return blake3.blake3(os.read(fd, 1 << 20)).digest()
    finally:
        os.close(fd)


def hashing_small_files(count: int, size: int, repeat: int) -> dict[str, Any]:
    """A plain loop against a thread pool, hashing ``count`` files of ``size`` bytes."""
    with tempfile.TemporaryDirectory() as tmp:
        paths = []
        for i in range(count):
            path = os.path.join(tmp, f"f{i}")
            with open(path, "wb") as f:
                f.write(os.urandom(size))
            paths.append(path)
        loop = _times(lambda: [_hash_file(p) for p in paths], repeat)
        with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
            pooled = _times(lambda: list(pool.map(_hash_file, paths)), repeat)
    return {
        "loop_us_per_file": _stat([t / count * 1e6 for t in loop]),
        "pool_us_per_file": _stat([t / count * 1e6 for t in pooled]),
        "pool_over_loop": round(statistics.median(pooled) / statistics.median(loop), 2),
    }


def walk(top: Path, repeat: int) -> dict[str, Any]:
    """scandir + lstat of every entry below ``top`` (warm cache), per file."""

    def once() -> int:
        count = 0
        stack = [str(top)]
        while stack:
            with os.scandir(stack.pop()) as it:
                for entry in it:
                    st = entry.stat(follow_symlinks=False)
                    if entry.is_dir(follow_symlinks=False):
                        if entry.name != ".git":
                            stack.append(entry.path)
                    else:
                        count += 1 + (st.st_size & 0)
        return count

    files = once()  # and warm the cache
    took = _times(once, repeat)
    return {
        "files": files,
        "seconds": _stat(took),
        "us_per_file": round(statistics.median(took) / files * 1e6, 2),
    }


def parallel_lstat(top: Path, repeat: int) -> dict[str, Any]:
    """lstat of every entry below ``top`` by name (a no-change walk's syscalls):
    one thread, against a pool of 2 and of 4 threads taking a directory each
    (git's preload-index idea)."""
    dirs = [(d, sub + names) for d, sub, names in os.walk(top)]

    def one_dir(item: tuple[str, list[str]]) -> int:
        where, names = item
        for name in names:
            os.lstat(f"{where}/{name}")
        return len(names)

    def serial() -> int:
        return sum(one_dir(item) for item in dirs)

    def pooled(threads: int) -> Callable[[], int]:
        def run() -> int:
            with ThreadPoolExecutor(threads) as pool:
                return sum(pool.map(one_dir, dirs, chunksize=16))

        return run

    count = serial()
    out: dict[str, Any] = {"lstats": count}
    for name, fn in (("one_thread", serial), ("pool_2", pooled(2)), ("pool_4", pooled(4))):
        out[name] = _stat(_times(fn, repeat))
    return out


def measure_all(source: Path, repeat: int, out: Path | None) -> None:
    """Every experiment, printed as it ends; all of them as JSON into ``out``."""
    doc: dict[str, Any] = {
        "versions": {
            "python": sys.version.split()[0],
            "lmdb": lmdb.version(),
            "zstandard": zstandard.__version__,
            "blake3": getattr(blake3, "__version__", "?"),
        },
    }
    doc["lmdb_bytes_per_value"] = lmdb_bytes_per_value([100, 1000, 2100, 4000, 4096, 65536], 5000)
    print("lmdb bytes on disk per value:", doc["lmdb_bytes_per_value"], flush=True)
    doc["lmdb_write_rss_mib_for_1gib"] = {
        "one_transaction": _stat([lmdb_write_memory(1024, None) for _ in range(3)]),
        "commit_every_64_mib": _stat([lmdb_write_memory(1024, 64) for _ in range(3)]),
    }
    print("lmdb write txn memory:", doc["lmdb_write_rss_mib_for_1gib"], flush=True)
    files = source_files(source, 64 << 20)
    doc["zstd"] = {
        "files": len(files),
        "mib": round(sum(map(len, files)) / (1 << 20), 1),
        "levels": zstd_levels(files, [1, 3, 19], max(1, repeat // 2)),
    }
    print("zstd:", doc["zstd"], flush=True)
    doc["hashing_10k_4k_files"] = hashing_small_files(10_000, 4096, repeat)
    print("hashing:", doc["hashing_10k_4k_files"], flush=True)
    doc["walk"] = walk(source, repeat)
    print("walk:", doc["walk"], flush=True)
    doc["parallel_lstat"] = parallel_lstat(source, repeat)
    print("parallel lstat:", doc["parallel_lstat"], flush=True)
    if out is not None:
        out.write_text(json.dumps(doc, indent=2, default=str) + "\n")
