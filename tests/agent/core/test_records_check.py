"""fsck's check of the batch records: what a ledger names must be in the store,
since undo brings each line's before back."""

from __future__ import annotations

from earshot.agent.core import records
from earshot.agent.core.batch import Batch, BatchKind, Change, State
from earshot.cas import schema
from earshot.cas.backend import MemoryBackend
from earshot.cas.digest import Digest, blob_digest
from earshot.cas.location import Codec, Location, ObjectType
from earshot.cas.tree import Kind

HELD = blob_digest(b"held\n")
LOST = blob_digest(b"lost\n")


def _file(digest: Digest) -> State:
    return State(Kind.FILE, 0o644, digest)


def _checked(*lines: Change) -> list[str]:
    backend = MemoryBackend((*schema.CORE_TABLES, *records.TABLES))
    batch = Batch("s1", 1, BatchKind.CALLS, 0, (), None, None, tuple(lines))
    with backend.write() as txn:
        schema.put_location(txn, HELD, Location(ObjectType.BLOB, Codec.RAW, 1, 0, 5, 5))
        records.put_batch(txn, batch)
    with backend.read() as view:
        count, problems = records.check_records(view)
    assert count == 1
    return problems


def test_a_ledger_naming_only_held_contents_is_no_problem() -> None:
    assert _checked(Change("a.txt", _file(HELD), None, 0), Change("b", None, _file(HELD), 0)) == []


def test_a_ledger_naming_contents_the_store_lacks_is_one_problem_naming_the_first() -> None:
    problems = _checked(
        Change("a.txt", _file(LOST), _file(HELD), 0),
        Change("b.txt", None, _file(LOST), 0),
    )
    assert problems == [
        "batch 1 of session s1: its ledger names contents the store lacks "
        f"('a.txt' before it, {LOST.hex()[:12]}, and 1 more)"
    ]
