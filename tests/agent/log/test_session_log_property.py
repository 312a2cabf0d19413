"""Random appends, compactions, rewinds and forks against a simple list model."""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from earshot.agent.log.entries import (
    AssistantMessage,
    Compaction,
    Entry,
    ToolCall,
    ToolResult,
    UserMessage,
)
from earshot.agent.log.session import Session

Item = tuple[str, str]  # (kind, text): what the model should see


def seen(context: tuple[Entry, ...]) -> list[Item]:
    out: list[Item] = []
    for entry in context:
        body = entry.body
        if isinstance(body, UserMessage):
            out.append(("user", body.text))
        elif isinstance(body, AssistantMessage):
            out.append(("assistant", body.text))
        elif isinstance(body, ToolCall):
            out.append(("call", body.call_id))
        elif isinstance(body, ToolResult):
            out.append(("result", body.call_id))
        elif isinstance(body, Compaction):
            out.append(("summary", body.summary))
        else:
            raise AssertionError(f"{entry.type} in a context")
    return out


@dataclass
class Model:
    """The context as a plain list, and a snapshot of it before each prompt."""

    context: list[tuple[Item, Entry]] = field(default_factory=list)
    prompts: list[tuple[str, list[tuple[Item, Entry]]]] = field(default_factory=list)


operations = st.lists(
    st.one_of(
        st.tuples(st.just("prompt"), st.integers(0, 10**6)),
        st.tuples(st.just("tool"), st.integers(0, 10**6)),
        st.tuples(st.just("rewind"), st.integers(0, 1000)),
        st.tuples(st.just("compact"), st.integers(-1, 1000)),
        st.tuples(st.just("fork"), st.integers(0, 1000)),
        st.tuples(st.just("reopen"), st.just(0)),
    ),
    max_size=40,
)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(operations)
def test_context_and_prompts_follow_a_list_model(ops: list[tuple[str, int]]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        session = Session.create(Path(tmp), tmp)
        model = Model()
        grown = session.path.read_bytes()
        for step, (op, arg) in enumerate(ops):
            if op == "prompt":
                text = f"prompt {step} {arg}"
                model.prompts.append((text, list(model.context)))
                user = session.append(UserMessage(text))
                answer = session.append(AssistantMessage(f"answer {step}"))
                model.context += [(("user", text), user), (("assistant", f"answer {step}"), answer)]
            elif op == "tool":
                call_id = f"call{step}"
                call, result = session.append_many(
                    [ToolCall(call_id, "t"), ToolResult(call_id, arg)]
                )
                model.context += [(("call", call_id), call), (("result", call_id), result)]
            elif op == "rewind" and model.prompts:
                n = arg % len(model.prompts) + 1
                text, before = model.prompts[n - 1]
                assert session.rewind(n).text == text
                model.context = list(before)
                del model.prompts[n - 1 :]
            elif op == "compact":
                kept = [i for i, (item, _) in enumerate(model.context) if item[0] != "summary"]
                summary = f"summary {step}"
                if arg < 0 or not kept:
                    compaction = session.append(Compaction(summary, None))
                    model.context = [(("summary", summary), compaction)]
                else:
                    start = kept[arg % len(kept)]
                    first = model.context[start][1]
                    compaction = session.append(Compaction(summary, first.id))
                    model.context = [(("summary", summary), compaction), *model.context[start:]]
            elif op == "fork" and model.prompts:
                n = arg % len(model.prompts) + 1
                fork = session.fork(n)
                assert seen(fork.context()) == [item for item, _ in model.prompts[n - 1][1]]
            elif op == "reopen":
                session = Session.open(session.path)

            assert seen(session.context()) == [item for item, _ in model.context]
            assert [e.id for e in session.context()] == [e.id for _, e in model.context]
            assert [p.text for p in session.prompts()] == [text for text, _ in model.prompts]
            data = session.path.read_bytes()
            assert data.startswith(grown)  # append-only, always
            grown = data

        reloaded = Session.open(session.path)
        assert seen(reloaded.context()) == [item for item, _ in model.context]
