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
the streaming reply (its text so far is kept), terminates a running
command's process group (SIGTERM, SIGKILL after ``KILL_AFTER_S``), skips
the batch's calls not yet run, and gives every call of the reply a
result, synthetic where it did not run, so the next request has a
complete history. The batch is recorded as any other.

No terminal code here: a face implements ``Events``.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from earshot.agent.core.batch import Batch
from earshot.agent.core.calls import Bash, Call, EditFile, WriteFile, error_text
from earshot.agent.core.command import Ran, run_command
from earshot.agent.core.engine import BatchNotRecorded, Outcome
from earshot.agent.log.entries import (
    AssistantMessage,
    Body,
    Compaction,
    Permission,
    ToolCall,
    ToolResult,
    UserMessage,
)
from earshot.agent.log.session import Session
from earshot.agent.loop.history import Message, Output, Text, Use, messages_of
from earshot.agent.loop.permissions import Answer, Grants
from earshot.agent.loop.provider import Cancel, Provider, ProviderError, Reply, Request
from earshot.agent.loop.tools import TOOLS, done_text, output_cap, result_text, to_call
from earshot.agent.loop.workspace import Workspace
from earshot.cas.errors import EarshotError
from earshot.cas.procs import start_time

#: How long a command may outlive the SIGTERM an interruption sends it.
KILL_AFTER_S = 3.0
#: How long an interrupted model request may take to close before it is left.
ABANDON_AFTER_S = 1.0
#: What a call the interruption kept from running is told.
NOT_RUN = "[interrupted by the user before this call ran]"
STOPPED = "[interrupted by the user: the command was stopped]"
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


class Events(Protocol):
    """What a face is told as a turn goes; every method may be called from the turn's thread."""

    def text(self, delta: str) -> None:
        """A piece of the model's reply, as it streams."""

    def reply(self, reply: Reply) -> None:
        """A reply is complete (its tool calls are about to be asked for or run)."""

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


@dataclass(slots=True)
class TurnResult:
    """How a turn ended: its last text, the batches it made, why it stopped."""

    text: str = ""
    batches: list[int] = field(default_factory=list)
    #: "end_turn", "max_tokens", "interrupted" or "error".
    stop: str = "end_turn"
    error: str | None = None


def _detail(call: Call) -> str:
    if isinstance(call, Bash):
        return call.command
    if isinstance(call, WriteFile):
        return f"{call.path} ({len(call.content):,} bytes)"
    if isinstance(call, EditFile):
        return call.path
    return str(call)


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
        self._queue: list[str] = []
        self._lock = threading.Lock()
        self._cancel = Cancel()
        self._pgid: int | None = None
        #: Per command the engine ran this batch: "ran", "stopped" or "skipped".
        self._commands: list[str] = []

    # -- from any thread ----------------------------------------------------

    def steer(self, text: str) -> None:
        """Queue ``text`` for the next model call of the running turn."""
        with self._lock:
            self._queue.append(text)

    def queued(self) -> list[str]:
        with self._lock:
            return list(self._queue)

    def take_queued(self) -> list[str]:
        """What was queued and not sent (the turn ended first), taken back."""
        with self._lock:
            waiting, self._queue = self._queue, []
        return waiting

    def interrupt(self) -> None:
        """Stop the running turn: the stream, the command, the calls not yet run."""
        self._cancel.cancel()
        with self._lock:
            pgid = self._pgid
        if pgid is not None:
            _terminate(pgid)

    # -- the session --------------------------------------------------------

    def switch(self, session: str) -> None:
        """Go on in ``session`` (a resumed or forked one); grants stay with the process."""
        self.session = session
        self.log = self.workspace.log(session)

    # -- a turn -------------------------------------------------------------

    def turn(self, prompt: str) -> TurnResult:
        """Run ``prompt`` to the end (or to an interruption, or a provider error)."""
        self._cancel = Cancel()
        out = TurnResult()
        # A call of an earlier turn left unanswered (its results could not be
        # written) gets its "interrupted" result: the request must be whole.
        self.log.close_interrupted_tool_calls()
        self._append(UserMessage(prompt))
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
                if self.queued() and not self._cancel.is_set:
                    continue  # typed after the model's last call: it goes in now
                out.stop = reply.stop
                return out
            self.log.append_many([ToolCall(u.id, u.name, u.input) for u in reply.uses])
            seq = self._run(reply.uses)
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

    # -- the tool calls of one reply: one batch ------------------------------

    def _run(self, uses: Sequence[Use]) -> int | None:
        """Run a reply's calls as one batch; append a result for every one of them."""
        outputs: list[Output | None] = [None] * len(uses)
        runnable: list[tuple[int, Use, Call]] = []
        for position, use in enumerate(uses):
            call = to_call(use.name, use.input) if use.bad is None else use.bad
            if isinstance(call, str):
                outputs[position] = Output(use.id, call, True)
            elif self._cancel.is_set:
                outputs[position] = Output(use.id, NOT_RUN, True)
            elif not self._permitted(use, call):
                denied = f"denied: the person did not allow {use.name} here"
                outputs[position] = Output(use.id, denied, True)
            else:
                runnable.append((position, use, call))
        outcome: Outcome | str | None = None
        if runnable and not self._cancel.is_set:
            outcome = self._batch([call for _, _, call in runnable])
            if isinstance(outcome, Outcome):
                for position, output in self._outputs(runnable, outcome):
                    outputs[position] = output
            else:
                for position, use, _ in runnable:
                    outputs[position] = Output(use.id, outcome, True)
        results: list[Body] = []
        for use, maybe in zip(uses, outputs, strict=True):
            output = maybe or Output(use.id, NOT_RUN, True)
            interrupted = output.text == NOT_RUN or output.text.endswith(STOPPED)
            results.append(ToolResult(use.id, output.text, output.is_error, interrupted))
            self.events.result(use, output)
        self.log.append_many(results)
        if not isinstance(outcome, Outcome):
            return None
        self.events.batch(outcome.batch)
        return outcome.batch.seq

    def _permitted(self, use: Use, call: Call) -> bool:
        tool = use.name
        if tool in self.grants.unrecorded:
            self.grants.unrecorded.discard(tool)
            self._append(Permission(tool, {"scope": "session", "by": "--allow"}))
        if not self.grants.needs_asking(tool):
            return True
        answer = self.events.ask(tool, _detail(call))
        if answer is Answer.DENY or self._cancel.is_set:
            return False
        self.grants.take(tool, answer)
        self._append(Permission(tool, {"scope": answer.value, "call": use.id}))
        return True

    def _batch(self, calls: list[Call]) -> Outcome | str:
        """The batch's outcome, or what each of its calls is told when there is none."""
        self._commands = []
        try:
            with self.workspace.engine(self.session, runner=self._runner) as engine:
                return engine.run_batch(calls)
        except BatchNotRecorded as exc:  # the calls ran: their results are lost
            self.events.notice(str(exc))
            return f"[this call ran, but its result is lost: {exc}]"
        except (EarshotError, OSError) as exc:  # before any call ran
            self.events.notice(error_text(exc))
            return f"not run: {error_text(exc)}"

    def _outputs(
        self, runnable: list[tuple[int, Use, Call]], outcome: Outcome
    ) -> list[tuple[int, Output]]:
        """Each call's result as the model is told it; synthetic past an interruption."""
        cap = output_cap()
        out: list[tuple[int, Output]] = []
        commands = iter(self._commands)
        stopped = False
        for (position, use, call), result in zip(runnable, outcome.results, strict=True):
            state = "ran"
            if isinstance(call, Bash) and result.exit_code is not None:
                state = next(commands, "ran")  # the runner saw it: how it went
            if stopped or state == "skipped":
                out.append((position, Output(use.id, NOT_RUN, True)))
                stopped = True
                continue
            text, is_error = result_text(result, cap, done_text(call))
            if state == "stopped":
                out.append((position, Output(use.id, f"{text}\n{STOPPED}", True)))
                stopped = True
                continue
            out.append((position, Output(use.id, text, is_error)))
        return out

    def _runner(self, argv: list[str], cwd: str, capture: bool, **kwargs: Any) -> Ran:
        """``run_command``, stoppable by ``interrupt`` (its group is known here)."""
        if self._cancel.is_set:
            self._commands.append("skipped")
            return Ran(-int(signal.SIGTERM), "", int(signal.SIGTERM))

        def spawned(pgid: int) -> None:
            with self._lock:
                self._pgid = pgid
            if self._cancel.is_set:
                _terminate(pgid)

        try:
            ran = run_command(argv, cwd, capture, kwargs.get("on_start"), on_spawn=spawned)
        finally:
            with self._lock:
                self._pgid = None
        if self._cancel.is_set:
            self._commands.append("stopped")
            return Ran(ran.returncode, ran.output, int(signal.SIGTERM))
        self._commands.append("ran")
        return ran

    # -- compaction -------------------------------------------------------------

    def compact(self) -> str:
        """Have the model summarise the conversation; the context then starts from it."""
        self._cancel = Cancel()
        reply = self._ask_model(COMPACT_ASK)
        if reply.stop == "interrupted":
            raise ProviderError("the compaction was interrupted; nothing changed")
        summary = reply.text.strip()
        if not summary:
            raise ProviderError(f"{self.provider.name} gave no summary; nothing changed")
        self._append(Compaction(summary, None))
        return summary


def _with_user_text(messages: list[Message], text: str) -> list[Message]:
    if messages and messages[-1].role == "user":
        last = messages[-1]
        return [*messages[:-1], Message("user", (*last.parts, Text(text)))]
    return [*messages, Message("user", (Text(text),))]


def _terminate(pgid: int) -> None:
    """SIGTERM the group now, SIGKILL it if it is still there after ``KILL_AFTER_S``."""
    started = start_time(pgid)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGTERM)

    def kill() -> None:
        leader = start_time(pgid)
        if leader is not None and started is not None and leader != started:
            return  # the number names another process's group now
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGKILL)

    timer = threading.Timer(KILL_AFTER_S, kill)
    timer.daemon = True
    timer.start()
