"""The conversation tree of a session, built entry by entry in file order.

Nodes are every entry but navigation, label and repair entries (see
``META_TYPES``). A node's parent is an earlier node (or None: a root), so the
tree cannot hold a cycle. The current leaf is the last node added, unless a
later navigation entry moved it.
"""

from __future__ import annotations

from dataclasses import dataclass

from earshot.agent.log.entries import (
    MESSAGE_TYPES,
    Compaction,
    Entry,
    Label,
    Navigation,
    Repair,
    ToolCall,
    ToolResult,
    UserMessage,
)
from earshot.agent.log.ids import EntryId
from earshot.cas.errors import EarshotError


class TreeError(EarshotError):
    """An entry that does not fit the tree built so far."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True, slots=True)
class Prompt:
    """A user prompt on a path, numbered from 1 along it.

    ``alternatives`` counts the ways the conversation went on from the point
    just before this prompt (this prompt included): more than one means an
    earlier rewind left another branch there.
    """

    n: int
    id: EntryId
    ts: str
    text: str
    alternatives: int

    @property
    def first_line(self) -> str:
        return self.text.strip().split("\n", 1)[0]

    @property
    def has_branches(self) -> bool:
        return self.alternatives > 1


class SessionTree:
    """Entries by id, children by parent, labels and the current leaf."""

    def __init__(self) -> None:
        self.entries: dict[EntryId, Entry] = {}
        # Every node has a (maybe empty) list, and None lists the roots, so
        # "is x a node" is one dict lookup on the load path.
        self.children: dict[EntryId | None, list[EntryId]] = {None: []}
        self.labels: dict[EntryId, str] = {}
        self.leaf: EntryId | None = None
        self.last_ts: str | None = None

    def is_node(self, ident: EntryId) -> bool:
        return ident is not None and ident in self.children

    def add(self, entry: Entry) -> None:
        """Add the next entry of the file; ``TreeError`` if it cannot be there."""
        ident = entry.id
        entries = self.entries
        children = self.children
        if ident in entries:
            raise TreeError(f"id {ident} is used twice")
        parent = entry.parent_id
        siblings = children.get(parent)
        if siblings is None:
            raise TreeError(f"parent {parent} is not an earlier entry")
        body = entry.body
        kind = type(body)
        if kind is Navigation:
            assert isinstance(body, Navigation)
            if body.target is not None and body.target not in children:
                raise TreeError(f"navigation target {body.target} is not an earlier entry")
            self.leaf = body.target
        elif kind is Label:
            assert isinstance(body, Label)
            if body.target not in children:
                raise TreeError(f"label target {body.target} is not an earlier entry")
            if body.label:
                self.labels[body.target] = body.label
            else:
                self.labels.pop(body.target, None)
        elif kind is not Repair:
            siblings.append(ident)
            children[ident] = []
            self.leaf = ident
        entries[ident] = entry
        self.last_ts = entry.ts

    def path(self, leaf: EntryId | None) -> list[Entry]:
        """The nodes from a root down to ``leaf`` (empty for None)."""
        out: list[Entry] = []
        entries = self.entries
        ident = leaf
        while ident is not None:
            entry = entries[ident]
            out.append(entry)
            ident = entry.parent_id
        out.reverse()
        return out

    def prompts(self, path: list[Entry]) -> list[Prompt]:
        """The user prompts on ``path``, numbered."""
        out: list[Prompt] = []
        for entry in path:
            body = entry.body
            if isinstance(body, UserMessage):
                alternatives = len(self.children.get(entry.parent_id, ()))
                out.append(Prompt(len(out) + 1, entry.id, entry.ts, body.text, alternatives))
        return out


def context_of(path: list[Entry]) -> list[Entry]:
    """What the model sees of ``path``: messages, the latest compaction applied.

    With a compaction on the path, the model sees its summary (the compaction
    entry itself), then the messages from its ``first_kept_id`` up to it, then
    the messages after it. Earlier compactions inside the kept range are
    superseded (a summary covers the one before it). A ``first_kept_id`` not
    on the path (``check`` reports it) keeps nothing: the summary stands for
    all. Permission, batch and unknown entries are never part of the context.
    """
    cut = -1
    for index in range(len(path) - 1, -1, -1):
        if isinstance(path[index].body, Compaction):
            cut = index
            break
    if cut < 0:
        return [e for e in path if isinstance(e.body, MESSAGE_TYPES)]
    compaction = path[cut]
    assert isinstance(compaction.body, Compaction)
    first = compaction.body.first_kept_id
    start = cut
    if first is not None:
        for index in range(cut):
            if path[index].id == first:
                start = index
                break
    kept = [e for e in path[start:cut] if isinstance(e.body, MESSAGE_TYPES)]
    after = [e for e in path[cut + 1 :] if isinstance(e.body, MESSAGE_TYPES)]
    return [compaction, *kept, *after]


def open_tool_calls(context: list[Entry]) -> list[Entry]:
    """The tool calls in ``context`` that no later tool result answers, in order."""
    waiting: dict[str, Entry] = {}
    for entry in context:
        body = entry.body
        if isinstance(body, ToolCall):
            waiting[body.call_id] = entry
        elif isinstance(body, ToolResult):
            waiting.pop(body.call_id, None)
    return list(waiting.values())
