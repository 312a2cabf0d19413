"""The conversation log joined to the checkpoint history (``agent.conversation``), in-process."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from earshot.agent.core import conversation, navigation
from earshot.agent.core.calls import Bash, WriteFile
from earshot.agent.core.engine import Engine
from earshot.agent.core.records import get_session
from earshot.agent.core.sessions import create_session
from earshot.agent.core.undo import redo, undo
from earshot.agent.log.entries import (
    AssistantMessage,
    BatchLink,
    Entry,
    Navigation,
    UserMessage,
)
from earshot.agent.log.ids import SessionId, new_session_id
from earshot.agent.log.logfile import SessionExists
from earshot.agent.log.session import RewindInProgress, Session
from earshot.agent.log.session import create_session as create_log

if TYPE_CHECKING:
    from conftest import Lib


def _files(root: Path) -> dict[str, bytes]:
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def _log(lib: Lib, session: str | None = None) -> Session:
    return Session.open(conversation.log_path(lib.project, session or lib.session))


def _turn(lib: Lib, engine: Engine, n: int | str, *writes: str) -> None:
    """Prompt ``p<n>``, a batch writing each of ``writes`` (content ``<path>@<n>``), a reply."""
    conversation.say(lib.project, engine.session.id, "user", f"p{n}")
    if writes:
        engine.run_batch([WriteFile(path, f"{path}@{n}".encode()) for path in writes])
    conversation.say(lib.project, engine.session.id, "assistant", f"a{n}")


def _kinds(entries: tuple[Entry, ...]) -> list[str]:
    out = []
    for entry in entries:
        body = entry.body
        if isinstance(body, UserMessage | AssistantMessage):
            out.append(body.text)
        elif isinstance(body, BatchLink):
            out.append(f"batch:{body.batch}")
        else:
            out.append(entry.type)
    return out


def test_a_batch_is_linked_after_the_prompt_and_the_log_is_created_with_the_sessions_id(
    lib: Lib,
) -> None:
    assert not conversation.log_path(lib.project, lib.session).exists()
    engine = lib.engine()
    conversation.say(lib.project, lib.session, "user", "make a")
    engine.run_batch([WriteFile("a.txt", b"a\n")])
    log = _log(lib)
    assert log.id == lib.session
    prompt, link = log.entries()
    assert isinstance(link.body, BatchLink) and link.body.batch == 1
    assert link.parent_id == prompt.id


def test_undo_and_redo_batches_are_linked_too(lib: Lib) -> None:
    engine = lib.engine()
    _turn(lib, engine, 1, "a.txt")
    undo(engine)
    redo(engine)
    assert _kinds(_log(lib).path_to()) == ["p1", "batch:1", "a1", "batch:2", "batch:3"]


def test_an_engine_can_be_told_not_to_link(lib: Lib) -> None:
    seen: list[int] = []
    engine = lib.engine(on_batch=lambda batch: seen.append(batch.seq))
    engine.run_batch([WriteFile("a.txt", b"a\n")])
    assert seen == [1]
    assert not conversation.log_path(lib.project, lib.session).exists()
    lib.engine(link_conversation=False).run_batch([WriteFile("b.txt", b"b\n")])
    assert not conversation.log_path(lib.project, lib.session).exists()


def test_a_log_that_cannot_be_appended_to_leaves_the_batch_recorded(lib: Lib) -> None:
    engine = lib.engine()
    _turn(lib, engine, 1, "a.txt")
    path = conversation.log_path(lib.project, lib.session)
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(lines[0] + b"garbage\n" + b"".join(lines[1:]))
    outcome = lib.engine().run_batch([WriteFile("b.txt", b"b\n")])
    assert outcome.batch.seq == 2
    assert (lib.root / "b.txt").read_bytes() == b"b\n"


def test_rewind_with_code_undoes_exactly_the_batches_after_the_prompt(lib: Lib) -> None:
    root = lib.root
    engine = lib.engine()
    _turn(lib, engine, 1, "a.txt")
    after_first = _files(root)
    _turn(lib, engine, 2, "b.txt", "a.txt")
    engine.run_batch([Bash("mkdir d && echo c > d/c.txt")])
    _turn(lib, engine, 3, "e.txt")
    before = _files(root)

    result = navigation.rewind(engine, 2, code=True)
    assert result.text == "p2"
    assert result.plan.batches == (2, 3, 4)
    assert result.impact is not None
    assert sorted(result.impact.deleted) == ["b.txt", "d/c.txt", "e.txt"]
    assert result.impact.restored == ["a.txt"]
    assert _files(root) == after_first
    assert not (root / "d").exists()
    assert [p.text for p in _log(lib).prompts()] == ["p1"]
    assert result.navigation is not None
    assert result.navigation.body == Navigation(result.plan.target)

    redo(engine)
    assert _files(root) == before


def test_rewind_with_code_and_nothing_to_restore_appends_nothing(lib: Lib) -> None:
    engine = lib.engine()
    _turn(lib, engine, 1, "a.txt")
    _turn(lib, engine, 2)
    path = conversation.log_path(lib.project, lib.session)
    size = path.stat().st_size
    with pytest.raises(navigation.NothingToRestore, match="no batch of this session"):
        navigation.rewind(engine, 2, code=True)
    assert path.stat().st_size == size

    undo(engine)  # batch 1 undone; the undo (batch 2) is self-created
    size = path.stat().st_size
    with pytest.raises(navigation.NothingToRestore, match="already undone"):
        navigation.rewind(engine, 1, code=True)
    assert path.stat().st_size == size
    assert [p.text for p in _log(lib).prompts()] == ["p1", "p2"]


def test_dry_run_changes_neither_the_files_nor_the_log(lib: Lib) -> None:
    engine = lib.engine()
    _turn(lib, engine, 1, "a.txt")
    _turn(lib, engine, 2, "b.txt")
    path = conversation.log_path(lib.project, lib.session)
    data, files = path.read_bytes(), _files(lib.root)
    result = navigation.rewind(engine, 2, code=True, dry_run=True)
    assert result.navigation is None and result.impact is not None
    assert result.impact.deleted == ["b.txt"] and result.impact.record is None
    assert path.read_bytes() == data and _files(lib.root) == files


def test_a_second_rewind_of_the_same_session_is_refused(lib: Lib) -> None:
    engine = lib.engine()
    _turn(lib, engine, 1, "a.txt")
    holder = _log(lib)
    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        with holder.rewind_lock():
            held.set()
            release.wait(10)

    thread = threading.Thread(target=hold)
    thread.start()
    try:
        assert held.wait(10)
        with pytest.raises(RewindInProgress):
            navigation.rewind(engine, 1)
    finally:
        release.set()
        thread.join()
    assert navigation.rewind(engine, 1).text == "p1"


def test_a_fork_never_undoes_the_batches_of_the_session_it_came_from(lib: Lib) -> None:
    engine = lib.engine()
    _turn(lib, engine, 1, "a.txt")
    _turn(lib, engine, 2, "b.txt")
    _turn(lib, engine, 3)
    forked = navigation.fork(lib.project, lib.session, 3)
    assert forked.origin.session == lib.session and forked.prompts == 2
    fork_engine = lib.engine(forked.record.id)
    _turn(lib, fork_engine, "3f", "c.txt")

    plan = navigation.plan_rewind(forked.log, 1)
    assert plan.foreign == (1, 2) and plan.batches == (1,)
    result = navigation.rewind(fork_engine, 1, code=True)
    assert result.impact is not None and result.impact.deleted == ["c.txt"]
    assert sorted(_files(lib.root)) == ["a.txt", "b.txt"]


def test_select_finds_a_session_by_a_prefix_of_either_half_and_completes_it(lib: Lib) -> None:
    made_by_log = create_log(lib.root, home=lib.home)
    record, created = conversation.select(lib.project, made_by_log.id[:20])
    assert record.id == made_by_log.id and not created

    checkpoint_only = create_session(lib.project).id
    record, _ = conversation.select(lib.project, checkpoint_only[:20])
    assert record.id == checkpoint_only
    assert Session.open(conversation.log_path(lib.project, checkpoint_only)).id == checkpoint_only


def test_a_reregistered_session_numbers_its_batches_above_those_its_log_links(
    lib: Lib,
) -> None:
    ident = new_session_id()
    log = Session.create(conversation.log_dir(lib.project), lib.root, session_id=ident)
    log.append(UserMessage("p1"))
    log.append(BatchLink(5))  # a batch of a checkpoint history pruned since
    record, _ = conversation.select(lib.project, ident)
    assert record.next_seq == 6
    assert lib.engine(ident).run_batch([WriteFile("a.txt", b"a")]).batch.seq == 6


def test_continue_picks_the_most_recently_active_session_of_either_half(
    lib: Lib, monkeypatch: pytest.MonkeyPatch
) -> None:
    older = lib.session
    newer = conversation.new_session(lib.project).id
    assert conversation.select(lib.project, None, most_recent=True)[0].id == newer
    conversation.say(lib.project, older, "user", "back to the first")
    monkeypatch.setenv("EARSHOT_SESSION", newer)
    assert conversation.select(lib.project, None, most_recent=True)[0].id == older
    assert conversation.select(lib.project, None)[0].id == newer  # the environment
    ids = [s.id for s in conversation.summaries(lib.project)]
    assert ids == [older, newer]


def test_continue_with_no_session_is_refused(lib: Lib) -> None:
    with lib.project.store.backend.write() as txn:
        txn.delete("sessions", lib.session.encode())
    with pytest.raises(conversation.NoSessionToContinue):
        conversation.select(lib.project, None, most_recent=True)


def test_summaries_merge_both_halves(lib: Lib) -> None:
    engine = lib.engine()
    _turn(lib, engine, 1, "a.txt")
    log_only = create_log(lib.root, home=lib.home).id
    by_id = {s.id: s for s in conversation.summaries(lib.project)}
    mine = by_id[lib.session]
    assert (mine.batches, mine.first_prompt, mine.has_log, mine.has_checkpoints) == (
        1,
        "p1",
        True,
        True,
    )
    other = by_id[log_only]
    assert (other.batches, other.has_log, other.has_checkpoints) == (0, True, False)
    with lib.project.store.backend.read() as view:
        assert get_session(view, log_only) is None


def test_creating_a_log_for_an_id_never_replaces_an_existing_file(lib: Lib) -> None:
    conversation.say(lib.project, lib.session, "user", "p1")
    path = conversation.log_path(lib.project, lib.session)
    data = path.read_bytes()
    with pytest.raises(SessionExists):
        Session.create(
            conversation.log_dir(lib.project), lib.root, session_id=SessionId(lib.session)
        )
    assert path.read_bytes() == data
    assert not [p for p in path.parent.iterdir() if p.name.endswith(".tmp")]
