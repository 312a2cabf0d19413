"""Session files fed damage: what loads, checks, repairs and lists them either reads
them or refuses them in words (``SessionCorrupt``, ``EntryFormatError``),
never another exception.

The valid files are made here by the line encoders, pure and fast; the
operations that write them through ``Session`` are the model-based test's
(test_session_log_property.py).
"""

from __future__ import annotations

import contextlib
import json
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from fuzz import DEEP_JSON, damaged, examples, json_values, mutated_doc
from hypothesis import example, given
from hypothesis import strategies as st

from earshot.agent.log.check import check, repair
from earshot.agent.log.entries import (
    AssistantMessage,
    BatchLink,
    Body,
    Compaction,
    Entry,
    Label,
    Navigation,
    OtherEntry,
    Permission,
    ToolCall,
    ToolResult,
    UserMessage,
    decode_entry,
    encode_entry,
)
from earshot.agent.log.fields import EntryFormatError
from earshot.agent.log.header import ForkOrigin, Header, decode_header, encode_header
from earshot.agent.log.ids import EntryId, SessionId
from earshot.agent.log.listing import session_info
from earshot.agent.log.scan import scan
from earshot.agent.log.session import Session
from earshot.cas.errors import EarshotError

TS = "2025-01-31T12:00:00.123Z"
texts = st.text(max_size=8)
headers = st.builds(
    Header,
    texts.map(SessionId),
    texts,
    st.just(TS),
    fork_of=st.none() | st.builds(ForkOrigin, texts.map(SessionId), st.none() | texts),
)


@st.composite
def bodies(draw: st.DrawFn, nodes: list[EntryId], leaf: EntryId | None) -> Body:
    kinds: list[Any] = [UserMessage, AssistantMessage, ToolCall, ToolResult, Permission, BatchLink]
    kinds += [OtherEntry, Compaction] + ([Label, Navigation] if nodes else [])
    kind = draw(st.sampled_from(kinds))
    made: Body
    if kind in (UserMessage, AssistantMessage):
        made = kind(draw(texts))
    elif kind is ToolCall:
        made = ToolCall(draw(texts), draw(texts), draw(json_values))
    elif kind is ToolResult:
        made = ToolResult(draw(texts), draw(json_values), draw(st.booleans()))
    elif kind is Permission:
        made = Permission(draw(texts), draw(json_values))
    elif kind is BatchLink:
        made = BatchLink(draw(st.integers(1, 99)))
    elif kind is OtherEntry:
        made = OtherEntry("future_" + draw(texts), {"x": draw(json_values)})
    elif kind is Compaction:
        made = Compaction(
            draw(texts), draw(st.sampled_from([None, leaf]))
        )  # the leaf is on its path
    elif kind is Label:
        made = Label(draw(st.sampled_from(nodes)), draw(texts))
    else:
        made = Navigation(draw(st.sampled_from(nodes)))
    return made


@st.composite
def session_entries(draw: st.DrawFn) -> list[Entry]:
    out: list[Entry] = []
    nodes: list[EntryId] = []
    leaf: EntryId | None = None
    for n in range(draw(st.integers(0, 8))):
        body = draw(bodies(nodes, leaf))
        entry = Entry(EntryId(f"e{n:04d}"), leaf, TS, body)
        out.append(entry)
        if isinstance(body, Navigation):
            leaf = body.target
        elif entry.is_node:
            leaf = entry.id
            nodes.append(entry.id)
    return out


def lines(entries: tuple[Entry, ...] | list[Entry]) -> list[bytes]:
    """Entries as their lines: equal lines, equal entries (NaN is not equal to itself)."""
    return [encode_entry(e) for e in entries]


session_files = st.builds(
    lambda header, entries: encode_header(header) + b"".join(map(encode_entry, entries)),
    headers,
    session_entries(),
)


@contextlib.contextmanager
def on_disk(data: bytes) -> Iterator[Path]:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "01session.jsonl"
        path.write_bytes(data)
        yield path


@examples(1)
@given(headers, session_entries())
def test_the_files_made_here_load_whole(header: Header, entries: list[Entry]) -> None:
    # The control: the files the damage starts from are sound.
    with on_disk(encode_header(header) + b"".join(lines(entries))) as path:
        assert lines(Session.open(path).entries()) == lines(entries)
        assert all(p.kind == "interrupted_tool_call" for p in check(path))


@examples(1)
@given(damaged(session_files, max_size=300) | st.just(DEEP_JSON + b"\n"))
@example(encode_header(Header(SessionId("s"), "/r", TS)) + DEEP_JSON + b"\n{}\n")
@example(b'{"type":"session","version":1,"id":"s","root":"/r","created":"t"}\n' + b"\xff\n")
def test_a_damaged_session_file_loads_or_is_refused_in_words(data: bytes) -> None:
    with on_disk(data) as path:
        with contextlib.suppress(EarshotError):
            session = Session.open(path)
            session.entries()
            session.context()
            session.prompts()
        with contextlib.suppress(EarshotError):
            session_info(path, count_prompts=True)
        problems = check(path)
        result = repair(path)
        assert [p.kind for p in result.remaining] == [p.kind for p in check(path)]
    assert all(p.kind for p in problems)


@examples(4)
@given(st.binary(max_size=200) | damaged(session_files, max_size=300))
def test_scan_accounts_for_every_byte_of_any_data(data: bytes) -> None:
    result = scan(data)
    spans = [(r.offset, r.end) for r in result.records] + [
        (b.offset, b.end) for b in result.corrupt
    ]
    spans.sort()
    end = 0
    for start, stop in spans:
        assert start == end
        end = stop
    tail = result.torn.size if result.torn is not None else 0
    assert end + tail == len(data)


header_docs = headers.map(lambda h: json.loads(encode_header(h)))
entry_docs = session_entries().flatmap(
    lambda entries: (
        st.sampled_from([json.loads(encode_entry(e)) for e in entries])
        if entries
        else st.just({"id": "e", "parentId": None, "type": "user", "ts": TS, "text": ""})
    )
)


@examples(4)
@given(mutated_doc(header_docs) | header_docs)
def test_a_header_of_the_wrong_shape_is_an_entry_format_error(doc: Any) -> None:
    if isinstance(doc, dict):  # the loader reads a line only when it is an object
        with contextlib.suppress(EntryFormatError):
            header = decode_header(doc)
            assert decode_header(json.loads(encode_header(header))) == header


@examples(4)
@given(mutated_doc(entry_docs) | entry_docs)
def test_an_entry_of_the_wrong_shape_is_an_entry_format_error(doc: Any) -> None:
    if isinstance(doc, dict):
        with contextlib.suppress(EntryFormatError):
            entry = decode_entry(doc)
            assert lines([decode_entry(json.loads(encode_entry(entry)))]) == lines([entry])
