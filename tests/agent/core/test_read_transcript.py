"""``read_transcript``: the items of a path, its branches and what is never shown, in-process."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from earshot.agent.core import conversation
from earshot.agent.core.transcript import FROM, TO, read_transcript
from earshot.agent.log.entries import (
    AssistantMessage,
    BatchLink,
    Compaction,
    Label,
    OtherEntry,
    Permission,
    ToolCall,
    ToolResult,
    UserMessage,
)
from earshot.agent.log.ids import NoMatchingId

if TYPE_CHECKING:
    from conftest import Lib


def test_a_session_with_no_log_reads_empty_and_gets_none(lib: Lib) -> None:
    shown = read_transcript(lib.project, lib.session)
    assert (shown.items, shown.leaf, shown.shown, shown.current) == ((), None, None, True)
    assert not conversation.log_path(lib.project, lib.session).exists()
    with pytest.raises(NoMatchingId):
        read_transcript(lib.project, lib.session, at="01")


def test_every_node_type_is_an_item_and_labels_are_not(lib: Lib) -> None:
    log = conversation.open_log(lib.project, lib.session)
    user = log.append(UserMessage("go"))
    log.append(Label(user.id, "start"))
    log.append(Permission("bash", {"command": "ls"}))
    log.append(BatchLink(3))
    log.append(Compaction("all of it", None))
    log.append(OtherEntry("thought", {"text": "hmm"}))
    log.append(ToolCall("c1", "bash", {"command": "ls"}))
    log.append(ToolCall("c2", "bash", {"command": "pwd"}))
    second = log.append(ToolResult("c2", "/root"))
    first = log.append(ToolResult("c1", "a.txt"))
    again = log.append(ToolResult("c1", "a second answer"))
    log.append(AssistantMessage("done"))
    shown = read_transcript(lib.project, lib.session)
    assert [i.entry.type for i in shown.items] == [
        "user",
        "permission",
        "batch",
        "compaction",
        "thought",
        "tool_call",
        "tool_call",
        "tool_result",
        "assistant",
    ]
    calls = shown.items[5:7]
    assert [(c.result.id if c.result else None) for c in calls] == [first.id, second.id]
    assert shown.items[7].entry.id == again.id  # a call takes one result: the first
    assert [i.n for i in shown.items] == [1, *[None] * 8]


def test_at_shows_the_most_recent_end_of_the_branch_holding_it(lib: Lib) -> None:
    log = conversation.open_log(lib.project, lib.session)
    prompt = log.append(UserMessage("p1"))
    older = log.append(AssistantMessage("first answer"))
    abandoned = log.append(UserMessage("p2"))
    log.navigate(prompt.id)  # back to after p1: the answer is given again
    newer = log.append(AssistantMessage("second answer"))
    tail = log.append(UserMessage("p2 again"))
    log.navigate(older.id)  # and back to the first answer: the current leaf

    current = read_transcript(lib.project, lib.session)
    assert (current.leaf, current.shown, current.current) == (older.id, older.id, True)
    first, second = (i.entry for i in current.items if not i.entry.is_node)
    assert [(i.entry.id, i.where) for i in current.items] == [
        (prompt.id, None),
        (first.id, TO),
        (older.id, None),
        (second.id, TO),
    ]
    (alternative,) = current.items[2].alternatives
    assert (alternative.id, alternative.first_line, alternative.leaf) == (
        newer.id,
        "second answer",
        tail.id,
    )
    # p1's most recent child is the second answer: --at p1 follows it, to its end.
    by_prompt = read_transcript(lib.project, lib.session, at=prompt.id)
    assert (by_prompt.shown, by_prompt.current) == (tail.id, False)
    assert [(i.entry.id, i.where) for i in by_prompt.items] == [
        (prompt.id, None),
        (first.id, TO),
        (newer.id, None),
        (tail.id, None),
        (second.id, FROM),
    ]
    # A navigation entry stands for its parent, the leaf it left.
    assert read_transcript(lib.project, lib.session, at=first.id).shown == abandoned.id


def test_a_navigation_is_shown_once_where_it_left_or_where_it_went(lib: Lib) -> None:
    log = conversation.open_log(lib.project, lib.session)
    p1 = log.append(UserMessage("p1"))
    a1 = log.append(AssistantMessage("a1"))
    p2 = log.append(UserMessage("p2"))
    left = log.rewind(2).navigation  # to a1, from p2
    p2b = log.append(UserMessage("p2b"))

    def places(at: str | None) -> list[tuple[str, str | None, int | None]]:
        items = read_transcript(lib.project, lib.session, at).items
        # A prompt's number, or the number of the prompt a navigation went back before.
        return [(i.entry.id, i.where, i.n if i.where is None else i.prompt) for i in items]

    assert places(None) == [
        (p1.id, None, 1),
        (a1.id, None, None),
        (left.id, TO, 2),
        (p2b.id, None, 2),
    ]
    assert places(p2.id) == [
        (p1.id, None, 1),
        (a1.id, None, None),
        (p2.id, None, 2),
        (left.id, FROM, 2),
    ]
