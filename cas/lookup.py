"""Finding one path in a stored tree without walking the rest."""

from __future__ import annotations

from .digest import Digest
from .objects import ObjectReader
from .tree import Kind, TreeEntry


def lookup(reader: ObjectReader, tree: Digest, path: str) -> TreeEntry | None:
    """The entry at ``path`` (root-relative, ``/``-separated), or None."""
    current: Digest | None = tree
    entry: TreeEntry | None = None
    for part in path.split("/"):
        if current is None:
            return None
        name = _name(part)
        entry = reader.find_entry(current, name) if name is not None else None
        if entry is None:
            return None
        current = entry.digest if entry.kind is Kind.DIR else None
    return entry


def is_dir(reader: ObjectReader, tree: Digest, path: str) -> bool:
    """Whether ``path`` is a directory in the tree (the root always is)."""
    if not path:
        return True
    entry = lookup(reader, tree, path)
    return entry is not None and entry.kind is Kind.DIR


def lookup_under(reader: ObjectReader, tree: Digest, path: str) -> tuple[TreeEntry | None, str]:
    """The entry at ``path``; or, when an ancestor is unrecorded (a directory kept
    as existence only), that ancestor's entry and its path; else (None, "")."""
    current: Digest | None = tree
    entry: TreeEntry | None = None
    parts = path.split("/")
    for depth, part in enumerate(parts):
        if current is None:
            if entry is not None and entry.kind is Kind.UNRECORDED:
                return entry, "/".join(parts[:depth])
            return None, ""
        name = _name(part)
        entry = reader.find_entry(current, name) if name is not None else None
        if entry is None:
            return None, ""
        current = entry.digest if entry.kind is Kind.DIR else None
    return entry, ""


def _name(part: str) -> bytes | None:
    """A path component as trees hold it; None for one no file can have: a lone
    surrogate that stands for no byte (a ``\\ud800`` escape in an agent's JSON)."""
    try:
        return part.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return None
