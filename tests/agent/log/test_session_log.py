"""Conversation trees: appending, context, navigation, forks and listing, on real files."""

from __future__ import annotations

import gc
import json
import os
import stat
from pathlib import Path
from typing import Any

import pytest

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
    Repair,
    ToolCall,
    ToolResult,
    UserMessage,
)
from earshot.agent.log.fileio import SessionCorrupt
from earshot.agent.log.header import FORMAT_VERSION
from earshot.agent.log.ids import AmbiguousId, NoMatchingId
from earshot.agent.log.listing import find_session, list_sessions
from earshot.agent.log.logfile import InvalidEntry, SessionNotFound
from earshot.agent.log.session import (
    INTERRUPTED_OUTPUT,
    NoSuchPrompt,
    Session,
    create_session,
)
from earshot.cas.paths import sessions_dir


def said(context: tuple[Entry, ...]) -> list[str]:
    """A context as short strings: the text of messages, the name of the rest."""
    out = []
    for entry in context:
        body = entry.body
        if isinstance(body, UserMessage | AssistantMessage):
            out.append(body.text)
        elif isinstance(body, Compaction):
            out.append(f"summary:{body.summary}")
        elif isinstance(body, ToolCall):
            out.append(f"call:{body.call_id}")
        elif isinstance(body, ToolResult):
            out.append(f"result:{body.call_id}")
        else:
            out.append(entry.type)
    return out


def turn(session: Session, n: int | str, batch: int | None = None) -> Entry:
    """Prompt ``p<n>`` and answer ``a<n>`` (and a batch link); the prompt entry."""
    prompt = session.append(UserMessage(f"p{n}"))
    session.append(AssistantMessage(f"a{n}"))
    if batch is not None:
        session.append(BatchLink(batch))
    return prompt


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_bytes().splitlines()]


@pytest.fixture
def session(tmp_path: Path) -> Session:
    return Session.create(tmp_path / "sessions", tmp_path)


def test_new_session_file_is_a_header_line_naming_id_root_and_version(tmp_path: Path) -> None:
    session = Session.create(tmp_path / "sessions", tmp_path)
    assert session.path == tmp_path / "sessions" / f"{session.id}.jsonl"
    [header] = lines(session.path)
    assert header["type"] == "session"
    assert header["version"] == FORMAT_VERSION
    assert header["id"] == session.id
    assert header["root"] == os.path.realpath(tmp_path)
    assert header["created"].endswith("Z")
    assert "forkOf" not in header
    assert os.stat(session.path).st_mode & 0o777 == 0o600


def test_create_session_puts_the_file_in_the_roots_sessions_dir(tmp_path: Path) -> None:
    root = tmp_path / "project"
    root.mkdir()
    session = create_session(root, home=tmp_path / "home")
    assert session.path.parent == sessions_dir(root, tmp_path / "home")


def test_opening_a_missing_file_says_so(tmp_path: Path) -> None:
    with pytest.raises(SessionNotFound) as caught:
        Session.open(tmp_path / "nope.jsonl")
    assert caught.value.path == tmp_path / "nope.jsonl"


def test_each_append_is_a_child_of_the_previous_entry(session: Session) -> None:
    first = session.append(UserMessage("hello"))
    second = session.append(AssistantMessage("hi"))
    third = session.append(ToolCall("c1", "read", {"path": "a.py"}))
    assert first.parent_id is None
    assert second.parent_id == first.id
    assert third.parent_id == second.id
    assert session.leaf == third.id
    records = lines(session.path)[1:]
    assert [(r["id"], r["parentId"], r["type"]) for r in records] == [
        (first.id, None, "user"),
        (second.id, first.id, "assistant"),
        (third.id, second.id, "tool_call"),
    ]
    assert all(set(r) >= {"id", "parentId", "type", "ts"} for r in records)


def test_every_entry_type_reads_back_equal(session: Session) -> None:
    user = session.append(UserMessage("fix the bug\nin parser.py"))
    bodies: list[Body] = [
        AssistantMessage("looking ✓"),
        ToolCall("c1", "edit", {"path": "p.py", "lines": [1, 2], "dry": False}),
        ToolResult("c1", [{"type": "text", "text": "ok"}], is_error=True),
        BatchLink(7),
        Permission("bash", {"command": "rm -rf build"}),
        Compaction("we fixed it", user.id),
        Label(user.id, "start"),
        OtherEntry("future_thing", {"x": 1}),
    ]
    written = session.append_many(bodies)
    reopened = Session.open(session.path)
    assert reopened.entries() == (user, *written)
    assert [e.body for e in written] == bodies


def test_append_many_writes_one_chain_in_one_go(session: Session) -> None:
    written = session.append_many([UserMessage("a"), AssistantMessage("b"), BatchLink(1)])
    assert [e.parent_id for e in written] == [None, written[0].id, written[1].id]
    assert session.leaf == written[-1].id


def test_context_holds_messages_and_tool_traffic_only(session: Session) -> None:
    session.append(UserMessage("p1"))
    session.append(Permission("bash"))
    session.append(AssistantMessage("a1"))
    session.append(ToolCall("c1", "ls"))
    session.append(ToolResult("c1", "x.py"))
    session.append(BatchLink(1))
    session.append(OtherEntry("future_thing"))
    assert said(session.context()) == ["p1", "a1", "call:c1", "result:c1"]


def test_compaction_summary_stands_for_entries_before_first_kept(session: Session) -> None:
    turn(session, 1)
    turn(session, 2)
    kept = turn(session, 3)
    session.append(Compaction("s", kept.id))
    turn(session, 4)
    context = session.context()
    assert said(context) == ["summary:s", "p3", "a3", "p4", "a4"]
    assert isinstance(context[0].body, Compaction)


def test_compaction_without_kept_entries_leaves_the_summary_and_what_follows(
    session: Session,
) -> None:
    turn(session, 1)
    session.append(Compaction("all of it", None))
    turn(session, 2)
    assert said(session.context()) == ["summary:all of it", "p2", "a2"]


def test_latest_compaction_supersedes_earlier_ones(session: Session) -> None:
    turn(session, 1)
    two = turn(session, 2)
    session.append(Compaction("first", two.id))
    three = turn(session, 3)
    session.append(Compaction("second", three.id))
    turn(session, 4)
    assert said(session.context()) == ["summary:second", "p3", "a3", "p4", "a4"]
    session.append(Compaction("third", two.id))  # keeps a range with a compaction in it
    assert said(session.context()) == ["summary:third", "p2", "a2", "p3", "a3", "p4", "a4"]


def test_compaction_anchored_off_the_path_is_refused(session: Session) -> None:
    turn(session, 1)
    old = turn(session, 2)
    session.rewind(2)
    turn(session, 3)
    before = session.path.read_bytes()
    with pytest.raises(InvalidEntry, match="not on the path"):
        session.append(Compaction("s", old.id))
    assert session.path.read_bytes() == before


def test_context_at_an_older_entry_is_the_path_to_it(session: Session) -> None:
    one = turn(session, 1)
    turn(session, 2)
    assert said(session.context(one.id)) == ["p1"]
    assert [p.text for p in session.prompts(one.id)] == ["p1"]


def test_resume_appends_an_interrupted_result_for_each_unanswered_call(tmp_path: Path) -> None:
    session = Session.create(tmp_path, tmp_path)
    session.append(UserMessage("p1"))
    session.append(AssistantMessage("running two tools"))
    session.append(ToolCall("c1", "bash", {"command": "make"}))
    session.append(ToolResult("c1", "ok"))
    session.append(ToolCall("c2", "bash", {"command": "sleep 100"}))
    session.append(ToolCall("c3", "read"))
    before = session.path.read_bytes()

    resumed = Session.resume(session.path)

    assert resumed.path.read_bytes().startswith(before)
    added = [
        r for r in lines(resumed.path)[1:] if r["type"] == "tool_result" and r["callId"] != "c1"
    ]
    assert [(r["callId"], r["isError"], r["interrupted"]) for r in added] == [
        ("c2", True, True),
        ("c3", True, True),
    ]
    assert said(resumed.context())[-4:] == ["call:c2", "call:c3", "result:c2", "result:c3"]
    last = resumed.context()[-1].body
    assert isinstance(last, ToolResult) and last.output == INTERRUPTED_OUTPUT
    grown = resumed.path.read_bytes()
    Session.resume(session.path)  # nothing left to answer
    assert session.path.read_bytes() == grown


def test_open_for_reading_appends_nothing(session: Session) -> None:
    session.append(ToolCall("c1", "bash"))
    before = session.path.read_bytes()
    reopened = Session.open(session.path)
    assert said(reopened.context()) == ["call:c1"]
    assert session.path.read_bytes() == before


def test_unanswered_call_summarised_away_gets_no_result(session: Session) -> None:
    session.append(UserMessage("p1"))
    session.append(ToolCall("lost", "bash"))
    kept = session.append(UserMessage("p2"))
    session.append(Compaction("s", kept.id))
    assert Session.resume(session.path).context() == session.context()
    assert said(session.context()) == ["summary:s", "p2"]


def test_permission_grants_are_not_restored_on_resume(session: Session) -> None:
    session.append(UserMessage("p1"))
    grant = session.append(Permission("bash", {"allow": "rm -rf build"}))
    session.append(AssistantMessage("done"))
    resumed = Session.resume(session.path)
    assert grant.id in {e.id for e in resumed.entries()}  # the record stays in the file
    assert all(not isinstance(e.body, Permission) for e in resumed.context())
    assert said(resumed.context()) == ["p1", "done"]


def test_prompts_are_numbered_along_the_current_path(session: Session) -> None:
    session.append(UserMessage("  first line\nsecond line"))
    session.append(AssistantMessage("a"))
    session.append(UserMessage("again"))
    prompts = session.prompts()
    assert [(p.n, p.text, p.first_line) for p in prompts] == [
        (1, "  first line\nsecond line", "first line"),
        (2, "again", "again"),
    ]
    assert not any(p.has_branches for p in prompts)
    assert prompts[0].ts.endswith("Z")


def test_rewind_returns_the_prompt_and_the_batches_of_the_abandoned_path(
    session: Session,
) -> None:
    turn(session, 1, batch=1)
    two = turn(session, 2, batch=2)
    turn(session, 3, batch=3)
    result = session.rewind(2)
    assert result.text == "p2"
    assert result.prompt.id == two.id
    assert result.batches == (2, 3)
    assert len(result.batch_ids) == 2
    assert all(isinstance(session.get(i).body, BatchLink) for i in result.batch_ids)
    assert result.target == two.parent_id
    assert isinstance(result.navigation.body, Navigation)
    assert said(session.context()) == ["p1", "a1"]
    assert session.leaf == two.parent_id


def test_new_prompt_after_rewind_is_a_branch(session: Session) -> None:
    turn(session, 1)
    turn(session, 2)
    session.rewind(2)
    turn(session, "2b")
    prompts = session.prompts()
    assert [(p.text, p.has_branches, p.alternatives) for p in prompts] == [
        ("p1", False, 1),
        ("p2b", True, 2),
    ]


def test_rewind_to_the_first_prompt_empties_the_context(session: Session) -> None:
    turn(session, 1)
    turn(session, 2)
    result = session.rewind(1)
    assert result.target is None
    assert session.leaf is None
    assert session.context() == ()
    new = session.append(UserMessage("fresh"))
    assert new.parent_id is None
    assert said(session.context()) == ["fresh"]
    assert len(session.children(None)) == 2


def test_rewind_to_a_prompt_not_on_the_path_is_refused(session: Session) -> None:
    turn(session, 1)
    with pytest.raises(NoSuchPrompt) as caught:
        session.rewind(2)
    assert (caught.value.n, caught.value.count) == (2, 1)
    with pytest.raises(NoSuchPrompt):
        session.rewind(0)


def test_rewind_add_rewind_fork_keeps_every_context_exact(session: Session) -> None:
    for n in range(1, 6):
        turn(session, n, batch=n)
    snapshots = [session.path.read_bytes()]

    first = session.rewind(2)
    assert first.text == "p2"
    assert first.batches == (2, 3, 4, 5)
    assert said(session.context()) == ["p1", "a1"]
    snapshots.append(session.path.read_bytes())

    turn(session, "2b", batch=6)
    turn(session, "3b", batch=7)
    assert said(session.context()) == ["p1", "a1", "p2b", "a2b", "p3b", "a3b"]
    # The new path has three prompts, so a fourth is not there yet.
    with pytest.raises(NoSuchPrompt):
        session.rewind(4)
    turn(session, "4b", batch=8)
    turn(session, "5b", batch=9)
    snapshots.append(session.path.read_bytes())

    second = session.rewind(4)
    assert second.text == "p4b"
    assert second.batches == (8, 9)
    assert said(session.context()) == ["p1", "a1", "p2b", "a2b", "p3b", "a3b"]
    snapshots.append(session.path.read_bytes())

    fork = session.fork(3)
    assert said(fork.context()) == ["p1", "a1", "p2b", "a2b"]
    assert said(session.context()) == ["p1", "a1", "p2b", "a2b", "p3b", "a3b"]
    assert said(Session.open(session.path).context()) == said(session.context())
    assert said(Session.open(fork.path).context()) == ["p1", "a1", "p2b", "a2b"]

    final = session.path.read_bytes()
    for older in snapshots:
        assert final.startswith(older)


def test_rewind_after_compaction_lands_on_the_asked_prompt(session: Session) -> None:
    turn(session, 1)
    turn(session, 2)
    three = turn(session, 3)
    session.append(Compaction("s", three.id))
    turn(session, 4)
    assert [p.text for p in session.prompts()] == ["p1", "p2", "p3", "p4"]
    session.rewind(4)
    assert said(session.context()) == ["summary:s", "p3", "a3"]
    result = session.rewind(2)  # before the compaction: the whole history again
    assert result.text == "p2"
    assert said(session.context()) == ["p1", "a1"]


def test_rewind_after_a_rewind_uses_the_current_path(session: Session) -> None:
    for n in range(1, 4):
        turn(session, n)
    session.rewind(3)
    turn(session, "3b")
    result = session.rewind(3)
    assert result.text == "p3b"
    assert said(session.context()) == ["p1", "a1", "p2", "a2"]


def test_fork_copies_the_path_with_ids_and_names_its_source(session: Session) -> None:
    one = turn(session, 1)
    two = turn(session, 2)
    session.append(Label(one.id, "start"))
    turn(session, 3)
    fork = session.fork(3)
    assert fork.id != session.id
    assert fork.path.parent == session.path.parent
    header = lines(fork.path)[0]
    assert header["forkOf"] == {"session": session.id, "entry": fork.leaf}
    assert fork.header.fork_of is not None
    assert fork.header.fork_of.session == session.id
    assert fork.header.root == session.header.root
    copied = [e for e in fork.entries() if e.is_node]
    assert copied == list(session.path_to(fork.leaf))
    assert [e.body for e in copied] == [e.body for e in session.context()][:4]
    assert copied[-1].parent_id == two.id  # the answer to p2, chain intact
    assert fork.labels() == {one.id: "start"}
    fork.append(UserMessage("in the fork"))
    assert said(fork.context()) == ["p1", "a1", "p2", "a2", "in the fork"]
    assert said(session.context())[-1] == "a3"


def test_fork_before_the_first_prompt_is_empty(session: Session) -> None:
    turn(session, 1)
    fork = session.fork(1)
    assert fork.context() == ()
    assert fork.header.fork_of is not None and fork.header.fork_of.entry is None


def test_fork_without_a_prompt_copies_the_whole_path(session: Session) -> None:
    turn(session, 1)
    turn(session, 2)
    assert said(session.fork().context()) == said(session.context())


def test_labels_latest_wins_and_empty_removes(session: Session) -> None:
    one = turn(session, 1)
    session.append(Label(one.id, "a"))
    session.append(Label(one.id, "b"))
    assert session.labels() == {one.id: "b"}
    session.append(Label(one.id, ""))
    assert session.labels() == {}
    assert said(session.context()) == ["p1", "a1"]  # labels are not nodes


def test_label_of_unknown_entry_is_refused(session: Session) -> None:
    with pytest.raises(InvalidEntry):
        session.append(Label(session.id, "x"))  # type: ignore[arg-type]


def test_navigate_moves_the_leaf_to_any_entry(session: Session) -> None:
    one = turn(session, 1)
    turn(session, 2)
    session.navigate(one.id)
    assert said(session.context()) == ["p1"]
    assert said(Session.open(session.path).context()) == ["p1"]
    with pytest.raises(NoMatchingId):
        session.navigate(session.id)  # a session id is no entry id


def test_a_unique_prefix_works_wherever_an_entry_id_does(session: Session) -> None:
    one = turn(session, 1)
    turn(session, 2)
    short = one.id[:-3]
    assert session.get(short) == one
    assert said(session.context(short)) == ["p1"]
    assert [p.text for p in session.prompts(short)] == ["p1"]
    assert session.path_to(short) == (one,)
    assert [e.id for e in session.children(None)] == [one.id]
    session.navigate(short)
    assert session.leaf == one.id


def test_navigation_and_repair_entries_cannot_be_appended_directly(session: Session) -> None:
    with pytest.raises(InvalidEntry):
        session.append(Navigation(None))
    with pytest.raises(InvalidEntry):
        session.append(Repair(0, 1))


def test_unknown_type_with_a_known_name_is_refused(session: Session) -> None:
    with pytest.raises(InvalidEntry):
        session.append(OtherEntry("user", {"text": "sneaky"}))
    with pytest.raises(InvalidEntry):
        session.append(OtherEntry("mine", {"parentId": None}))


def test_entry_ids_resolve_from_a_unique_prefix(session: Session) -> None:
    entry = session.append(UserMessage("p1"))
    assert session.resolve(entry.id[:20]) == entry.id
    assert session.resolve(entry.id.upper()) == entry.id
    session.append(UserMessage("p2"))
    with pytest.raises(AmbiguousId):
        session.resolve(entry.id[:8])
    with pytest.raises(NoMatchingId):
        session.resolve("zzzz")


def test_a_second_handle_sees_what_the_first_appended(session: Session) -> None:
    other = Session.open(session.path)
    first = session.append(UserMessage("p1"))
    assert other.leaf == first.id
    second = other.append(AssistantMessage("a1"))
    assert second.parent_id == first.id
    assert session.append(UserMessage("p2")).parent_id == second.id


def test_unknown_entry_types_load_as_other_entries(session: Session) -> None:
    session.append(UserMessage("p1"))
    leaf = session.leaf
    with open(session.path, "a") as handle:
        handle.write(
            json.dumps({"id": "x1", "parentId": leaf, "type": "hologram", "ts": "t", "v": 1}) + "\n"
        )
    reopened = Session.open(session.path)
    entry = reopened.get(reopened.leaf)  # type: ignore[arg-type]
    assert entry.body == OtherEntry("hologram", {"v": 1})
    assert entry.type == "hologram"
    assert said(reopened.context()) == ["p1"]


def test_a_newer_format_version_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    header = {"type": "session", "version": 99, "id": "s", "root": "/", "created": "t"}
    path.write_text(json.dumps(header) + "\n")
    with pytest.raises(SessionCorrupt, match="version 99") as caught:
        Session.open(path)
    assert caught.value.line == 1


def test_fsync_only_for_structure_unless_asked_for_every_append(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    synced: list[int] = []
    kinds: list[tuple[str, int]] = []
    real_fsync = os.fsync

    def counting_fsync(fd: int) -> None:
        st = os.fstat(fd)
        synced.append(fd)
        kinds.append(("dir" if stat.S_ISDIR(st.st_mode) else "file", st.st_ino))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", counting_fsync)
    session = Session.create(tmp_path, tmp_path)
    # The new file's content, then the directory that names it: without the
    # second a power cut may keep the file's blocks and lose its name.
    assert kinds == [
        ("file", session.path.stat().st_ino),
        ("dir", session.path.parent.stat().st_ino),
    ]
    synced.clear()
    turn(session, 1)
    turn(session, 2)
    assert synced == []
    session.append(BatchLink(1))
    assert len(synced) == 1
    session.rewind(2)
    assert len(synced) == 2
    durable = Session.open(session.path, sync_every_append=True)
    synced.clear()
    durable.append(UserMessage("p"))
    assert len(synced) == 1


def test_list_sessions_shows_the_most_recently_active_first(tmp_path: Path) -> None:
    directory = tmp_path / "sessions"
    assert list_sessions(directory) == []
    old = Session.create(directory, tmp_path)
    old.append(UserMessage("the old one\nmore"))
    empty = Session.create(directory, tmp_path)
    new = Session.create(directory, tmp_path)
    new.append(UserMessage("the new one"))
    new.append(AssistantMessage("ok"))
    fork = new.fork()
    (directory / "notes.txt").write_text("not a session")
    listed = list_sessions(directory)
    assert [info.id for info in listed] == [fork.id, new.id, empty.id, old.id]
    by_id = {info.id: info for info in listed}
    assert by_id[old.id].first_prompt == "the old one\nmore"
    assert by_id[empty.id].first_prompt is None
    assert by_id[empty.id].last_activity == empty.header.created
    assert by_id[new.id].last_activity == new.last_activity()
    assert by_id[new.id].created == new.header.created
    origin = by_id[fork.id].fork_of
    assert origin is not None and origin.session == new.id


def test_list_sessions_skips_files_without_a_header(tmp_path: Path) -> None:
    good = Session.create(tmp_path, tmp_path)
    (tmp_path / f"{'0' * 26}.jsonl").write_text("garbage\n")
    assert [info.id for info in list_sessions(tmp_path)] == [good.id]


@pytest.mark.parametrize("size", [5_000, 70_000, 2_000_000])
def test_list_sessions_reads_last_activity_past_a_torn_tail_of_any_size(
    tmp_path: Path, size: int
) -> None:
    # A large tool call cut short by a full disk: blocks read from the end may
    # hold no whole line at all.
    session = Session.create(tmp_path, tmp_path)
    entry = session.append(UserMessage("p1"))
    with open(session.path, "ab") as handle:
        handle.write(b'{"id":"x","type":"tool_call","input":"' + b"y" * size)
    [info] = list_sessions(tmp_path)
    assert info.last_activity == entry.ts


def test_list_sessions_reads_last_activity_past_a_torn_tail(tmp_path: Path) -> None:
    session = Session.create(tmp_path, tmp_path)
    entry = session.append(UserMessage("p1"))
    with open(session.path, "ab") as handle:
        handle.write(b'{"id":"half')
    [info] = list_sessions(tmp_path)
    assert info.last_activity == entry.ts


def test_find_session_by_unique_prefix(tmp_path: Path) -> None:
    one = Session.create(tmp_path, tmp_path)
    two = Session.create(tmp_path, tmp_path)
    assert find_session(tmp_path, two.id[:22]) == two.path
    assert find_session(tmp_path, one.id) == one.path
    with pytest.raises(AmbiguousId):
        find_session(tmp_path, one.id[:4])
    with pytest.raises(NoMatchingId):
        find_session(tmp_path / "nowhere", "01")


def test_loading_a_big_session_leaves_the_garbage_collector_as_it_was(tmp_path: Path) -> None:
    session = Session.create(tmp_path, tmp_path)
    session.append_many(UserMessage("x" * 1000) for _ in range(2000))  # > 1 MiB
    assert gc.isenabled()
    Session.open(session.path)
    assert gc.isenabled()
    gc.disable()
    try:
        Session.open(session.path)
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_undecodable_bytes_in_tool_output_round_trip(session: Session) -> None:
    output = b"caf\xe9 \xff".decode("utf-8", "surrogateescape")
    entry = session.append(ToolResult("c1", output))
    assert Session.open(session.path).get(entry.id).body == ToolResult("c1", output)
    assert b"\\udce9" in session.path.read_bytes()
    session.append(AssistantMessage("naïve ✓"))
    assert "naïve ✓".encode() in session.path.read_bytes()  # readable when it can be
