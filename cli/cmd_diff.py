"""``earshot diff``."""

from __future__ import annotations

import difflib

import click

from earshot.agent.core.batch import State
from earshot.cas.diff import Change, ChangeKind
from earshot.cas.errors import EarshotError
from earshot.cas.objects import ObjectReader
from earshot.cas.project import Project
from earshot.cas.tree import Kind, TreeEntry

from . import colour, completion, render
from .common import project_reader
from .readonly import unless_recorded

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
    lines = difflib.unified_diff(
        old, new, render.quote_path(f"a/{change.path}"), render.quote_path(f"b/{change.path}")
    )
    return "".join(line if line.endswith("\n") else line + "\n" for line in lines)


class NoSuchBatch(EarshotError):
    def __init__(self, seq: int, session: str) -> None:
        super().__init__(f"no batch {seq} in session {session} (see 'earshot log')")


def batch_changes(project: Project, session_id: str | None, seq: int) -> list[Change]:
    """A batch's ledger as changes (each path: before -> after); creates no session."""
    from earshot.agent.core.conversation import BATCHES, NoSessions, find
    from earshot.agent.core.records import get_batch

    ident = find(project, session_id, acting=BATCHES)
    if ident is None:
        raise NoSessions()
    with project.store.backend.read() as view:
        batch = get_batch(view, ident, seq)
    if batch is None:
        raise NoSuchBatch(seq, ident)
    return [_as_change(line.path, line.before, line.after) for line in batch.ledger]


def patches_of(project: Project, changes: list[Change]) -> dict[str, str]:
    """The unified diff of each text file of ``changes``, by path."""
    patches: dict[str, str] = {}
    with project.store.reader() as reader:
        for change in changes:
            patch = _patch(reader, change)
            if patch:
                patches[change.path] = patch
    return patches


def _as_change(path: str, before: State | None, after: State | None) -> Change:
    def entry(state: State | None) -> TreeEntry | None:
        if state is None:
            return None
        name = path.rpartition("/")[2].encode("utf-8", "surrogateescape")
        return TreeEntry(name, state.kind, state.mode, 0, state.digest)

    if before is None:
        kind = ChangeKind.ADDED
    elif after is None:
        kind = ChangeKind.DELETED
    elif before.kind is not after.kind:
        kind = ChangeKind.TYPE
    elif before.digest == after.digest:
        kind = ChangeKind.MODE
    else:
        kind = ChangeKind.MODIFIED
    return Change(path, kind, entry(before), entry(after))


def _is_batch(old_id: str, new_id: str | None) -> bool:
    return old_id.isdigit() and len(old_id) < 8 and new_id is None


def _no_store(old_id: str, new_id: str | None, **options: object) -> None:
    from earshot.agent.core.conversation import NoSessions
    from earshot.cas.project import NoSuchSnapshot

    raise NoSessions() if _is_batch(old_id, new_id) else NoSuchSnapshot(old_id)


@click.command()
@click.argument("old_id", metavar="A", shell_complete=completion.snapshot_ids_or_batches)
@click.argument("new_id", metavar="[B]", required=False, shell_complete=completion.snapshot_ids)
@click.option("--stat", "stat_only", is_flag=True, help="Only the list of changed paths.")
@click.option("--session", "session_id", metavar="ID", help="The session of a BATCH number.")
@unless_recorded(_no_store)
@project_reader
def diff(
    project: Project,
    as_json: bool,
    old_id: str,
    new_id: str | None,
    stat_only: bool,
    session_id: str | None,
) -> None:
    """Show what changed from snapshot A to snapshot B (default: the root now).

    A may instead be a BATCH number of the session (see 'earshot log'): what
    that batch changed. Snapshot ids are 8+ hex digits; batch numbers are
    shorter. Text files get a unified diff; --stat lists paths only
    (+ added, - deleted, ~ modified, m mode, t type).
    """
    if _is_batch(old_id, new_id):
        changes = batch_changes(project, session_id, int(old_id))
    else:
        old = project.resolve(old_id)
        new = project.resolve(new_id) if new_id else None
        changes = project.diff(old, new)
    patches = patches_of(project, changes) if not stat_only and not as_json else {}
    doc, text = render.changes(changes, stat_only, patches)
    colour.emit(doc, text, as_json, colour.diff_line)
