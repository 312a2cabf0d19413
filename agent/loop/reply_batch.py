"""One reply's tool calls: permitted, run as one batch, each given its result.

The calls run through ``Engine.run_batch``, as ``earshot exec`` runs them.
The engine's command runner is wrapped so that a stop (a face's Esc) can
reach the running command: the wrapper knows its process group
(``on_spawn``), which gets SIGTERM, then SIGKILL after ``KILL_AFTER_S``,
and a command asked for after the stop is not started; the engine then
skips the batch's later calls, as for a signal, and records the batch.
Every call past the stop is told so (``NOT_RUN``, ``STOPPED``), so the next
request has a result for each.
"""

from __future__ import annotations

import codecs
import contextlib
import os
import shlex
import signal
import threading
from collections.abc import Sequence
from typing import Any

from earshot.agent.core.calls import Bash, Call, EditFile, WriteFile, error_text
from earshot.agent.core.command import Ran, run_command
from earshot.agent.core.engine import BatchNotRecorded, Outcome
from earshot.agent.log.entries import Body, Permission, ToolResult
from earshot.agent.log.session import Session
from earshot.agent.loop.events import Events
from earshot.agent.loop.history import Output, Use
from earshot.agent.loop.permissions import Answer, Grants
from earshot.agent.loop.provider import Cancel
from earshot.agent.loop.tools import done_text, output_cap, result_text, to_call
from earshot.agent.loop.workspace import Workspace
from earshot.cas.errors import EarshotError
from earshot.cas.procs import start_time

#: How long a command may outlive the SIGTERM a stop sends it.
KILL_AFTER_S = 3.0
#: What a call the stop kept from running is told; and a command it stopped.
NOT_RUN = "[interrupted by the user before this call ran]"
STOPPED = "[interrupted by the user: the command was stopped]"


def _detail(call: Call) -> str:
    if isinstance(call, Bash):
        return call.command
    if isinstance(call, WriteFile):
        return f"{call.path} ({len(call.content):,} bytes)"
    if isinstance(call, EditFile):
        return call.path
    return str(call)


class ReplyBatch:
    """The calls of one reply in one session, stoppable from another thread."""

    def __init__(
        self,
        workspace: Workspace,
        session: str,
        log: Session,
        events: Events,
        grants: Grants,
        cancel: Cancel,
    ) -> None:
        self.workspace = workspace
        self.session = session
        self.log = log
        self.events = events
        self.grants = grants
        self.cancel = cancel
        self._lock = threading.Lock()
        self._pgid: int | None = None
        #: Per command the engine ran: "ran", "stopped" or "skipped".
        self._commands: list[str] = []

    def stop(self) -> None:
        """The running command's group gets SIGTERM (``cancel`` is already set)."""
        with self._lock:
            pgid = self._pgid
        if pgid is not None:
            _terminate(pgid)

    def run(self, uses: Sequence[Use]) -> int | None:
        """Run a reply's calls as one batch; append a result for every one of them;
        the batch's number (None: no batch)."""
        outputs: list[Output | None] = [None] * len(uses)
        runnable: list[tuple[int, Use, Call]] = []
        for position, use in enumerate(uses):
            call = to_call(use.name, use.input) if use.bad is None else use.bad
            if isinstance(call, str):
                outputs[position] = Output(use.id, call, True)
            elif self.cancel.is_set:
                outputs[position] = Output(use.id, NOT_RUN, True)
            elif not self._permitted(use, call):
                denied = f"denied: the person did not allow {use.name} here"
                stopped = self.cancel.is_set  # Esc at the question stops the turn
                outputs[position] = Output(use.id, NOT_RUN if stopped else denied, True)
            else:
                runnable.append((position, use, call))
        outcome: Outcome | str | None = None
        if runnable and not self.cancel.is_set:
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
            self.log.append(Permission(tool, {"scope": "session", "by": "--allow"}))
        if not self.grants.needs_asking(tool):
            return True
        answer = self.events.ask(tool, _detail(call))
        if answer is Answer.DENY or self.cancel.is_set:
            return False
        self.grants.take(tool, answer)
        self.log.append(Permission(tool, {"scope": answer.value, "call": use.id}))
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
        if self.cancel.is_set:
            self._commands.append("skipped")
            return Ran(-int(signal.SIGTERM), "", int(signal.SIGTERM))

        def spawned(pgid: int) -> None:
            with self._lock:
                self._pgid = pgid
            if self.cancel.is_set:
                _terminate(pgid)

        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

        def output(chunk: bytes) -> None:
            if text := decoder.decode(chunk):
                self.events.output(text)

        self.events.command(argv[-1] if argv[1:2] == ["-c"] else shlex.join(argv))
        try:
            ran = run_command(
                argv, cwd, capture, kwargs.get("on_start"), on_spawn=spawned, on_output=output
            )
        finally:
            with self._lock:
                self._pgid = None
            self.events.command_ended()
        if self.cancel.is_set:
            self._commands.append("stopped")
            return Ran(ran.returncode, ran.output, int(signal.SIGTERM))
        self._commands.append("ran")
        return ran


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
