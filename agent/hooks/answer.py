"""What earshot answers a hook event with, before each agent's module words it."""

from __future__ import annotations

from dataclasses import dataclass


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
