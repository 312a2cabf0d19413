"""``earshot fsck --remote``: every file of the remote read, opened and verified.

Each pack is fetched and checked against its name; each object an index
file lists is opened (authenticated as its digest) and hashed; each
reference opens, and everything it reaches is named by the index. A
problem is one line each; the remote is not changed.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import zstandard

from earshot.cas.digest import Digest, blob_digest, snapshot_digest, tree_digest
from earshot.cas.errors import EarshotError
from earshot.cas.location import Codec, ObjectType
from earshot.cas.objects import decode_chunks
from earshot.cas.progress import QUIET, Progress

from .crypto import content_name
from .packs import Entry, open_object
from .prune import live_objects, live_refs
from .repository import Repository


@dataclass
class Checked:
    packs: int = 0
    objects: int = 0
    bytes: int = 0
    refs: int = 0
    problems: list[str] = field(default_factory=list)


def check(repo: Repository, progress: Progress = QUIET) -> Checked:
    report = Checked()
    try:
        index = repo.index(refresh=True)
    except EarshotError as exc:
        report.problems.append(str(exc))
        return report
    by_pack: dict[str, list[tuple[Digest, Entry]]] = {}
    for digest, entry in index.items():
        by_pack.setdefault(entry.pack, []).append((digest, entry))
    packs = {listed.name.split("/", 1)[1]: listed.size for listed in repo.storage.listing("data")}
    progress.stage("checking packs", len(packs), sum(packs.values()), unit="packs")
    dctx = zstandard.ZstdDecompressor()
    for name in sorted(packs):
        data = repo.storage.get(f"data/{name}")
        report.packs += 1
        progress.advance(1, packs[name])
        if data is None:
            continue  # removed meanwhile
        report.bytes += len(data)
        if content_name(data) != name:
            report.problems.append(f"pack {name[:12]} does not match its name (damaged)")
            continue
        for digest, entry in by_pack.get(name, []):
            why = _check_object(repo, digest, entry, data, index, dctx)
            report.objects += 1
            if why:
                report.problems.append(f"object {digest.hex()[:12]} in pack {name[:12]}: {why}")
    # Each index file on its own: one naming a pack that is gone is damage
    # even when another file names the same objects elsewhere.
    for path in sorted(repo.index_files()):
        try:
            named = {e.pack for e in repo.read_index_file(path).values()}
        except EarshotError as exc:
            report.problems.append(str(exc))
            continue
        for name in sorted(named - set(packs)):
            report.problems.append(f"{path[:18]} names pack {name[:12]}, which is missing")
    try:
        kept, _held = live_refs(repo)
        report.refs = len(kept)
        live_objects(repo, kept, progress)
    except EarshotError as exc:
        report.problems.append(str(exc))
    return report


def _check_object(
    repo: Repository,
    digest: Digest,
    entry: Entry,
    pack: bytes,
    index: dict[Digest, Entry],
    dctx: zstandard.ZstdDecompressor,
) -> str | None:
    try:
        stored = open_object(
            repo.key, digest, entry, pack[entry.offset : entry.offset + entry.length]
        )
    except EarshotError:
        return "does not authenticate"
    try:
        raw = (
            stored
            if entry.codec is Codec.RAW
            else dctx.decompress(stored, max_output_size=entry.raw)
        )
    except zstandard.ZstdError:
        return "does not decompress"
    if len(raw) != entry.raw:
        return "has the wrong length"
    if entry.type is ObjectType.BLOB:
        ok = blob_digest(raw) == digest
    elif entry.type is ObjectType.TREE:
        ok = tree_digest(raw) == digest
    elif entry.type is ObjectType.SNAPSHOT:
        ok = snapshot_digest(raw) == digest
    else:
        try:
            ok = all(chunk in index for chunk, _size in decode_chunks(raw))
        except EarshotError:
            ok = False
    return None if ok else "does not match its digest"
