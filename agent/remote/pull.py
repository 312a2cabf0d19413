"""pull and clone: a session's newest state from a remote into a root's store.

A pull fetches the newest state of a session (the one reference no other
holds), every object checked, then writes the records and the log's new
lines under the log's lock: the session is there whole or not at all. A
local session that holds something the remote lacks is refused as
diverged, never overwritten. A clone is a pull into a new root, then a
restore of the state its newest batch left.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

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
from earshot.cas.digest import Digest
from earshot.cas.errors import EarshotError
from earshot.cas.paths import checkpoints_dir, sessions_dir
from earshot.cas.progress import QUIET, Progress
from earshot.cas.project import Project
from earshot.cas.remote.repository import Repository
from earshot.cas.remote.transfer import Fetcher

from . import bundle
from .bundle import SessionState
from .heads import Diverged, NoSuchSession, one_state, summary


@dataclass
class Pulled:
    session: str
    batches: int = 0
    new_batches: int = 0
    objects: int = 0
    bytes: int = 0
    requests: int = 0
    up_to_date: bool = False


def local_sessions(project: Project) -> set[str]:
    """The sessions this root has: a checkpoint record or a log."""
    with project.store.backend.read() as view:
        ids = {r.id for r in all_sessions(view)}
    ids.update(p.name.removesuffix(".jsonl") for p in log_dir(project).glob("*.jsonl"))
    return ids


def pull(
    project: Project,
    repo: Repository,
    session: str,
    progress: Progress = QUIET,
    push: str | None = None,
) -> Pulled:
    if session == OUTSIDE:
        raise NoSuchSession("'outside' belongs to each root alone; it is not pulled")
    _ref, doc = one_state(repo, session, push)
    batches, size, digest = summary(doc)
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
        new = _write_records(project, local, remote)
    else:
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
    one_state(repo, session, push)  # a clear error before anything is made
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
