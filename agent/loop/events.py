"""What a face is told as a turn goes (``Events``): a face implements it, nothing more."""

from __future__ import annotations

from typing import Protocol

from earshot.agent.core.batch import Batch
from earshot.agent.loop.history import Output, Use
from earshot.agent.loop.permissions import Answer
from earshot.agent.loop.provider import Reply


class Events(Protocol):
    """What a face is told as a turn goes; every method may be called from the turn's thread."""

    def text(self, delta: str) -> None:
        """A piece of the model's reply, as it streams."""

    def reply(self, reply: Reply) -> None:
        """A reply is complete (its tool calls are about to be asked for or run)."""

    def command(self, command: str) -> None:
        """A shell command of the reply starts (its output follows, as ``output``)."""

    def output(self, text: str) -> None:
        """A piece of the running command's output (stdout and stderr), as it comes."""

    def command_ended(self) -> None:
        """The running command ended (its result comes with the batch's, as ``result``)."""

    def result(self, use: Use, output: Output) -> None:
        """What a tool call returned (or why it did not run)."""

    def batch(self, batch: Batch) -> None:
        """The reply's calls are recorded as ``batch``."""

    def injected(self, text: str) -> None:
        """A steering message went into the conversation."""

    def notice(self, text: str) -> None:
        """Something to say in one line (an interrupted operation finished, ...)."""

    def ask(self, tool: str, detail: str) -> Answer:
        """May ``tool`` run (``detail``: the command, the path)?"""
