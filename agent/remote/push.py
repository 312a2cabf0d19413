"""push: what a remote lacks of a root's sessions, then a reference for each.

A push sends what the remote lacks, then one new reference per session,
last: a push cut at any instant leaves the remote naming nothing missing,
and the next push finds what arrived (the index files written after each
pack) and sends only the rest. A push refuses a session whose remote state
holds batches or log lines this root lacks (pushed from elsewhere): pull
first. Two pushes at once each write a reference of their own; neither
overwrites the other.
"""

from __future__ import annotations

import socket
import time
from dataclasses import dataclass

from earshot.agent.core.records import (
    OUTSIDE,
    all_sessions,
)
from earshot.cas import faults
from earshot.cas.digest import Digest, blob_digest
from earshot.cas.progress import QUIET, Progress
from earshot.cas.project import Project
from earshot.cas.remote import locks
from earshot.cas.remote.repository import Repository
from earshot.cas.remote.transfer import Sent, missing_objects, send

from . import bundle
from .bundle import SessionState
from .heads import Diverged, NoSuchSession, states, summary

#: The format of the references a push writes.
FORMAT = 1


@dataclass
class Pushed:
    session: str
    ref: str | None
    objects: int = 0
    bytes: int = 0
    packs: int = 0
    batches: int = 0
    #: The newest batch was folded (its changes land in the next snapshot):
    #: what it did is not in what was pushed yet.
    folded: bool = False


def pushable_sessions(project: Project) -> list[str]:
    with project.store.backend.read() as view:
        return [r.id for r in all_sessions(view) if r.id != OUTSIDE]


def push(
    project: Project, repo: Repository, sessions: list[str], progress: Progress = QUIET
) -> tuple[list[Pushed], list[str]]:
    """Push each session; (what was pushed or up to date, why each other one was
    refused: a session the remote holds more of is left for a pull, the rest go)."""
    out, refused = [], []
    with locks.shared(repo) as lock:
        for session in sessions:
            if session == OUTSIDE:
                raise NoSuchSession("'outside' belongs to this root alone; it is not pushed")
            try:
                out.append(_push_one(project, repo, session, progress, lock))
            except Diverged as exc:
                refused.append(str(exc))
    return out, refused


def _push_one(
    project: Project, repo: Repository, session: str, progress: Progress, lock: locks.Lock
) -> Pushed:
    state = bundle.local_state(project, session)
    if state is None:
        raise NoSuchSession(f"no session {session} in this root's store")
    heads, pushes = states(repo, session)
    for ref, doc in heads:
        if not state.holds(*summary(doc)):
            raise Diverged(
                f"the remote holds batches or messages of session {session} this root lacks "
                f"(pushed from {doc.get('host', 'elsewhere')}, reference {ref.push}); "
                "'earshot pull' it first. It was not pushed"
            )
    if len(heads) == 1 and summary(heads[0][1]) == _statesummary(state):
        return Pushed(session, None, batches=len(state.batches), folded=_folded(state))
    body = bundle.encode(state)
    loose = {blob_digest(body): body, blob_digest(state.log): state.log}
    sent = _send_session(project, repo, state, loose, progress, lock)
    lock.refresh()
    if lock.lapsed:
        # Asleep past the lock's lease: a gc may have dropped objects this
        # push found on the remote and did not send, or packs it sent and had
        # not indexed yet. Everything the session names is looked up again,
        # in the index as it is now and in the packs there are; what is not
        # there is sent.
        lock.write()
        again = _send_session(project, repo, state, loose, progress, lock, recheck=True)
        sent = Sent(
            sent.objects + again.objects, sent.bytes + again.bytes, sent.packs + again.packs
        )
    log_size, log_digest = state.log_summary()
    doc = {
        "format": FORMAT,
        "time_ns": time.time_ns(),
        "host": socket.gethostname(),
        "snapshots": [d.hex() for d in state.snapshots()],
        "blobs": [d.hex() for d in (*loose, *state.ledger_blobs())],
        # Every earlier reference of the session: this one holds each head
        # whole (else it was refused above), and the heads hold the rest.
        "includes": sorted(pushes),
        "meta": {
            "session": session,
            "bundle": blob_digest(body).hex(),
            "log_blob": blob_digest(state.log).hex(),
            "log": [log_size, log_digest],
            "batches": {str(k): v for k, v in state.identities().items()},
        },
    }
    faults.point("remote-ref-ready")
    ref = repo.put_ref(session, doc)
    return Pushed(
        session, ref.path, sent.objects, sent.bytes, sent.packs, len(state.batches), _folded(state)
    )


def _folded(state: SessionState) -> bool:
    return bool(state.batches) and state.batches[-1].folded


def _send_session(
    project: Project,
    repo: Repository,
    state: SessionState,
    loose: dict[Digest, bytes],
    progress: Progress,
    lock: locks.Lock,
    recheck: bool = False,
) -> Sent:
    index = repo.index(refresh=recheck)
    packs = (
        {listed.name.split("/", 1)[1] for listed in repo.storage.listing("data")}
        if recheck
        else None
    )

    def has(digest: Digest) -> bool:
        entry = index.get(digest)
        return entry is not None and (packs is None or entry.pack in packs)

    if recheck:
        loose = {d: data for d, data in loose.items() if not has(d)}
    with project.store.reader() as reader:
        data, meta = missing_objects(
            reader, state.snapshots(), state.ledger_blobs(), has, whole=recheck
        )
        return send(repo, reader, data, meta, progress, lock, loose=loose, force=recheck)


def _statesummary(state: SessionState) -> tuple[dict[int, str], int, str]:
    return (state.identities(), *state.log_summary())
