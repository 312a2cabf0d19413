"""A session's states on a remote: its references, the ones no other holds, and
taking a session or a state of it off.

A reference lists every earlier one of its session that its push held
(``includes``); a *head* is a reference no other holds. Read newest first,
a session pushed from one place costs one read however many pushes it had.
Two references of one state (same batch identities, same log) are one head;
two heads mean the session was pushed from two places at once.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from earshot.cas.errors import EarshotError
from earshot.cas.remote import locks
from earshot.cas.remote.repository import RefName, Repository

from . import bundle


class Diverged(EarshotError):
    """Both sides hold something of a session the other lacks."""


class NoSuchSession(EarshotError):
    pass


@dataclass
class RemoteSession:
    session: str
    batches: int
    time_ns: int
    host: str
    heads: int
    refs: list[str] = field(default_factory=list)


Refs = list[tuple[RefName, dict[str, Any]]]


def states(
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
        if not any(summary(doc) == summary(other) for _, other in heads):
            heads.append((ref, doc))
    return heads, [r.push for r in mine]


def summary(doc: dict[str, Any]) -> tuple[dict[int, str], int, str]:
    meta = doc.get("meta", {})
    try:
        batches = {int(k): str(v) for k, v in meta["batches"].items()}
        size, digest = meta["log"]
        return batches, int(size), str(digest)
    except (KeyError, TypeError, ValueError):
        raise bundle.BadBundle("its reference has no summary") from None


def one_state(
    repo: Repository, session: str, push: str | None = None
) -> tuple[RefName, dict[str, Any]]:
    """The one state of the session to take (``push``: the head of that
    reference, for a session pushed from two places at once)."""
    found, _ = states(repo, session)
    if not found:
        raise NoSuchSession(f"{repo.storage.url}: no session {session} there")
    if push is not None:
        chosen = [(r, d) for r, d in found if r.push.startswith(push)]
        if len(chosen) != 1:
            known = ", ".join(r.push for r, _ in found)
            raise NoSuchSession(f"session {session}: no one state {push} on the remote ({known})")
        ref, doc = chosen[0]
        return ref, doc
    if len(found) > 1:
        listed = "; ".join(
            f"{r.push} from {d.get('host', '?')} ({len(d.get('meta', {}).get('batches', {}))} "
            "batches)"
            for r, d in found
        )
        raise Diverged(
            f"session {session} has {len(found)} states on the remote that do not hold each "
            f"other (pushed from two places: {listed}); nothing was taken. Take one with "
            "--ref PUSH, and 'earshot remote forget NAME SESSION --ref PUSH' the other once "
            "it is kept elsewhere"
        )
    return found[0]


def remote_sessions(repo: Repository) -> list[RemoteSession]:
    refs = repo.refs()
    out = []
    for key in dict.fromkeys(r.session_key for r in refs):
        newest = max((r for r in refs if r.session_key == key), key=lambda r: r.push)
        session = str(repo.read_ref(newest).get("meta", {}).get("session", "?"))
        heads, _pushes = states(repo, session, refs)
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
        ref, _doc = one_state(repo, session, push)
        others, _ = states(repo, session)
        kept = {p for r, d in others if r != ref for p in (r.push, *d.get("includes", []))}
        gone = [r for r in refs if r.push not in kept]
    with locks.shared(repo):
        repo.storage.delete([r.path for r in gone])
    return len(gone)
