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
    get_session,
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


def local_sessions(project: Project) -> set[str]:
    """The sessions this root has: a checkpoint record or a log."""
    with project.store.backend.read() as view:
        ids = {r.id for r in all_sessions(view)}
    ids.update(p.name.removesuffix(".jsonl") for p in log_dir(project).glob("*.jsonl"))
    return ids


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
    return Pushed(session, ref.path, sent.objects, sent.bytes, sent.packs, len(state.batches))


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
    if session == OUTSIDE:
        raise NoSuchSession("'outside' belongs to each root alone; it is not pulled")
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
        pruned = local is not None and _only_pruned(local, remote)
        if pruned:
            # This root went on from the remote's state after retention had
            # dropped the session's older batches: those come back, and the
            # records and log here, which hold the rest, stay.
            remote = _fill_pruned(local, remote)  # type: ignore[arg-type]
        elif local is not None:
            _check_pullable(local, remote)
        elif not remote.log.startswith(bundle.read_log(log_path(project, session))):
            # A log whose checkpoint records retention dropped: kept, never replaced.
            raise Diverged(
                f"session {session}: this root's log of it holds messages the remote's lacks; "
                "nothing was pulled. 'earshot clone' it into a new directory instead"
            )
        fetcher.fetch(remote.snapshots(), remote.ledger_blobs())
        faults.point("remote-objects-fetched")
    if pruned:  # records only: the log here already holds the remote's
        assert local is not None
        filled = SessionState(local.record, remote.batches, local.log)
        new = _write_records(project, local, filled)
        return Pulled(
            session,
            len(filled.batches),
            new,
            fetcher.fetched.objects,
            fetcher.fetched.bytes,
            fetcher.fetched.requests,
        )
    new = _write_session(project, local, remote)
    return Pulled(
        session,
        len(remote.batches),
        new,
        fetcher.fetched.objects,
        fetcher.fetched.bytes,
        fetcher.fetched.requests,
    )


def _only_pruned(local: SessionState, remote: SessionState) -> bool:
    """Whether the local state holds the remote's but for batches retention
    dropped here: every remote batch missing here is older than every batch
    here, the others are the same, and the remote's log is a prefix of this
    one (the session went on here from the remote's state)."""
    mine, theirs = local.identities(), remote.identities()
    missing = [seq for seq in theirs if seq not in mine]
    return (
        bool(missing and mine)
        and max(missing) < min(mine)
        and all(theirs[seq] == ident for seq, ident in mine.items() if seq in theirs)
        and local.log.startswith(remote.log)
    )


def _fill_pruned(local: SessionState, remote: SessionState) -> SessionState:
    """The local state with the remote's batches it lacks: what is written."""
    mine = local.identities()
    kept = tuple(b for b in remote.batches if b.seq not in mine)
    return SessionState(
        local.record, tuple(sorted((*kept, *local.batches), key=lambda b: b.seq)), local.log
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


def _write_session(project: Project, local: SessionState | None, remote: SessionState) -> int:
    """The remote's state in place of the local one it holds: the records, then
    the log's new lines, both under the log's lock (as its writers take it).

    Under that lock, in the records' transaction, the session must be as the
    pull read it: a batch begun or recorded here meanwhile (the session's next
    number moved) or a line written to the log meanwhile refuses the pull with
    nothing written, never overwritten. A batch begun after the records
    commit numbers on from the remote's, and its line waits for the lock.
    """
    session = remote.record.id
    path = log_path(project, session)
    log_dir(project).mkdir(parents=True, exist_ok=True)
    if not path.exists():
        new = _write_records(project, local, remote)
        _link_new_log(path, remote.log)
        faults.point("remote-log-written")
        return new
    fd = os.open(path, os.O_RDWR | os.O_APPEND)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        have = os.pread(fd, os.fstat(fd).st_size, 0)
        if not remote.log.startswith(have):
            raise Diverged(
                f"session {session}: its log here took lines the remote's lacks while the "
                "pull ran; nothing was pulled. 'earshot clone' it into a new directory instead"
            )
        new = _write_records(project, local, remote)
        faults.point("remote-records-written")
        tail = memoryview(remote.log)[len(have) :]
        while tail:
            tail = tail[os.write(fd, tail) :]
        os.fsync(fd)
        faults.point("remote-log-written")
    finally:
        os.close(fd)
    return new


def _link_new_log(path: Path, data: bytes) -> None:
    """A log made whole beside its place, then linked in: never over one made meanwhile."""
    temp = path.with_name(f".{path.name}.{os.getpid()}.pull")
    with open(temp, "wb") as out:
        out.write(data)
        out.flush()
        os.fsync(out.fileno())
    try:
        os.link(temp, path)
    except FileExistsError:
        raise Diverged(
            f"session {path.stem}: a log of it was made here while the pull ran; its records "
            "are pulled, its log is not. Run 'earshot pull' again"
        ) from None
    finally:
        temp.unlink()
    _fsync_dir(path.parent)


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
        current = get_session(txn, record.id)
        was = None if local is None else local.record.next_seq
        if (None if current is None else current.next_seq) != was:
            raise Diverged(
                f"session {record.id} took a batch here while the pull ran; nothing was "
                "pulled. 'earshot clone' it into a new directory instead"
            )
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
    #: (path, why) the restore could not write (a full disk, ...): an incomplete clone.
    skipped: list[tuple[str, str]] = field(default_factory=list)
    #: Paths whose content the session does not hold (ignored caches, ...): not written.
    unheld: int = 0


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
    for kept in (checkpoints_dir(target, home), sessions_dir(target, home)):
        if kept.exists():
            raise EarshotError(
                f"{directory} was a root earshot recorded, or a clone that was cut (its data "
                f"is in {kept}); clone into another directory, or 'earshot purge --root "
                f"{directory}' first"
            )
    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        raise EarshotError(f"{directory}: exists and is not an empty directory; nothing was done")
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
        files, skipped, unheld = 0, [], 0
        if latest is not None:
            restored = project.restore(latest, progress=progress, note="clone")
            files = len(restored.plan.writes)
            skipped = list(restored.result.skipped) if restored.result is not None else []
            unheld = len(restored.plan.skipped)
    done = Cloned(pulled, str(target.resolve()), files, latest.hex() if latest else None)
    done.skipped, done.unheld = skipped, unheld
    return done


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
