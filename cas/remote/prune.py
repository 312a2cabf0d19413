"""``earshot gc --remote``: drop what no reference reaches, under the exclusive lock.

A reference names the snapshots and contents it keeps (``snapshots``,
``blobs``) and the earlier references of its session it holds whole
(``includes``): those are dropped. Everything the rest reach is live; a
pack with nothing live goes, once it is older than the grace period (a pack
younger than that may belong to a push whose reference is not written yet,
even one whose lock lapsed). The order keeps every state of a cut gc sound:
the new index (the kept packs' entries) is written first, then the old index
files go, then the packs, then the references held by others, last the
stale locks. A pack with some live objects is kept whole (not repacked):
space comes back as whole packs die. Its dead objects leave the index,
though: an index names only what the live references reach (and what young
packs hold), so "the remote has this tree" keeps meaning "and all under it".
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from earshot.cas import faults
from earshot.cas.digest import Digest
from earshot.cas.progress import QUIET, Progress

from .locks import exclusive, stale_locks
from .packs import META_TYPES, Entry
from .repository import RefName, Repository
from .transfer import Fetcher

GRACE_S = 60 * 60
#: Entries per index file written by gc (about 2.5 MB each).
_INDEX_ENTRIES = 50_000


@dataclass
class Pruned:
    refs_dropped: int = 0
    packs_dropped: int = 0
    bytes_dropped: int = 0
    packs_kept: int = 0
    bytes_kept: int = 0
    young_kept: int = 0
    locks_dropped: int = 0
    live_objects: int = 0
    dropped_refs: list[str] = field(default_factory=list)


RefDoc = dict[str, Any]


def live_refs(repo: Repository) -> tuple[list[tuple[RefName, RefDoc]], list[RefName]]:
    """(references kept, with their documents; references another one holds whole)."""
    docs = list(repo.iter_refs())
    held = {
        (ref.session_key, push)
        for ref, doc in docs
        for push in doc.get("includes", [])
        if isinstance(push, str)
    }
    kept = [(r, d) for r, d in docs if (r.session_key, r.push) not in held]
    dropped = [r for r, _ in docs if (r.session_key, r.push) in held]
    return kept, dropped


def live_objects(
    repo: Repository, refs: list[tuple[RefName, RefDoc]], progress: Progress = QUIET
) -> set[Digest]:
    """Every object the references reach (each checked against its digest); a
    reference naming an object the remote lacks is a ``RemoteError``."""
    walker = Fetcher(repo, None, progress)
    live: set[Digest] = set()
    for _ref, doc in refs:
        named = (*doc.get("snapshots", []), *doc.get("blobs", []))
        roots = [Digest(bytes.fromhex(h)) for h in named]
        entries = {d: walker.entry(d) for d in roots}
        meta = [d for d in roots if entries[d].type in META_TYPES]
        live.update(d for d in roots if entries[d].type not in META_TYPES)
        metadata, wanted = walker.walk(meta, live.__contains__)
        live.update(d for d, _e, _s in metadata)
        live.update(wanted)
    return live


def prune(repo: Repository, grace_s: float = GRACE_S, progress: Progress = QUIET) -> Pruned:
    report = Pruned()
    with exclusive(repo):
        kept_refs, held = live_refs(repo)
        index = repo.index(refresh=True)
        old_index_files = repo.index_files()
        live = live_objects(repo, kept_refs, progress)
        report.live_objects = len(live)
        live_packs = {index[d].pack for d in live if d in index}
        now = time.time()
        dead: list[str] = []
        sizes: dict[str, int] = {}
        for listed in repo.storage.listing("data"):
            name = listed.name.split("/", 1)[1]
            sizes[name] = listed.size
            if name in live_packs:
                report.packs_kept += 1
                report.bytes_kept += listed.size
            elif now - listed.modified_s < grace_s:
                report.young_kept += 1
                report.packs_kept += 1
                report.bytes_kept += listed.size
            else:
                dead.append(name)
        young = {name for name in sizes if name not in live_packs and name not in set(dead)}
        # The new index names the live objects and what young packs hold,
        # nothing else: a dead tree left named in a kept pack would tell the
        # next push its subtree is here while its contents' packs are gone.
        kept_entries = {
            d: e for d, e in index.items() if e.pack in sizes and (d in live or e.pack in young)
        }
        _rewrite_index(repo, kept_entries, old_index_files)
        faults.point("remote-gc-index-written")
        repo.storage.delete([f"data/{name}" for name in dead])
        report.packs_dropped = len(dead)
        report.bytes_dropped = sum(sizes[n] for n in dead)
        repo.storage.delete([r.path for r in held])
        report.refs_dropped = len(held)
        report.dropped_refs = [r.path for r in held]
        stale = stale_locks(repo)
        repo.storage.delete(stale)
        report.locks_dropped = len(stale)
    return report


def _rewrite_index(repo: Repository, entries: dict[Digest, Entry], old: set[str]) -> None:
    items = list(entries.items())
    written = set()
    for start in range(0, len(items), _INDEX_ENTRIES):
        written.add(repo.put_index(dict(items[start : start + _INDEX_ENTRIES])))
    repo.storage.delete(sorted(old - written))
    repo.index(refresh=True)
