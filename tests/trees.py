"""Trees for tests: built in a store from a spec, and pictured from a disk.

A spec is a dict of name -> node: ``bytes`` is a file (0o644); ``("x",
bytes)`` an executable file; ``("link", target)`` a symlink; ``("big",
size)`` a file over the size limit (unrecorded); a ``dict`` a directory
(0o755); ``("dir", mode, dict)`` a directory with that mode. Names may be
``str`` or ``bytes`` (for names that are not UTF-8).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Union

from earshot.cas.digest import Digest
from earshot.cas.objects import ObjectWriter
from earshot.cas.tree import Kind, TreeEntry, Unrecorded

Spec = Union[bytes, tuple, dict]  # type: ignore[type-arg]  # noqa: UP007


def build_tree(writer: ObjectWriter, spec: dict) -> Digest:  # type: ignore[type-arg]
    """Store the tree ``spec`` describes; return its digest."""
    return writer.put_tree(
        [tree_entry(writer, n.encode() if isinstance(n, str) else n, v) for n, v in spec.items()]
    )


def tree_entry(writer: ObjectWriter, name: bytes, node: Spec) -> TreeEntry:
    if isinstance(node, bytes):
        return TreeEntry(name, Kind.FILE, 0o644, len(node), writer.put_blob(node))
    if isinstance(node, dict):
        return TreeEntry(name, Kind.DIR, 0o755, 0, build_tree(writer, node))
    tag = node[0]
    if tag == "x":
        return TreeEntry(name, Kind.FILE, 0o755, len(node[1]), writer.put_blob(node[1]))
    if tag == "link":
        return TreeEntry(name, Kind.SYMLINK, 0o777, len(node[1]), writer.put_blob(node[1]))
    if tag == "big":
        return TreeEntry(name, Kind.UNRECORDED, 0o644, node[1], None, Unrecorded.TOO_LARGE)
    if tag == "dir":
        return TreeEntry(name, Kind.DIR, node[1], 0, build_tree(writer, node[2]))
    raise AssertionError(node)


def listing(top: Path, mtimes: bool = False) -> dict[str, tuple[object, ...]]:
    """Everything under ``top``: kind, permission bits, content or link target."""
    out: dict[str, tuple[object, ...]] = {}
    for dirpath, dirnames, filenames in os.walk(top):
        dirnames.sort()
        for name in [*dirnames, *filenames]:
            path = Path(dirpath) / name
            rel = path.relative_to(top).as_posix()
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


def files(top: Path) -> dict[str, bytes]:
    """The regular files under ``top`` and their bytes (the simplest tree picture)."""
    return {k: v[2] for k, v in listing(top).items() if v[0] == "file"}  # type: ignore[misc]
