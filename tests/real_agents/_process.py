"""Running one agent invocation: its process, its output, and what it leaves behind.

The agent leads a process group of its own, but its tools do not stay in
it (Claude Code, Codex and Gemini CLI each start a shell command in a new
session), so a killed agent can leave a tool running. Every process of a
run inherits a tag variable with the run's own value; :meth:`Running.wait`
kills whatever still carries it, so no test leaks a ``sleep`` into the next.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Final

from ._install import Agent

#: Every process of one run inherits this variable with the run's own value.
RUN_TAG: Final = "EARSHOT_AGENT_RUN"


@dataclass(frozen=True)
class Invocation:
    """Everything needed to start one agent run (see :func:`start` and :func:`run`)."""

    agent: Agent
    argv: tuple[str, ...]
    env: Mapping[str, str]
    cwd: Path
    home: Path


@dataclass(frozen=True)
class AgentRun:
    """What one agent run did. ``session_id`` is read from its JSON output
    (None when it printed none, e.g. when killed); pass it and ``home`` to
    the next run to resume."""

    invocation: Invocation
    rc: int
    stdout: str
    stderr: str
    session_id: str | None
    timed_out: bool

    @property
    def home(self) -> Path:
        return self.invocation.home

    def documents(self) -> list[object]:
        """stdout as JSON: Claude's and Gemini's one document, or Codex's lines."""
        try:
            return [json.loads(self.stdout)]
        except ValueError:
            return [json.loads(line) for line in self.stdout.splitlines() if line.strip()]

    def __str__(self) -> str:
        return (
            f"{self.invocation.agent} -> {self.rc}{' (timed out)' if self.timed_out else ''}\n"
            f"--- stdout\n{self.stdout}\n--- stderr\n{self.stderr}"
        )


class Running:
    """A started agent, leader of its own process group; :meth:`wait` ends it
    and every process it left behind."""

    def __init__(self, invocation: Invocation) -> None:
        self.invocation = invocation
        # Files, not pipes: a tool's orphaned child holding a pipe open would
        # make reading the agent's output wait for that child.
        self._out: IO[bytes] = tempfile.TemporaryFile()  # noqa: SIM115 - closed by wait()
        self._err: IO[bytes] = tempfile.TemporaryFile()  # noqa: SIM115 - closed by wait()
        self.process = subprocess.Popen(
            invocation.argv,
            cwd=invocation.cwd,
            env=dict(invocation.env),
            stdin=subprocess.DEVNULL,
            stdout=self._out,
            stderr=self._err,
            start_new_session=True,
        )
        self.pid = self.process.pid

    def signal(self, number: int, *, group: bool = False) -> None:
        """Send ``number`` to the agent (a ``kill PID``), or with ``group`` to
        its process group (a terminal's Ctrl-C; its tools and hooks run in
        groups of their own, so they do not get it)."""
        with contextlib.suppress(ProcessLookupError):
            if group:
                os.killpg(self.pid, number)
            else:
                self.process.send_signal(number)

    def worker(self) -> int:
        """The process that runs the agent's loop and is its hooks' parent.

        Claude Code is one process; the npm launchers of Codex and Gemini CLI
        start the worker as their one child (Gemini's launcher ignores SIGINT
        and SIGTERM: interrupt this one). Until the child exists, the launcher."""
        if self.invocation.agent == "claude":
            return self.pid
        with os.scandir("/proc") as entries:
            for entry in entries:
                if entry.name.isdigit():
                    with contextlib.suppress(OSError, ValueError, IndexError):
                        with open(f"/proc/{entry.name}/stat") as stat:
                            fields = stat.read().rsplit(")", 1)[1].split()
                        if int(fields[1]) == self.pid:
                            return int(entry.name)
        return self.pid

    def wait(self, timeout: float = 120.0, *, reap: bool = True) -> AgentRun:
        """Wait for the agent to exit, SIGKILLing it after ``timeout``; then
        (with ``reap``) SIGKILL every process of this run still alive."""
        timed_out = False
        try:
            rc = self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            self.signal(signal.SIGKILL, group=True)
            rc = self.process.wait()
        if reap:
            self.signal(signal.SIGKILL, group=True)
            for pid in leftovers(self.invocation):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        stdout, stderr = (_read(stream) for stream in (self._out, self._err))
        found = session_id(stdout, stderr)
        return AgentRun(self.invocation, rc, stdout, stderr, found, timed_out)


#: earshot's watch daemon (and the workers it forks) is started by the first
#: hook that records and outlives the agent by design: a test stops it itself.
_OUTLIVES_THE_AGENT = b"earshot.cli.daemon"


def leftovers(invocation: Invocation) -> list[int]:
    """The live processes carrying this run's tag (its tools, hooks, agents),
    earshot's watch daemon aside."""
    marker = f"\0{RUN_TAG}={invocation.env[RUN_TAG]}\0".encode()
    found = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                with open(f"/proc/{entry.name}/environ", "rb") as environ:
                    if marker not in b"\0" + environ.read() + b"\0":
                        continue
                with open(f"/proc/{entry.name}/cmdline", "rb") as cmdline:
                    if _OUTLIVES_THE_AGENT in cmdline.read():
                        continue
                found.append(int(entry.name))
            except OSError:
                continue  # gone, or not ours to read
    return found


def _read(stream: IO[bytes]) -> str:
    with stream:
        stream.seek(0)
        return stream.read().decode("utf-8", "replace")


def start(invocation: Invocation) -> Running:
    return Running(invocation)


def run(invocation: Invocation, timeout: float = 120.0) -> AgentRun:
    """Run one agent invocation to its end (or ``timeout``)."""
    return start(invocation).wait(timeout)


def session_id(*outputs: str) -> str | None:
    """The session id in an agent's JSON output: Claude's and Gemini's
    document (``session_id``; Gemini prints its error document on stderr),
    or Codex's JSON lines (``thread.started``'s ``thread_id``)."""
    decoder = json.JSONDecoder()
    for output in outputs:
        for line_start in (0, *(i + 1 for i, c in enumerate(output) if c == "\n")):
            if not output.startswith("{", line_start):
                continue
            with contextlib.suppress(ValueError):
                document, _ = decoder.raw_decode(output, line_start)
                for key in ("session_id", "thread_id"):
                    if isinstance(document, dict) and isinstance(document.get(key), str):
                        return str(document[key])
    return None
