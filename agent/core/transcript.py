"""A session's conversation along one path, as people and pages read it.

``read_transcript`` turns the log's tree into a list of items: every node on
the path in order (label and repair entries are not nodes: never shown), a
tool call with its result folded in, user prompts with their numbers, and
the navigations (rewinds) that left or reached the path shown where they
happened. Each item names its siblings (``alternatives``)
and the leaf of each sibling's branch, so the branches earlier rewinds left
stay reachable: pass such a leaf as ``at`` to read that branch.

A branch's leaf is found by following, from any node, its most recently
appended child until there is none. The log is only read: a session with no
log gives an empty transcript.
"""

from __future__ import annotations

from dataclasses import dataclass

from earshot.agent.core.conversation import log_path
from earshot.agent.core.records import bound_sessions
from earshot.agent.log.entries import (
    AssistantMessage,
    Entry,
    Navigation,
    ToolCall,
    ToolResult,
    UserMessage,
)
from earshot.agent.log.ids import EntryId, resolve_prefix
from earshot.agent.log.logfile import SessionNotFound
from earshot.agent.log.session import Session
from earshot.agent.log.tree import SessionTree
from earshot.cas.project import Project

#: Where a navigation stands on the path shown: the path is where it went
#: ("to", placed after its target), or the branch it left ("from", after its parent).
TO = "to"
FROM = "from"


@dataclass(frozen=True, slots=True)
class Alternative:
    """A sibling of an item: another way the conversation went on from the same point."""

    id: EntryId
    type: str
    #: The first line of a user or assistant message; None for other types.
    first_line: str | None
    #: The leaf of the sibling's branch (its most recent child, and so on down).
    leaf: EntryId


@dataclass(frozen=True, slots=True)
class Item:
    """One thing on the path: a node, or a navigation that touches the path.

    ``n``: a user prompt's number on this path. ``result``: a tool call's
    result, found later on the path. ``where`` (``TO``/``FROM``) and
    ``prompt`` (the number of the prompt it went back before, if one on the
    path follows its target) are a navigation's.
    """

    entry: Entry
    alternatives: tuple[Alternative, ...] = ()
    n: int | None = None
    result: Entry | None = None
    where: str | None = None
    prompt: int | None = None


@dataclass(frozen=True, slots=True)
class Transcript:
    """A session's conversation along one path.

    ``leaf``: the log's current leaf. ``shown``: the last node of the path
    shown. ``current``: the shown path is the current one. ``agent``: the
    agent whose session this is, seen through its hooks (name, its own id).
    """

    session: str
    leaf: EntryId | None
    shown: EntryId | None
    current: bool
    agent: tuple[str, str] | None
    items: tuple[Item, ...]


def read_transcript(project: Project, session_id: str, at: str | None = None) -> Transcript:
    """The session's conversation along its current path, or along the branch holding ``at``.

    ``at``: an entry id or unique prefix (``NoMatchingId``/``AmbiguousId``
    otherwise); the path shown runs from the root to the leaf of its branch.
    A navigation or label entry stands for its parent (the leaf when it was
    written). Nothing is created: a session with no log has no items.
    """
    with project.store.backend.read() as view:
        agent = bound_sessions(view).get(session_id)
    try:
        entries = Session.open(log_path(project, session_id)).entries()
    except SessionNotFound:
        entries = ()
    tree = SessionTree()
    for entry in entries:  # one read, so every answer below is of one state
        tree.add(entry)
    shown = tree.leaf if at is None else _branch_leaf(tree, _node(tree, at))
    items = _items(tree, tree.path(shown))
    return Transcript(session_id, tree.leaf, shown, shown == tree.leaf, agent, tuple(items))


def _node(tree: SessionTree, at: str) -> EntryId | None:
    ident = EntryId(at) if at in tree.entries else resolve_prefix(tree.entries, at, "entry")
    entry = tree.entries[ident]
    return ident if entry.is_node else entry.parent_id


def _branch_leaf(tree: SessionTree, start: EntryId | None) -> EntryId | None:
    """From ``start``, the most recently appended child, down to a node with none."""
    if start is None:
        return None
    ident = start
    while tree.children[ident]:
        ident = tree.children[ident][-1]
    return ident


def _alternatives(tree: SessionTree, entry: Entry) -> tuple[Alternative, ...]:
    out = []
    for sibling in tree.children[entry.parent_id]:
        if sibling == entry.id:
            continue
        other = tree.entries[sibling]
        body = other.body
        first = None
        if isinstance(body, UserMessage | AssistantMessage):
            first = body.text.strip().split("\n", 1)[0]
        leaf = _branch_leaf(tree, sibling)
        assert leaf is not None
        out.append(Alternative(sibling, other.type, first, leaf))
    return tuple(out)


def _items(tree: SessionTree, path: list[Entry]) -> list[Item]:
    on_path = {e.id for e in path}
    numbers = {p.id: p.n for p in tree.prompts(path)}
    before = {e.parent_id: numbers[e.id] for e in path if e.id in numbers}
    # Navigations by the path entry they follow (None: before the first).
    anchored: dict[EntryId | None, list[Item]] = {}
    for entry in tree.entries.values():
        body = entry.body
        if not isinstance(body, Navigation):
            continue
        # One place per navigation: the branch it left, when that is shown,
        # else where it went (a move to where it already was is a "to").
        anchor: EntryId | None
        if entry.parent_id in on_path and entry.parent_id != body.target:
            where, anchor = FROM, entry.parent_id
        elif body.target is None or body.target in on_path:
            where, anchor = TO, body.target
        else:
            continue
        item = Item(entry, where=where, prompt=before.get(body.target))
        anchored.setdefault(anchor, []).append(item)

    out: list[Item] = list(anchored.get(None, ()))
    calls: dict[str, int] = {}  # call id -> index in out of the call awaiting its result
    for entry in path:
        body = entry.body
        folded = False
        if isinstance(body, ToolResult):
            index = calls.pop(body.call_id, None)
            if index is not None:
                call = out[index]
                out[index] = Item(call.entry, call.alternatives, result=entry)
                folded = True
        if not folded:
            if isinstance(body, ToolCall):
                calls[body.call_id] = len(out)
            out.append(Item(entry, _alternatives(tree, entry), n=numbers.get(entry.id)))
        out.extend(anchored.get(entry.id, ()))
    return out
