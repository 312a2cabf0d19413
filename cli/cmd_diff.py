"""``earshot diff``."""

from __future__ import annotations

import difflib

import click
from earshot.cas.diff import Change, ChangeKind
from earshot.cas.objects import ObjectReader
from earshot.cas.project import Project
from earshot.cas.tree import Kind, TreeEntry

from . import render
from .common import project_command

_MAX_TEXT = 1 << 20


def _text(reader: ObjectReader, entry: TreeEntry | None) -> list[str] | None:
    """The lines of a file, or None when it is not text worth diffing."""
    if entry is None:
        return []
    if entry.kind is not Kind.FILE or entry.digest is None or entry.size > _MAX_TEXT:
        return None
    data: bytes = reader.read_blob(entry.digest)
    if b"\0" in data[:8192]:
        return None
    try:
        return data.decode("utf-8").splitlines(keepends=True)
    except UnicodeDecodeError:
        return None


def _patch(reader: ObjectReader, change: Change) -> str | None:
    if change.kind is ChangeKind.MODE:
        return None
    old, new = _text(reader, change.old), _text(reader, change.new)
    if old is None or new is None:
        return "  (binary or large file)"
    lines = difflib.unified_diff(old, new, f"a/{change.path}", f"b/{change.path}")
    return "".join(line if line.endswith("\n") else line + "\n" for line in lines)


@click.command()
@click.argument("old_id", metavar="A")
@click.argument("new_id", metavar="[B]", required=False)
@click.option("--stat", "stat_only", is_flag=True, help="Only the list of changed paths.")
@project_command
def diff(project: Project, as_json: bool, old_id: str, new_id: str | None, stat_only: bool) -> None:
    """Show what changed from snapshot A to snapshot B (default: the root now).

    Text files get a unified diff; --stat lists paths only
    (+ added, - deleted, ~ modified, m mode, t type).
    """
    old = project.resolve(old_id)
    new = project.resolve(new_id) if new_id else None
    changes = project.diff(old, new)
    patches: dict[str, str] = {}
    if not stat_only and not as_json:
        with project.store.reader() as reader:
            for change in changes:
                patch = _patch(reader, change)
                if patch:
                    patches[change.path] = patch
    doc, text = render.changes(changes, stat_only, patches)
    render.emit(doc, text, as_json)
