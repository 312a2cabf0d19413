"""The agent's records fed damage: batches, sessions, bindings, the watch mark, the
settled state and the recent spans. A sealed record that is damaged, or sound
but not a record (a legacy one sealed as it was by an upgrade), is a
``CorruptRecord``; the unsealed caches read as absent. Never another exception.
"""

from __future__ import annotations

import contextlib
from typing import Any

from fuzz import DEEP_JSON, damaged, examples, json_bytes, json_values, mutated_doc
from hypothesis import example, given
from hypothesis import strategies as st

from earshot.agent.core import records
from earshot.agent.core.batch import Batch, BatchKind, Change, State
from earshot.cas.backend import MemoryBackend
from earshot.cas.digest import Digest
from earshot.cas.schema import CORE_TABLES
from earshot.cas.sealed import CorruptRecord, seal_json
from earshot.cas.tree import Ident, Kind

SESSION = "s1"
digests = st.binary(min_size=32, max_size=32).map(Digest)
states = (
    st.none()
    | st.builds(
        State,
        st.sampled_from([Kind.FILE, Kind.SYMLINK]),
        st.integers(0, 0o7777),
        digests,
    )
    | st.builds(
        State,
        st.just(Kind.UNRECORDED),
        st.integers(0, 0o7777),
        st.none(),
        st.sampled_from(["too_large", "ignored"]),
        st.integers(0, 2**40),
        st.none() | st.builds(Ident, st.integers(0, 2**40), st.integers(0, 2**62), st.booleans()),
        st.none() | st.text(max_size=6),
    )
)
changes = st.builds(
    Change, st.text(min_size=1, max_size=8), states, states, st.integers(0, 9) | st.just("watcher")
)
batch_docs = st.builds(
    Batch,
    st.just(SESSION),
    st.just(1),
    st.sampled_from(BatchKind),
    st.integers(0, 2**62),
    st.lists(st.dictionaries(st.text(max_size=4), json_values, max_size=2), max_size=2).map(tuple),
    st.none() | digests,
    st.none() | digests,
    st.lists(changes, max_size=3).map(tuple),
).map(Batch.to_json)
session_docs = st.builds(
    records.SessionRecord,
    st.just(SESSION),
    st.integers(0, 2**62),
    st.integers(0, 2**62),
    st.integers(1, 99),
    st.lists(st.text(max_size=6), max_size=2).map(tuple),
).map(records.SessionRecord.to_json)


def stored(table: str, key: bytes, value: bytes) -> MemoryBackend:
    backend = MemoryBackend((*CORE_TABLES, *records.TABLES))
    with backend.write() as txn:
        txn.put(table, key, value)
    return backend


def read_all(backend: MemoryBackend) -> None:
    """Every reader of batch and session records; each may refuse in words only."""
    with backend.read() as view:
        for read in (
            lambda: records.get_batch(view, SESSION, 1),
            lambda: records.session_batches(view, SESSION),
            lambda: records.session_batches(view, SESSION, ledgers=False),
            lambda: records.get_session(view, SESSION),
            lambda: records.all_sessions(view, outside=True),
        ):
            with contextlib.suppress(CorruptRecord):
                read()
        count, problems = records.check_records(view)
        assert count == 1 and len(problems) <= 3  # its two states, and one for its ledger


BATCH_KEY = SESSION.encode() + b"/" + (1).to_bytes(4, "big")


@examples(1)
@given(st.one_of(mutated_doc(batch_docs), json_values, batch_docs))
@example({**Batch(SESSION, 1, BatchKind.CALLS, 0, (), None, None, ()).to_json(), "seq": 1e999})
@example({**Batch(SESSION, 1, BatchKind.CALLS, 0, (), None, None, ()).to_json(), "ledger": 5})
def test_a_sealed_batch_that_is_not_a_batch_is_a_corrupt_record(doc: Any) -> None:
    read_all(stored(records.BATCHES, BATCH_KEY, seal_json(BATCH_KEY, doc)))


@examples(1)
@given(st.one_of(mutated_doc(session_docs), json_values, session_docs))
@example({**records.SessionRecord(SESSION, 0, 0).to_json(), "next_seq": -1e999})
def test_a_sealed_session_that_is_not_a_session_is_a_corrupt_record(doc: Any) -> None:
    key = SESSION.encode()
    read_all(stored(records.SESSIONS, key, seal_json(key, doc)))


@examples(1)
@given(batch_docs, st.data())
def test_a_damaged_batch_record_is_refused_whole(doc: dict[str, Any], data: st.DataObject) -> None:
    value = data.draw(damaged(st.just(seal_json(BATCH_KEY, doc))))
    backend = stored(records.BATCHES, BATCH_KEY, value)
    read_all(backend)
    if value != seal_json(BATCH_KEY, doc):
        with backend.read() as view:
            assert records.check_records(view)[1]


@examples(1)
@given(damaged(json_bytes(batch_docs)) | st.just(DEEP_JSON))
def test_a_damaged_legacy_record_is_sealed_by_the_upgrade_and_read_or_refused(value: bytes) -> None:
    backend = stored(records.BATCHES, BATCH_KEY, value)
    records.upgrade_records(backend)
    read_all(backend)


# -- the caches of the agent table: damaged, they read as absent ------------------------

settled_docs = st.fixed_dictionaries(
    {
        "snapshot": digests.map(bytes.hex),
        "session": st.text(max_size=6),
        "seq": st.integers(0, 99),
        "left": st.lists(st.tuples(st.integers(1, 2**22), st.text(max_size=6)), max_size=2),
    }
)
mark_docs = st.fixed_dictionaries({"token": st.text(max_size=6), "tree": digests.map(bytes.hex)})
span_docs = st.lists(st.tuples(st.text(max_size=4), st.integers(0, 2**62), st.integers(0, 2**62)))
cache_values = st.one_of(
    damaged(json_bytes(settled_docs | mark_docs | span_docs)),
    json_bytes(mutated_doc(settled_docs | mark_docs | span_docs)),
    st.just(DEEP_JSON),
)


@examples(2)
@given(cache_values)
@example(b"[]")
@example(b'{"snapshot": "00", "session": "s", "seq": 1e999}')
@example(b'[["other", 0, "late"]]')
@example(b'[["other", 0, 1e999]]')
def test_a_damaged_cache_of_the_agent_table_reads_as_absent_or_as_itself(value: bytes) -> None:
    for key in (b"settled", b"watch-mark", b"recent-batches"):
        backend = stored(records.AGENT, key, value)
        with backend.read() as view:
            settled = records.load_settled(view)
            mark = records.load_watch_mark(view)
            beside = records.others_ended_since(view, SESSION, 1)
        assert settled is None or type(settled.seq) is int
        assert mark is None or type(mark.token) is str
        assert beside in (True, False)
        with backend.write() as txn:
            records.note_batch_span(txn, SESSION, 1, 2)


@examples(2)
@given(st.one_of(json_values, mutated_doc(st.just({"agent": "a", "session": "s"}))))
@example(DEEP_JSON.decode())
def test_a_binding_that_is_not_one_is_a_corrupt_record_or_no_binding(doc: Any) -> None:
    key = b"bound/claude/x"
    value = (
        seal_json(key, doc) if not isinstance(doc, str) else seal_json(key, 0)[:18] + doc.encode()
    )
    backend = stored(records.AGENT, key, value)
    with backend.read() as view:
        with contextlib.suppress(CorruptRecord):
            records.get_bound_session(view, "claude", "x")
        assert isinstance(records.bound_sessions(view), dict)
    with backend.write() as txn:
        records.unbind_session(txn, "s")
