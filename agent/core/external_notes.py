"""What an open batch of an agent's calls leaves on disk between its events, and
reading it back: its notes, its name for the watch daemon, its last keys.

An agent's batch spans many short processes (``external``): each event
appends JSON lines to the batch intent's notes file, and the next event
rebuilds where the batch stands from them. The notes:

- ``opened`` (the intent's id): the first line, always, written before
  the intent is committed (``Intents.new``); notes without it were cut
  short. Notes that are damaged (``damaged``, ``Notes.damaged``) make the
  batch recorded as an interrupted one is.
- ``state``: snapshot, tree, the daemon's token, exact: what a restage
  recorded; the belief the next event takes up.
- ``begin`` (the call as recorded) with ``call`` and ``key``: a call began.
  ``end`` (what the agent said of it) with ``call``: it ended; an end noted
  after a restage also names the ``tree`` it left and ``by`` whom, by which
  recovery proves who made a change.
- ``span`` ([tree from, tree to]) with ``by``: what changed between two
  restages is that call's; with ``owners`` ({path: call}) each path is its
  owner's, and ``ambiguous`` lists paths that changed both between calls
  and during one.
- ``paths`` and ``token`` on a begin or an end the watch daemon noted itself
  (``watched``): what its watcher saw since the previous note, and the
  token of that instant; ``owner`` says whose (a call's index; null: it
  changed between calls, the person's). ``forced``: what a write names
  (its end's), recorded whatever the ignore rules say, and the call's.
  They wait, *pending*, for the next event that opens the store, which
  restages them at once and notes the span (``settled``: they are done).
- ``gap``: a call that ran with no state recorded before it. ``overlap``:
  another session's batch ran meanwhile. ``subagent`` with ``running``: a
  subagent began or ended.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from earshot.agent.core.batch import BY_RESTAGE
from earshot.agent.core.policy import Belief
from earshot.cas.digest import Digest
from earshot.cas.intents import DAMAGED, OPENED

#: What a batch of an agent's calls keeps in its intent's doc: the agent, its session id.
EXTERNAL = "external"


@dataclass(frozen=True, slots=True)
class Span:
    """What changed from one recorded tree to the next, and whose it is."""

    start: Digest
    end: Digest
    by: int | str
    #: Each path's owner (a call, or None: it changed between calls and is no
    #: call's); None: every path is ``by``'s.
    owners: dict[str, int | None] | None = None
    ambiguous: frozenset[str] = frozenset()

    def owner(self, path: str) -> int | str | None:
        """Who made a change at ``path`` (a path's owner is its nearest listed
        ancestor's: the watcher names a new directory, not each file in it)."""
        if self.owners is None:
            return self.by
        probe = path
        while True:
            if probe in self.owners:
                return self.owners[probe]
            if "/" not in probe:
                return BY_RESTAGE  # changed, yet seen in no range: nobody's for sure
            probe = probe.rpartition("/")[0]


@dataclass(slots=True)
class Pending:
    """What the daemon noted since the last restage: ranges of paths and their owners."""

    ranges: list[tuple[list[str], int | None]] = field(default_factory=list)
    forced: set[str] = field(default_factory=set)

    def paths(self) -> set[str]:
        return {p for paths, _ in self.ranges for p in paths} | self.forced

    def owners(self) -> tuple[dict[str, int | None], set[str]]:
        """Each path's owner (the first call whose range saw it), and the paths
        that changed both between calls and during one."""
        owners: dict[str, int | None] = {}
        between: set[str] = set()
        for paths, owner in self.ranges:
            for path in paths:
                if owner is None:
                    between.add(path)
                    owners.setdefault(path, None)
                elif owners.get(path) is None:
                    owners[path] = owner
        ambiguous = {p for p in between if owners.get(p) is not None}
        return owners, ambiguous


@dataclass(slots=True)
class Notes:
    """An open batch's progress, read back from its intent's notes."""

    calls: list[dict[str, Any]] = field(default_factory=list)
    #: The agent's key of each call -> the calls with it (two identical calls
    #: of an agent that gives no ids share one), in the order they began.
    keys: dict[str, list[int]] = field(default_factory=dict)
    #: Calls begun and not ended, in the order they began.
    running: list[int] = field(default_factory=list)
    spans: list[Span] = field(default_factory=list)
    #: The snapshot of the believed tree, and the belief.
    snapshot: Digest | None = None
    belief: Belief = field(default_factory=Belief)
    pending: Pending = field(default_factory=Pending)
    folded: bool = False
    overlap: bool = False
    #: Subagents begun and not ended.
    subagents: set[str] = field(default_factory=set)
    #: Why the notes cannot be trusted (cut short, replaced, a note that does
    #: not read): the batch is then recorded as an interrupted one is.
    damaged: str | None = None

    @property
    def watched(self) -> bool:
        """Whether the daemon may note this batch's events itself: its belief is
        exact and its token the daemon's."""
        return self.belief.exact and isinstance(self.belief.token, str)

    @staticmethod
    def read(notes: list[dict[str, Any]]) -> Notes:
        out = Notes()
        if not notes or OPENED not in notes[0]:
            out.damaged = "the notes were cut short (their first line is gone)"
        for note in notes:
            if DAMAGED in note:
                out.damaged = str(note[DAMAGED])
                continue
            try:
                out._take(note)
            except (ValueError, KeyError, TypeError, IndexError, AttributeError):
                out.damaged = f"a note does not read: {json.dumps(note)[:80]}"
        return out

    def _take(self, note: dict[str, Any]) -> None:
        state = note.get("state")
        if isinstance(state, dict):
            self.snapshot = digest(state["snap"])
            self.belief = Belief(
                digest(state["tree"]), bool(state.get("exact")), state.get("token")
            )
        if isinstance(note.get("begin"), dict):
            index = len(self.calls)
            self.calls.append(note["begin"])
            self.keys.setdefault(str(note.get("key")), []).append(index)
            self.running.append(index)
        elif isinstance(note.get("end"), dict):
            index = int(note["call"])
            if index in self.running:
                self.running.remove(index)
            if 0 <= index < len(self.calls):
                self.calls[index] = {**self.calls[index], **note["end"]}
            self.folded |= bool(note.get("folded"))
        elif isinstance(note.get("gap"), dict):
            self.calls.append(note["gap"])
        if isinstance(note.get("paths"), list) and isinstance(note.get("token"), str):
            owner = note.get("owner")
            forced = [str(p) for p in note.get("forced") or ()]
            self.pending.ranges.append(
                ([*map(str, note["paths"]), *forced], owner if isinstance(owner, int) else None)
            )
            self.pending.forced.update(forced)
            self.belief = Belief(self.belief.tree, self.belief.exact, note["token"])
        if note.get("settled"):
            self.pending = Pending()
        if isinstance(note.get("span"), list):
            start, end = note["span"]
            owners = note.get("owners")
            self.spans.append(
                Span(
                    digest(start),
                    digest(end),
                    note.get("by", BY_RESTAGE),
                    dict(owners) if isinstance(owners, dict) else None,
                    frozenset(note.get("ambiguous") or ()),
                )
            )
        self.overlap |= bool(note.get("overlap"))
        subagent = note.get("subagent")
        if isinstance(subagent, str):
            if note.get("running"):
                self.subagents.add(subagent)
            else:
                self.subagents.discard(subagent)


def digest(text: Any) -> Digest:
    return Digest(bytes.fromhex(str(text)))


def recorded_calls(notes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The calls an open batch's notes name, as its record lists them (for recovery)."""
    return Notes.read(notes).calls


def pointer(store_dir: Path, agent: str, agent_session: str) -> Path:
    """Where an agent session's open batch is named for the watch daemon, which
    cannot read the store: its earshot session, intent and root (``watched``)."""
    key = hashlib.sha256(f"{agent}\0{agent_session}".encode()).hexdigest()[:32]
    return store_dir / "external" / "open" / key


def point(store_dir: Path, agent: str, agent_session: str, doc: dict[str, Any]) -> None:
    """Name an open batch for the watch daemon (``doc``: session, intent, root,
    whether its watcher vouches, the linked files), replacing any earlier name."""
    path = pointer(store_dir, agent, agent_session)
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    temp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    temp.write_text(json.dumps(doc))
    os.replace(temp, path)


def unpoint(store_dir: Path, intent_doc: dict[str, Any]) -> None:
    """Take the daemon's name for a batch away: it has been committed."""
    named = intent_doc.get(EXTERNAL) or {}
    if named.get("agent_session"):
        path = pointer(store_dir, str(named["agent"]), str(named["agent_session"]))
        with contextlib.suppress(OSError):
            path.unlink()


def closed_file(store_dir: Path, session: str) -> Path:
    """Where the agent's keys of a session's last committed batch are kept."""
    return store_dir / "external" / f"{session}.closed"


def recently_closed(store_dir: Path, session: str) -> set[str]:
    """The agent's keys of the calls of the session's last committed batch: an end
    reported after its batch closed is known as recorded, not a gap."""
    try:
        keys = json.loads(closed_file(store_dir, session).read_text())
    except (OSError, ValueError):
        return set()
    return {str(k) for k in keys} if isinstance(keys, list) else set()
