"""A session as it travels: its record, its batches, its log, and what they name.

A push sends a *bundle* (one JSON document: the session's record and every
batch with its ledger) and the session's log file, each as a content object,
and a reference naming both, the snapshots the batches name and the contents
their ledgers name (undo brings those back), so the remote's gc keeps them.

Whether one state of a session holds another: every batch of the older is
in the newer with the same *identity* (its record without the marks a later
undo or redo sets on it), and the older log is a prefix of the newer (logs
are append-only).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import blake3

from earshot.agent.core.batch import Batch
from earshot.agent.core.conversation import log_path
from earshot.agent.core.records import (
    SessionRecord,
    get_session,
    session_batches,
)
from earshot.cas.digest import Digest
from earshot.cas.errors import EarshotError
from earshot.cas.project import Project

FORMAT = 1
#: Set on a batch after it was recorded; not part of what the batch is.
_MARKS = ("undone_by", "redone_by")


class BadBundle(EarshotError):
    def __init__(self, why: str) -> None:
        super().__init__(f"a session on the remote cannot be read ({why}); nothing was changed")


@dataclass(frozen=True)
class SessionState:
    """One session's state, local or from a remote."""

    record: SessionRecord
    batches: tuple[Batch, ...]
    log: bytes

    def identities(self) -> dict[int, str]:
        return {b.seq: identity(b) for b in self.batches}

    def log_summary(self) -> tuple[int, str]:
        return len(self.log), blake3.blake3(self.log).hexdigest()

    def holds(self, batches: dict[int, str], log_size: int, log_digest: str) -> bool:
        """Whether this state holds one summarised by its batch identities and log."""
        mine = self.identities()
        if any(mine.get(seq) != ident for seq, ident in batches.items()):
            return False
        return (
            len(self.log) >= log_size
            and blake3.blake3(self.log[:log_size]).hexdigest() == log_digest
        )

    def snapshots(self) -> list[Digest]:
        return list(
            dict.fromkeys(d for b in self.batches for d in (b.before, b.after) if d is not None)
        )

    def ledger_blobs(self) -> list[Digest]:
        return list(
            dict.fromkeys(
                state.digest
                for b in self.batches
                for line in b.ledger
                for state in (line.before, line.after)
                if state is not None and state.digest is not None
            )
        )

    def latest(self) -> Digest | None:
        """The state the session's newest batch left."""
        for batch in reversed(self.batches):
            if batch.after is not None:
                return batch.after
        return None


def identity(batch: Batch) -> str:
    doc = {k: v for k, v in batch.to_json().items() if k not in _MARKS}
    return blake3.blake3(json.dumps(doc, sort_keys=True).encode()).hexdigest()


def local_state(project: Project, session: str) -> SessionState | None:
    with project.store.backend.read() as view:
        record = get_session(view, session)
        if record is None:
            return None
        batches = tuple(session_batches(view, session))
    return SessionState(record, batches, read_log(log_path(project, session)))


def read_log(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return b""


def encode(state: SessionState) -> bytes:
    doc: dict[str, Any] = {
        "format": FORMAT,
        "session": state.record.to_json(),
        "batches": [b.to_json() for b in state.batches],
    }
    return json.dumps(doc, sort_keys=True).encode()


def decode(data: bytes, log: bytes, session: str) -> SessionState:
    try:
        doc = json.loads(data)
        if int(doc["format"]) > FORMAT:
            raise BadBundle(f"format {doc['format']} is newer than this earshot reads")
        record = SessionRecord.from_json(doc["session"])
        batches = tuple(Batch.from_json(b) for b in doc["batches"])
    except BadBundle:
        raise
    except (ValueError, KeyError, TypeError) as exc:
        raise BadBundle(f"{type(exc).__name__}: {exc}") from None
    if record.id != session or any(b.session != session for b in batches):
        raise BadBundle("its batches belong to another session")
    return SessionState(record, tuple(sorted(batches, key=lambda b: b.seq)), log)
