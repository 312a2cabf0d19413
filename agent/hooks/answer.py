"""What earshot answers a hook event with, before each agent's module words it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from earshot.agent.hooks import quick
from earshot.agent.hooks.events import EventKind, HookEvent


@dataclass(frozen=True, slots=True)
class Answer:
    """The outcome of one hook event.

    ``message``: for the person (a gap in the record, an interrupted batch
    recorded), shown the agent's way. ``deny``: a reason the model sees why
    the tool may not run (``--strict``, when the state before it could not
    be recorded). ``block``: the prompt goes no further; the text is shown.
    Nothing at all: the agent reads an empty stdout.
    """

    message: str | None = None
    deny: str | None = None
    #: The prompt is blocked (it was one of earshot's commands); this is what
    #: the person is shown instead of a model's answer.
    block: str | None = None


SILENT = Answer()


def render(agent: str, event: HookEvent, answer: Answer) -> dict[str, Any] | None:
    """What the agent reads on the hook's stdout; None: print nothing."""
    if answer.block is not None:
        return quick.blocking(agent, answer.block)
    out: dict[str, Any] = {}
    if answer.deny is not None and event.kind is EventKind.PRE_TOOL:
        out |= quick.refusal(agent, event.name, answer.deny)
    if answer.message is not None:
        out["systemMessage"] = answer.message
    return out or None
