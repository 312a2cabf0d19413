"""push, pull and clone: sessions between a root's store and a remote.

A push sends what the remote lacks, then one new reference per session,
last: a push cut at any instant leaves the remote naming nothing missing,
and the next push finds what arrived (the index files written after each
pack) and sends only the rest. A push refuses a session whose remote state
holds batches or log lines this root lacks (pushed from elsewhere): pull
first. Two pushes at once each write a reference of their own; neither
overwrites the other.

A pull fetches the newest state of a session (the one reference no other
holds), every object checked, then writes the log and last the records: the
session is there whole or not at all. A local session that holds something
the remote lacks is refused as diverged, never overwritten.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import socket
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import blake3

from earshot.agent.core.conversation import log_dir, log_path
from earshot.agent.core.records import (
    OUTSIDE,
    TABLES,
    SessionRecord,
    all_sessions,
    get_batch,
    put_batch,
    put_session,
)
from earshot.cas import faults
from earshot.cas.digest import Digest, blob_digest
from earshot.cas.errors import EarshotError
from earshot.cas.paths import checkpoints_dir, sessions_dir
from earshot.cas.progress import QUIET, Progress
from earshot.cas.project import Project
from earshot.cas.remote import locks
from earshot.cas.remote.repository import RefName, Repository
from earshot.cas.remote.transfer import Fetcher, Sent, missing_objects, send

from . import bundle
from .bundle import SessionState

FORMAT = 1


class Diverged(EarshotError):
    """Both sides hold something of a session the other lacks."""


class NoSuchSession(EarshotError):
    pass


@dataclass
class Pushed:
    session: str
    ref: str | None
    objects: int = 0
    bytes: int = 0
    packs: int = 0
    batches: int = 0


@dataclass
class Pulled:
    session: str
    batches: int = 0
    new_batches: int = 0
    objects: int = 0
    bytes: int = 0
    requests: int = 0
    up_to_date: bool = False


@dataclass
class RemoteSession:
    session: str
    batches: int
    time_ns: int
    host: str
    heads: int
    refs: list[str] = field(default_factory=list)


# -- references of one session -------------------------------------------------


Refs = list[tuple[RefName, dict[str, Any]]]


def _heads(
    repo: Repository, session: str, refs: list[RefName] | None = None
) -> tuple[Refs, list[str]]:
    """(this session's states no other holds: its references with their
    documents; every push id of the session).

    Read newest first: a reference lists every earlier one its push held, so
    a session pushed from one place costs one read however many pushes it
    had. A reference of the same state as a newer head (two pushes of one
    state at once) is that head.
    """
    key = repo.session_key(session)
    mine = sorted(
        (r for r in (repo.refs() if refs is None else refs) if r.session_key == key),
        key=lambda r: r.push,
        reverse=True,
    )
    held: set[str] = set()
    heads: Refs = []
    for ref in mine:
        if ref.push in held:
            continue
        doc = repo.read_ref(ref)
        held.update(p for p in doc.get("includes", []) if isinstance(p, str))
        if not any(_summary(doc) == _summary(other) for _, other in heads):
            heads.append((ref, doc))
    return heads, [r.push for r in mine]


def _summary(doc: dict[str, Any]) -> tuple[dict[int, str], int, str]:
    meta = doc.get("meta", {})
    try:
        batches = {int(k): str(v) for k, v in meta["batches"].items()}
        size, digest = meta["log"]
        return batches, int(size), str(digest)
    except (KeyError, TypeError, ValueError):
        raise bundle.BadBundle("its reference has no summary") from None


# -- push -----------------------------------------------------------------------


def pushable_sessions(project: Project) -> list[str]:
    with project.store.backend.read() as view:
        return [r.id for r in all_sessions(view) if r.id != OUTSIDE]


def push(
    project: Project, repo: Repository, sessions: list[str], progress: Progress = QUIET
) -> list[Pushed]:
    out = []
    with locks.shared(repo) as lock:
        for session in sessions:
            out.append(_push_one(project, repo, session, progress, lock))
    return out


def _push_one(
    project: Project, repo: Repository, session: str, progress: Progress, lock: locks.Lock
) -> Pushed:
    state = bundle.local_state(project, session)
    if state is None:
        raise NoSuchSession(f"no session {session} in this root's store")
    heads, pushes = _heads(repo, session)
    for ref, doc in heads:
        if not state.holds(*_summary(doc)):
            raise Diverged(
                f"the remote holds batches or messages of session {session} this root lacks "
                f"(pushed from {doc.get('host', 'elsewhere')}, reference {ref.push}); "
                "'earshot pull' it first. Nothing was pushed"
            )
    if len(heads) == 1 and _summary(heads[0][1]) == _state_summary(state):
        return Pushed(session, None, batches=len(state.batches))  # up to date
    body = bundle.encode(state)
    loose = {blob_digest(body): body, blob_digest(state.log): state.log}
    sent = _send_session(project, repo, state, loose, progress, lock)
    lock.refresh()
    if lock.lapsed:
        # Asleep past the lock's lease: a gc may have dropped objects this
        # push found on the remote and did not send. Its new index names
        # only what is there, so what is missing now is found and sent.
        lock.write()
        repo.index(refresh=True)
        again = _send_session(project, repo, state, loose, progress, lock)
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
    return Pushed(session, ref.path, sent.objects, sent.bytes, sent.packs, len(state.batches))


def _send_session(
    project: Project,
    repo: Repository,
    state: SessionState,
    loose: dict[Digest, bytes],
    progress: Progress,
    lock: locks.Lock,
) -> Sent:
    index = repo.index()
    with project.store.reader() as reader:
        data, meta = missing_objects(
            reader, state.snapshots(), state.ledger_blobs(), index.__contains__
        )
        return send(repo, reader, data, meta, progress, lock.refresh, loose=loose)


def _state_summary(state: SessionState) -> tuple[dict[int, str], int, str]:
    return (state.identities(), *state.log_summary())


# -- pull -----------------------------------------------------------------------


def _head(
    repo: Repository, session: str, push: str | None = None
) -> tuple[RefName, dict[str, Any]]:
    """The one state of the session to take (``push``: the head of that
    reference, for a session pushed from two places at once)."""
    heads, _ = _heads(repo, session)
    if not heads:
        raise NoSuchSession(f"{repo.storage.url}: no session {session} there")
    if push is not None:
        chosen = [(r, d) for r, d in heads if r.push.startswith(push)]
        if len(chosen) != 1:
            known = ", ".join(r.push for r, _ in heads)
            raise NoSuchSession(f"session {session}: no one state {push} on the remote ({known})")
        ref, doc = chosen[0]
        return ref, doc
    if len(heads) > 1:
        states = "; ".join(
            f"{r.push} from {d.get('host', '?')} ({len(d.get('meta', {}).get('batches', {}))} "
            "batches)"
            for r, d in heads
        )
        raise Diverged(
            f"session {session} has {len(heads)} states on the remote that do not hold each "
            f"other (pushed from two places: {states}); nothing was taken. Take one with "
            "--ref PUSH, and 'earshot remote forget NAME SESSION --ref PUSH' the other once "
            "it is kept elsewhere"
        )
    return heads[0]


def pull(
    project: Project,
    repo: Repository,
    session: str,
    progress: Progress = QUIET,
    push: str | None = None,
) -> Pulled:
    _ref, doc = _head(repo, session, push)
    batches, size, digest = _summary(doc)
    local = bundle.local_state(project, session)
    if local is not None and local.holds(batches, size, digest):
        return Pulled(session, len(local.batches), up_to_date=True)
    meta = doc["meta"]
    try:
        bundle_digest = Digest(bytes.fromhex(meta["bundle"]))
        log_digest = Digest(bytes.fromhex(meta["log_blob"]))
    except (KeyError, TypeError, ValueError):
        raise bundle.BadBundle("its reference names no bundle") from None
    with project.store.writer() as writer:
        fetcher = Fetcher(repo, writer, progress)
        fetcher.fetch([], [bundle_digest, log_digest])
        log = writer.read_blob(log_digest)
        if len(log) != size or blake3.blake3(log).hexdigest() != digest:
            raise bundle.BadBundle("its log is not the one its reference names")
        remote = bundle.decode(writer.read_blob(bundle_digest), log, session)
        if local is not None:
            _check_pullable(local, remote)
        elif not remote.log.startswith(bundle.read_log(log_path(project, session))):
            # A log whose checkpoint records retention dropped: kept, never replaced.
            raise Diverged(
                f"session {session}: this root's log of it holds messages the remote's lacks; "
                "nothing was pulled. 'earshot clone' it into a new directory instead"
            )
        fetcher.fetch(remote.snapshots(), remote.ledger_blobs())
        faults.point("remote-objects-fetched")
    _write_log(project, session, remote.log)
    faults.point("remote-log-written")
    new = _write_records(project, local, remote)
    return Pulled(
        session,
        len(remote.batches),
        new,
        fetcher.fetched.objects,
        fetcher.fetched.bytes,
        fetcher.fetched.requests,
    )


def _check_pullable(local: SessionState, remote: SessionState) -> None:
    remote_ids = remote.identities()
    for seq, ident in local.identities().items():
        if remote_ids.get(seq) != ident:
            raise Diverged(
                f"session {local.record.id}: batch {seq} here is not the remote's (the session "
                "went on in two places); nothing was pulled. 'earshot clone' it into a new "
                "directory instead"
            )
    if not remote.log.startswith(local.log):
        raise Diverged(
            f"session {local.record.id}: this root's log holds messages the remote's lacks; "
            "nothing was pulled. 'earshot clone' it into a new directory instead"
        )


def _write_log(project: Project, session: str, data: bytes) -> None:
    """The remote's log over a prefix of it, appended under the log's own lock
    (as its writers take it), so a line written here meanwhile is never lost:
    a log that is no prefix of the remote's is refused, not replaced."""
    path = log_path(project, session)
    log_dir(project).mkdir(parents=True, exist_ok=True)
    if not path.exists():
        temp = path.with_name(f".{path.name}.{os.getpid()}.pull")
        with open(temp, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        try:
            os.link(temp, path)  # never over a log made meanwhile
            _fsync_dir(path.parent)
            return
        except FileExistsError:
            pass
        finally:
            temp.unlink()
    fd = os.open(path, os.O_RDWR | os.O_APPEND)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        have = os.pread(fd, os.fstat(fd).st_size, 0)
        if not data.startswith(have):
            raise Diverged(
                f"session {session}: its log here took lines the remote's lacks while the "
                "pull ran; nothing was pulled. 'earshot clone' it into a new directory instead"
            )
        tail = memoryview(data)[len(have) :]
        while tail:
            tail = tail[os.write(fd, tail) :]
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_records(project: Project, local: SessionState | None, remote: SessionState) -> int:
    new = 0
    record = remote.record
    if local is not None:
        record = SessionRecord(
            record.id,
            min(record.created_ns, local.record.created_ns),
            max(record.touched_ns, local.record.touched_ns),
            max(record.next_seq, local.record.next_seq),
            tuple(sorted(set(record.written) | set(local.record.written))),
        )
    with project.store.backend.write() as txn:
        for batch in remote.batches:
            if get_batch(txn, batch.session, batch.seq) is None:
                new += 1
            put_batch(txn, batch)
        put_session(txn, record)
    return new


# -- clone ------------------------------------------------------------------------


@dataclass
class Cloned:
    pulled: Pulled
    root: str
    files: int
    restored: str | None


def clone(
    repo: Repository,
    directory: str,
    session: str,
    home: Path | None = None,
    progress: Progress = QUIET,
    push: str | None = None,
) -> Cloned:
    """A new root at the session's latest state, holding the session.

    A pull that fails (a tampered object, a cut connection) leaves nothing:
    the directory it made, the store and the log go again.
    """
    target = Path(directory)
    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        raise EarshotError(f"{directory}: exists and is not an empty directory; nothing was done")
    for kept in (checkpoints_dir(target, home), sessions_dir(target, home)):
        if kept.exists():
            raise EarshotError(
                f"{directory} was a root earshot recorded (its data is in {kept}); clone into "
                f"another directory, or 'earshot purge --root {directory}' first"
            )
    _head(repo, session, push)  # a clear error before anything is made
    made = not target.exists()
    target.mkdir(parents=True, exist_ok=True)
    project = Project(target, home=home, extra_tables=TABLES)
    try:
        pulled = pull(project, repo, session, progress, push)
    except BaseException:
        project.close()
        _unmake(project, target if made else None)
        raise
    with project:
        state = bundle.local_state(project, session)
        latest = state.latest() if state is not None else None
        files = 0
        if latest is not None:
            restored = project.restore(latest, progress=progress, note="clone")
            files = len(restored.plan.writes)
    return Cloned(pulled, str(target.resolve()), files, latest.hex() if latest else None)


def _unmake(project: Project, directory: Path | None) -> None:
    """Take away what a failed clone made: its store, its logs, its directory."""
    shutil.rmtree(project.store_dir, ignore_errors=True)
    shutil.rmtree(log_dir(project), ignore_errors=True)
    if directory is not None:
        with contextlib.suppress(OSError):
            directory.rmdir()


# -- the remote's sessions ----------------------------------------------------------


def remote_sessions(repo: Repository) -> list[RemoteSession]:
    refs = repo.refs()
    out = []
    for key in dict.fromkeys(r.session_key for r in refs):
        newest = max((r for r in refs if r.session_key == key), key=lambda r: r.push)
        session = str(repo.read_ref(newest).get("meta", {}).get("session", "?"))
        heads, _pushes = _heads(repo, session, refs)
        _ref, doc = max(heads, key=lambda item: item[0].push)
        out.append(
            RemoteSession(
                session,
                len(doc.get("meta", {}).get("batches", {})),
                int(doc.get("time_ns", 0)),
                str(doc.get("host", "?")),
                len(heads),
                [r.push for r, _ in heads],
            )
        )
    return sorted(out, key=lambda s: s.time_ns, reverse=True)


def forget(repo: Repository, session: str, push: str | None = None) -> int:
    """Take a session off the remote (``push``: only that state, and what only
    it held); gc --remote then drops its data."""
    key = repo.session_key(session)
    refs = [r for r in repo.refs() if r.session_key == key]
    if not refs:
        raise NoSuchSession(f"{repo.storage.url}: no session {session} there")
    gone = refs
    if push is not None:
        ref, _doc = _head(repo, session, push)
        others, _ = _heads(repo, session)
        kept = {p for r, d in others if r != ref for p in (r.push, *d.get("includes", []))}
        gone = [r for r in refs if r.push not in kept]
    with locks.shared(repo):
        repo.storage.delete([r.path for r in gone])
    return len(gone)
