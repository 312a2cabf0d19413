"""The model loop of ``earshot chat``: a prompt in, model calls and tool batches, text out.

A turn appends the prompt to the session's log, then asks the model, runs
the tool calls of its reply as one batch (``Engine.run_batch``, as ``earshot
exec`` does), appends the results, and asks again, until the model answers
with text alone. The request is always rebuilt from the log
(``history.messages_of``): what the model sees is what the log says.

Steering. ``steer(text)`` may be called from another thread while a turn
runs: the text is queued and goes in as a user entry right before the next
model call of the turn (after the results of the batch in between), so the
turn goes on and the log says where it went. Text queued after the model's
last call is sent at once, in the same turn.

Interrupting. ``interrupt()`` (a face's Esc; print mode's SIGINT) stops
the streaming reply (its text so far is kept) and the reply's calls
(``reply_batch``: the running command's process group is terminated, the
calls not yet run are skipped, every call gets a result, synthetic where
it did not run, so the next request has a complete history; the batch is
recorded as any other).

No terminal code here: a face implements ``events.Events``.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass, field, replace
from typing import Any

from earshot.agent.log.entries import (
    AssistantMessage,
    Body,
    Compaction,
    ToolCall,
    UserMessage,
)
from earshot.agent.log.session import Session
from earshot.agent.loop.events import Events
from earshot.agent.loop.history import Message, Text, Use, messages_of
from earshot.agent.loop.permissions import Grants
from earshot.agent.loop.provider import Cancel, Provider, ProviderError, Reply, Request
from earshot.agent.loop.reply_batch import ReplyBatch
from earshot.agent.loop.tools import TOOLS
from earshot.agent.loop.workspace import Workspace

#: How long an interrupted model request may take to close before it is left.
ABANDON_AFTER_S = 1.0
#: A reply cut short keeps its text, marked.
CUT_SHORT = "\n\n[interrupted by the user]"
BROKE_OFF = "\n\n[the reply broke off: the model's server failed]"

COMPACT_ASK = (
    "Summarise this conversation so far for yourself, to continue from it with "
    "nothing else: the task, what was decided, what was done (files, commands), "
    "what is left. Answer with the summary only; call no tool."
)


def system_prompt(root: str) -> str:
    return (
        "You are earshot, a coding agent working in the directory "
        f"{root} (the root). Use the tools to read, write and edit files and to "
        "run shell commands there; paths are relative to the root. Every batch of "
        "tool calls is checkpointed: the person can undo it. Be brief."
    )


@dataclass(slots=True)
class TurnResult:
    """How a turn ended: its last text, the batches it made, why it stopped."""

    text: str = ""
    batches: list[int] = field(default_factory=list)
    #: "end_turn", "max_tokens", "interrupted" or "error".
    stop: str = "end_turn"
    error: str | None = None


class Chat:
    """One session's conversation with one model, in one root."""

    def __init__(
        self,
        workspace: Workspace,
        session: str,
        provider: Provider,
        events: Events,
        *,
        grants: Grants | None = None,
    ) -> None:
        self.workspace = workspace
        self.provider = provider
        self.events = events
        self.grants = grants or Grants()
        self.session = session
        self.log: Session = workspace.log(session)
        #: Held while this chat is in the session ('earshot sessions rm' refuses it).
        self._held = workspace.hold_open(session)
        self._queue: list[str] = []
        #: Whether ``steer`` takes text now: from a turn's start to its end.
        self._open = False
        self._lock = threading.Lock()
        self._cancel = Cancel()
        #: The reply whose calls run now (``interrupt`` stops its command).
        self._running: ReplyBatch | None = None

    # -- from any thread ----------------------------------------------------

    def steer(self, text: str) -> bool:
        """Queue ``text`` for the next model call of the running turn; False (not
        queued) when no turn runs, or the one running has made its last call."""
        with self._lock:
            if not self._open:
                return False
            self._queue.append(text)
            return True

    @property
    def steering(self) -> bool:
        """Whether a turn runs that will still make a model call (``steer`` takes text)."""
        with self._lock:
            return self._open

    def take_queued(self) -> list[str]:
        """What was queued and not sent (the turn ended first), taken back."""
        with self._lock:
            waiting, self._queue = self._queue, []
        return waiting

    def _steerable(self, open_: bool) -> None:
        with self._lock:
            self._open = open_

    def _close_if_nothing_queued(self) -> bool:
        """At the end of a turn: steering stops, unless something came in to send
        (then the turn goes on with it). In one step, so no line falls between."""
        with self._lock:
            if self._queue:
                return False
            self._open = False
            return True

    def interrupt(self) -> None:
        """Stop the running turn: the stream, the command, the calls not yet run."""
        self._cancel.cancel()
        running = self._running
        if running is not None:
            running.stop()

    # -- the session --------------------------------------------------------

    def switch(self, session: str) -> None:
        """Go on in ``session`` (a resumed or forked one); grants stay with the process."""
        self.session = session
        self.log = self.workspace.log(session)
        held, self._held = self._held, self.workspace.hold_open(session)
        os.close(held)

    def close(self) -> None:
        """Let go of the session ('earshot sessions rm' may remove it again)."""
        held, self._held = self._held, -1
        if held >= 0:
            os.close(held)

    # -- a turn -------------------------------------------------------------

    def turn(self, prompt: str) -> TurnResult:
        """Run ``prompt`` to the end (or to an interruption, or a provider error).

        ``SessionBusy`` (nothing appended) while another process runs a turn
        of the session.
        """
        self._cancel = Cancel()
        self._steerable(True)
        try:
            with self.log.turn_lock():
                # A call an earlier turn left unanswered (a dead process; results
                # that could not be written) gets its "interrupted" result: the
                # request must be whole. No other turn of the session runs now.
                self.log.close_interrupted_tool_calls()
                self._append(UserMessage(prompt))
                return self._turn()
        finally:
            self._steerable(False)

    def _turn(self) -> TurnResult:
        out = TurnResult()
        while True:
            self._inject()
            try:
                reply = self._ask_model()
            except ProviderError as exc:
                if exc.partial:  # shown as it streamed: the log keeps it too
                    self._append(AssistantMessage(exc.partial + BROKE_OFF))
                out.stop, out.error, out.text = "error", str(exc), exc.partial
                return out
            if reply.text:
                cut = reply.stop == "interrupted"
                self._append(AssistantMessage(reply.text + (CUT_SHORT if cut else "")))
            self.events.reply(reply)
            out.text = reply.text
            if reply.stop == "interrupted":
                out.stop = "interrupted"
                return out
            if not reply.uses:
                if not self._cancel.is_set and not self._close_if_nothing_queued():
                    continue  # typed after the model's last call: it goes in now
                out.stop = reply.stop
                return out
            reply.uses[:] = _unique_ids(reply.uses)
            self.log.append_many([ToolCall(u.id, u.name, u.input) for u in reply.uses])
            calls = ReplyBatch(
                self.workspace, self.session, self.log, self.events, self.grants, self._cancel
            )
            self._running = calls
            try:
                seq = calls.run(reply.uses)
            finally:
                self._running = None
            if seq is not None:
                out.batches.append(seq)
            if self._cancel.is_set:
                out.stop = "interrupted"
                return out

    def _append(self, body: Body) -> None:
        self.log.append(body)

    def _inject(self) -> None:
        with self._lock:
            waiting, self._queue = self._queue, []
        for text in waiting:
            self._append(UserMessage(text))
            self.events.injected(text)

    def _ask_model(self, extra: str | None = None) -> Reply:
        """The model's reply, on a thread of its own: an interruption returns at once.

        A server that has not begun to answer holds the SDK in a blocking
        read no other thread can cut short; so an interrupted request is
        left to end on its own (its thread, its callbacks, ignored), and the
        turn goes on with what had streamed.
        """
        messages = messages_of(self.log.context())
        if extra is not None:
            messages = _with_user_text(messages, extra)
        # Tools even to compact: a conversation holding tool calls needs them declared.
        request = Request(system_prompt(self.workspace.root), messages, TOOLS)
        cancel = self._cancel
        streamed: list[str] = []
        box: dict[str, Any] = {}
        done = threading.Event()

        def on_text(delta: str) -> None:
            if not cancel.is_set:
                streamed.append(delta)
                self.events.text(delta)

        def ask() -> None:
            try:
                box["reply"] = self.provider.reply(request, on_text, cancel)
            except BaseException as exc:  # handed to the turn's thread
                box["error"] = exc
            finally:
                done.set()

        threading.Thread(target=ask, name="earshot-model", daemon=True).start()
        given_up = None
        while not done.wait(0.05):
            if cancel.is_set:
                given_up = given_up or time.monotonic()
                if time.monotonic() - given_up > ABANDON_AFTER_S:
                    return Reply("".join(streamed), [], "interrupted")
        if "error" in box:
            raise box["error"]
        reply: Reply = box["reply"]
        return reply

    # -- compaction -------------------------------------------------------------

    def compact(self) -> str:
        """Have the model summarise the conversation; the context then starts from it."""
        self._cancel = Cancel()
        with self.log.turn_lock():
            self.log.close_interrupted_tool_calls()
            reply = self._ask_model(COMPACT_ASK)
            if reply.stop == "interrupted":
                raise ProviderError("the compaction was interrupted; nothing changed")
            summary = reply.text.strip()
            if not summary:
                raise ProviderError(f"{self.provider.name} gave no summary; nothing changed")
            self._append(Compaction(summary, None))
        return summary


def _unique_ids(uses: list[Use]) -> list[Use]:
    """The calls with an id each: a model that gave one id twice gets the second
    renamed, in its call and its result alike (a request must not hold two)."""
    seen: set[str] = set()
    out = []
    for use in uses:
        ident, n = use.id or "call", 1
        while ident in seen:
            n += 1
            ident = f"{use.id or 'call'}-{n}"
        seen.add(ident)
        out.append(use if ident == use.id else replace(use, id=ident))
    return out


def _with_user_text(messages: list[Message], text: str) -> list[Message]:
    if messages and messages[-1].role == "user":
        last = messages[-1]
        return [*messages[:-1], Message("user", (*last.parts, Text(text)))]
    return [*messages, Message("user", (Text(text),))]
