"""The checkpoint records of the agent layer: batches, their ledgers, sessions.

They live in the project's own store, in three tables of the agent's own
beside the store's (``earshot.cas.schema``), and only this module names them
or lays out their keys:

| table | key | value |
|---|---|---|
| ``batches`` | session id + ``/`` + 4-byte sequence number | a sealed JSON batch |
| ``sessions`` | session id | a sealed JSON session record |
| ``agent`` | ``records-version`` | ``1``: the records are sealed |
| | ``watch-mark`` | JSON: the daemon token and tree the last exact batch ended on |
| | ``settled`` | JSON: the state the last batch of any session ended on, when known exactly |
| | ``recent-batches`` | JSON: (session, start, end) of the last 64 batches of any session |
| | ``bound/<agent>/<its session>`` | sealed JSON: the earshot session an agent's maps to |

Batch and session values are small JSON documents, read a few at a time, by
people as much as by code (``earshot log --json``), each sealed with a digest
of its key and content (``earshot.cas.sealed``): a ledger with one flipped
byte would name another path, so a damaged record is refused as
``CorruptRecord``, never read.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from typing import Any

from earshot.agent.core.batch import Batch
from earshot.cas import schema
from earshot.cas.backend import Backend, ReadView, WriteBatch
from earshot.cas.digest import Digest
from earshot.cas.sealed import CorruptRecord, is_sealed, seal_json, unseal_json

BATCHES = "batches"
SESSIONS = "sessions"
AGENT = "agent"
#: The tables a project opened for the agent needs (``Project(extra_tables=TABLES)``).
TABLES = (BATCHES, SESSIONS, AGENT)
#: The version of the agent's records: 1 = sealed.
_RECORDS_KEY = b"records-version"
_RECORDS_VERSION = b"1"
_WATCH_MARK = b"watch-mark"
_SETTLED = b"settled"
#: The pseudo-session of changes made outside any call (``outside``): it has
#: batches, numbered as a session's, but no conversation and no agent.
OUTSIDE = "outside"
_RECENT = b"recent-batches"
#: How many batches' spans are kept to tell whether two sessions overlapped.
_RECENT_KEEP = 64


@dataclass(frozen=True, slots=True)
class SessionRecord:
    """A session's checkpoint state, persisted so a later process knows it."""

    id: str
    created_ns: int
    touched_ns: int
    next_seq: int = 1
    #: Every path this session's write_file calls have written.
    written: tuple[str, ...] = field(default=())

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "created_ns": self.created_ns,
            "touched_ns": self.touched_ns,
            "next_seq": self.next_seq,
            "written": list(self.written),
        }

    @staticmethod
    def from_json(doc: dict[str, Any]) -> SessionRecord:
        return SessionRecord(
            id=doc["id"],
            created_ns=int(doc["created_ns"]),
            touched_ns=int(doc["touched_ns"]),
            next_seq=int(doc["next_seq"]),
            written=tuple(doc.get("written", ())),
        )

    def touched(self, now_ns: int) -> SessionRecord:
        return replace(self, touched_ns=now_ns)


def _batch_key(session: str, seq: int) -> bytes:
    return session.encode() + b"/" + seq.to_bytes(4, "big")


def _batch_name(key: bytes) -> str:
    session, _, seq = key.rpartition(b"/")
    return f"batch {int.from_bytes(seq, 'big')} of session {session.decode(errors='replace')}"


def _load(cls: Any, key: bytes, value: bytes, what: str, **options: Any) -> Any:
    """A record from its sealed JSON; ``CorruptRecord`` for anything that does not fit."""
    doc = unseal_json(key, value, what)
    try:
        return cls.from_json(doc, **options)
    # OverflowError: a number of 1e999 is JSON, and infinity is no int.
    except (KeyError, TypeError, ValueError, AttributeError, OverflowError) as exc:
        raise CorruptRecord(what, f"sealed, but not a record: {exc!r}") from None


def put_batch(batch_writer: WriteBatch, batch: Batch) -> None:
    if batch.changes >= 0:  # read without its ledger: writing it would drop the ledger
        raise ValueError(f"batch {batch.seq} was read without its ledger; not written back")
    key = _batch_key(batch.session, batch.seq)
    batch_writer.put(BATCHES, key, seal_json(key, batch.to_json()))


def get_batch(view: ReadView, session: str, seq: int) -> Batch | None:
    key = _batch_key(session, seq)
    raw = view.get(BATCHES, key)
    return None if raw is None else _load(Batch, key, raw, _batch_name(key))


def session_batches(view: ReadView, session: str, ledgers: bool = True) -> list[Batch]:
    """A session's batches in sequence order (without ``ledgers``: lines only counted)."""
    prefix = session.encode() + b"/"
    return [
        _load(Batch, k, v, _batch_name(k), ledger=ledgers) for k, v in view.items(BATCHES, prefix)
    ]


def count_batches(view: ReadView, session: str) -> int:
    """How many batches a session has, without reading them."""
    return sum(1 for _ in view.items(BATCHES, session.encode() + b"/"))


def has_batches(view: ReadView, session: str) -> bool:
    """Whether a session has a batch, reading one key at most."""
    return any(True for _ in view.items(BATCHES, session.encode() + b"/"))


def delete_session_batches(batch_writer: WriteBatch, session: str) -> int:
    prefix = session.encode() + b"/"
    keys = [k for k, _ in batch_writer.items(BATCHES, prefix)]
    for key in keys:
        batch_writer.delete(BATCHES, key)
    return len(keys)


def delete_batch(batch_writer: WriteBatch, session: str, seq: int) -> None:
    batch_writer.delete(BATCHES, _batch_key(session, seq))


def delete_session(batch_writer: WriteBatch, session: str) -> int:
    """Drop a session's record and every batch of it; return how many batches."""
    batch_writer.delete(SESSIONS, session.encode())
    return delete_session_batches(batch_writer, session)


def put_session(batch_writer: WriteBatch, record: SessionRecord) -> None:
    key = record.id.encode()
    batch_writer.put(SESSIONS, key, seal_json(key, record.to_json()))


def get_session(view: ReadView, session: str) -> SessionRecord | None:
    key = session.encode()
    raw = view.get(SESSIONS, key)
    return None if raw is None else _load(SessionRecord, key, raw, f"session {session}")


def all_sessions(view: ReadView, *, outside: bool = False) -> list[SessionRecord]:
    """Every session's record; with ``outside``, the pseudo-session ``OUTSIDE`` too."""
    return [
        _load(SessionRecord, k, v, f"session {k.decode(errors='replace')}")
        for k, v in view.items(SESSIONS)
        if outside or k != OUTSIDE.encode()
    ]


def check_records(view: ReadView) -> tuple[int, list[str]]:
    """Check every batch and session record: sealed, readable, and naming snapshots
    the store holds. Returns how many were checked and one line per problem."""
    problems = []
    count = 0
    for table, cls in ((SESSIONS, SessionRecord), (BATCHES, Batch)):
        for key, value in view.items(table):
            count += 1
            what = (
                _batch_name(key) if table == BATCHES else f"session {key.decode(errors='replace')}"
            )
            try:
                record = _load(cls, key, value, what)
            except CorruptRecord as exc:
                problems.append(str(exc).removesuffix("; run 'earshot fsck'"))
                continue
            if isinstance(record, Batch):
                for name, digest in (("before", record.before), ("after", record.after)):
                    if digest is not None and schema.get_location(view, digest) is None:
                        problems.append(
                            f"{what}: its state {name} ({digest.hex()[:12]}) is missing"
                        )
                problems.extend(_ledger_gaps(view, record, what))
    return count, problems


def _ledger_gaps(view: ReadView, batch: Batch, what: str) -> list[str]:
    """One line if the batch's ledger names contents the store lacks (undo would
    stop there), with the first of them."""
    missing = [
        (line.path, name, digest)
        for line in batch.ledger
        for name, state in (("before", line.before), ("after", line.after))
        if state is not None
        and (digest := state.digest) is not None
        and not schema.has_location(view, digest)
    ]
    if not missing:
        return []
    path, name, digest = missing[0]
    more = f", and {len(missing) - 1} more" if len(missing) > 1 else ""
    return [
        f"{what}: its ledger names contents the store lacks ({path!r} {name} it, "
        f"{digest.hex()[:12]}{more})"
    ]


def upgrade_records(backend: Backend) -> int:
    """Seal the records of a store written before records were sealed; return how many.

    One transaction: a kill leaves the store as it was, and the upgrade runs
    again. A legacy record that is not even JSON stays as it is, and is
    reported as damaged from then on.
    """
    with backend.read() as view:
        if view.get(AGENT, _RECORDS_KEY) == _RECORDS_VERSION:
            return 0
        if not any(True for table in (BATCHES, SESSIONS) for _ in view.items(table)):
            return 0  # nothing written yet: what will be is sealed
    count = 0
    with backend.write() as txn:
        for table in (BATCHES, SESSIONS):
            for key, value in list(txn.items(table)):
                if is_sealed(key, value):
                    continue
                try:
                    doc = json.loads(value)
                except (ValueError, RecursionError):  # nested past what json reads
                    continue
                txn.put(table, key, seal_json(key, doc))
                count += 1
        txn.put(AGENT, _RECORDS_KEY, _RECORDS_VERSION)
    return count


@dataclass(frozen=True, slots=True)
class WatchMark:
    """The watch daemon's token and the tree it vouched for when the last exact
    batch committed: a later process may trust the watcher from there instead
    of walking the tree."""

    token: str
    tree: Digest


def load_watch_mark(view: ReadView) -> WatchMark | None:
    raw = view.get(AGENT, _WATCH_MARK)
    if raw is None:
        return None
    try:
        doc = json.loads(raw)
        return WatchMark(str(doc["token"]), Digest(bytes.fromhex(doc["tree"])))
    except (ValueError, KeyError, TypeError, RecursionError):
        return None  # a cache: a damaged mark costs one full restage


def put_watch_mark(txn: WriteBatch, mark: WatchMark | None) -> None:
    """Set the mark, or (None) drop it: nothing vouches for the tree any more."""
    if mark is None:
        txn.delete(AGENT, _WATCH_MARK)
    else:
        doc = {"token": mark.token, "tree": mark.tree.hex()}
        txn.put(AGENT, _WATCH_MARK, json.dumps(doc).encode())


def note_batch_span(txn: WriteBatch, session: str, started_ns: int, ended_ns: int) -> bool:
    """Note that a batch of ``session`` ran from ``started_ns`` to ``ended_ns``;
    return whether a batch of another session ended after this one began.

    Two agents in one checkout (two terminals, an agent beside earshot chat):
    what changed while both ran cannot be told apart by diffing trees.
    """
    recent = _recent_spans(txn) or []
    beside = _ended_after(recent, session, started_ns)
    recent = [*recent[-(_RECENT_KEEP - 1) :], [session, started_ns, ended_ns]]
    txn.put(AGENT, _RECENT, json.dumps(recent).encode())
    return beside


def others_ended_since(view: ReadView, session: str, started_ns: int) -> bool:
    """Whether a batch of another session ended after ``started_ns`` (the
    spans ``note_batch_span`` keeps): what changed meanwhile may be its."""
    recent = _recent_spans(view)
    return True if recent is None else _ended_after(recent, session, started_ns)


def _recent_spans(view: ReadView) -> list[Any] | None:
    """The recent batch spans ``[session, started_ns, ended_ns]``; None: damaged."""
    raw = view.get(AGENT, _RECENT)
    try:
        recent = json.loads(raw) if raw else []
    except (ValueError, RecursionError):
        return None
    return recent if isinstance(recent, list) else None


def _ended_after(recent: list[Any], session: str, started_ns: int) -> bool:
    return any(
        isinstance(item, list)
        and len(item) == 3
        and isinstance(item[2], int | float)  # a damaged span is no span
        and item[0] != session
        and item[2] > started_ns
        for item in recent
    )


def _bound_key(agent: str, agent_session: str) -> bytes:
    return f"bound/{agent}/{agent_session}".encode()


def get_bound_session(view: ReadView, agent: str, agent_session: str) -> str | None:
    """The earshot session an agent's session (seen through its hooks) maps to."""
    key = _bound_key(agent, agent_session)
    raw = view.get(AGENT, key)
    if raw is None:
        return None
    doc = unseal_json(key, raw, f"the session of {agent} session {agent_session}")
    session = doc.get("session") if isinstance(doc, dict) else None
    if not isinstance(session, str):
        raise CorruptRecord(f"the session of {agent} session {agent_session}", "no session id")
    return session


def put_bound_session(txn: WriteBatch, agent: str, agent_session: str, session: str) -> None:
    key = _bound_key(agent, agent_session)
    doc = {"agent": agent, "agent_session": agent_session, "session": session}
    txn.put(AGENT, key, seal_json(key, doc))


def unbind_session(txn: WriteBatch, session: str) -> None:
    """Drop every agent session's mapping to ``session`` (it is being removed)."""
    doomed = []
    for key, value in txn.items(AGENT, b"bound/"):
        try:
            doc = unseal_json(key, value, key.decode(errors="replace"))
        except CorruptRecord:
            continue
        if isinstance(doc, dict) and doc.get("session") == session:
            doomed.append(key)
    for key in doomed:
        txn.delete(AGENT, key)


def bound_sessions(view: ReadView) -> dict[str, tuple[str, str]]:
    """Every earshot session an agent's session maps to -> (agent, its session id)."""
    out: dict[str, tuple[str, str]] = {}
    for key, value in view.items(AGENT, b"bound/"):
        try:
            doc = unseal_json(key, value, key.decode(errors="replace"))
            out[str(doc["session"])] = (str(doc["agent"]), str(doc["agent_session"]))
        except (CorruptRecord, KeyError, TypeError):
            continue  # a damaged binding: that session just shows no agent
    return out


@dataclass(frozen=True, slots=True)
class Settled:
    """The state the last batch of any session ended on, known exactly: what
    differs from it when the next batch begins changed outside any call."""

    snapshot: Digest
    session: str
    seq: int
    #: Process groups its commands left running, with their command: what
    #: they change while they run is that session's.
    left: tuple[tuple[int, str], ...] = ()


def load_settled(view: ReadView) -> Settled | None:
    raw = view.get(AGENT, _SETTLED)
    if raw is None:
        return None
    try:
        doc = json.loads(raw)
        left = tuple((int(g), str(c)) for g, c in doc.get("left", ()))
        return Settled(
            Digest(bytes.fromhex(doc["snapshot"])), str(doc["session"]), int(doc["seq"]), left
        )
    # AttributeError: JSON other than an object; OverflowError: a number of 1e999.
    except (ValueError, KeyError, TypeError, AttributeError, OverflowError, RecursionError):
        return None  # damaged: changes until the next batch are not told apart, nothing more


def put_settled(txn: WriteBatch, settled: Settled | None) -> None:
    """Set the settled state, or (None) drop it: the tree now is not known exactly."""
    if settled is None:
        txn.delete(AGENT, _SETTLED)
        return
    doc = {
        "snapshot": settled.snapshot.hex(),
        "session": settled.session,
        "seq": settled.seq,
        "left": [list(item) for item in settled.left],
    }
    txn.put(AGENT, _SETTLED, json.dumps(doc).encode())
