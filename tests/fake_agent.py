"""A stand-in for an agent's process: it runs each hook as its child, through
``/bin/sh -c``, as Claude Code does, and lives until the test kills it.

earshot keeps an agent's open batch live while the agent's process lives
(the hook's first ancestor that is not a shell): here that is this helper's
process, so a test can kill "the agent" between two events and see what the
next earshot command does. Payloads are built the way each agent shapes them
(tests/agent/hooks has the real ones the agents sent).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from earshot_cli import EARSHOT

#: The agent process: reads one request a line, runs it, answers one line.
_LOOP = r"""
import json, subprocess, sys
for line in sys.stdin:
    request = json.loads(line)
    done = subprocess.run(
        ["/bin/sh", "-c", request["command"]],
        input=request["payload"].encode(),
        capture_output=True,
        cwd=request["cwd"],
        env=request["env"],
    )
    answer = {"rc": done.returncode, "stdout": done.stdout.decode(), "stderr": done.stderr.decode()}
    sys.stdout.write(json.dumps(answer) + "\n")
    sys.stdout.flush()
"""


@dataclass(frozen=True)
class HookRun:
    """One hook event's run: its exit code and what it printed."""

    rc: int
    stdout: str
    stderr: str

    def answer(self) -> dict[str, Any] | None:
        """The JSON the hook printed (None: nothing), checked to be exactly one document."""
        if not self.stdout.strip():
            return None
        doc = json.loads(self.stdout)
        assert isinstance(doc, dict), self.stdout
        return doc


class FakeAgent:
    """An agent process running ``earshot hook AGENT`` for each event it is given."""

    def __init__(
        self,
        env: dict[str, str],
        cwd: Path,
        *,
        agent: str = "claude",
        session: str = "agent-session-1",
        options: str = "",
    ) -> None:
        #: The environment each hook runs with (a test may change it between events).
        self.env = env
        self.cwd = cwd
        self.agent = agent
        self.session = session
        self.command = f"{EARSHOT} hook {agent} {options}".strip()
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _LOOP],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
            cwd=cwd,
            text=True,
        )

    @property
    def pid(self) -> int:
        return self.proc.pid

    def send(self, event: str, **fields: Any) -> HookRun:
        """Run the hook for ``event`` with the payload's common fields and ``fields``."""
        payload = {
            "session_id": self.session,
            "transcript_path": str(self.cwd / "transcript.jsonl"),
            "cwd": str(self.cwd),
            "hook_event_name": event,
            **fields,
        }
        return self.send_raw(json.dumps(payload))

    def send_raw(self, payload: str) -> HookRun:
        """Run the hook with ``payload`` as its stdin, as is."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        request = {
            "command": self.command,
            "payload": payload,
            "cwd": str(self.cwd),
            "env": self.env,
        }
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        assert line, "the stand-in agent died"
        done = json.loads(line)
        return HookRun(done["rc"], done["stdout"], done["stderr"])

    def kill(self) -> None:
        """The agent dies at once (SIGKILL), between two events."""
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait()
        self.close()

    def close(self) -> None:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=30)
        self.proc.stdout.close()


class Claude(FakeAgent):
    """Claude Code's payloads (field names as its 2.1 hooks send them)."""

    _ids = 0

    def __init__(self, env: dict[str, str], cwd: Path, **options: Any) -> None:
        super().__init__(env, cwd, agent="claude", **options)

    def new_id(self) -> str:
        Claude._ids += 1
        return f"toolu_{Claude._ids:024d}"

    def start(self, source: str = "startup") -> HookRun:
        return self.send("SessionStart", source=source)

    def prompt(self, text: str) -> HookRun:
        return self.send("UserPromptSubmit", prompt=text, prompt_id=f"p-{text[:8]}")

    def pre(self, tool: str, tool_input: dict[str, Any], ident: str, **more: Any) -> HookRun:
        return self.send(
            "PreToolUse", tool_name=tool, tool_input=tool_input, tool_use_id=ident, **more
        )

    def post(
        self,
        tool: str,
        tool_input: dict[str, Any],
        ident: str,
        *,
        error: str | None = None,
        interrupted: bool = False,
        **more: Any,
    ) -> HookRun:
        if error is not None or interrupted:
            return self.send(
                "PostToolUseFailure",
                tool_name=tool,
                tool_input=tool_input,
                tool_use_id=ident,
                error=error or "interrupted",
                is_interrupt=interrupted,
                **more,
            )
        return self.send(
            "PostToolUse",
            tool_name=tool,
            tool_input=tool_input,
            tool_use_id=ident,
            tool_response={},
            **more,
        )

    def bash(self, command: str, run: Any) -> str:
        """A whole Bash call: its PreToolUse, ``run()`` (what the command does), its
        PostToolUse; returns the call's id."""
        ident = self.new_id()
        tool_input = {"command": command, "description": "test"}
        assert self.pre("Bash", tool_input, ident).rc == 0
        run()
        assert self.post("Bash", tool_input, ident).rc == 0
        return ident

    def write(self, path: Path, text: str) -> str:
        """A whole Write call, the file written between its two events."""
        ident = self.new_id()
        tool_input = {"file_path": str(path), "content": text}
        assert self.pre("Write", tool_input, ident).rc == 0
        path.write_text(text)
        assert self.post("Write", tool_input, ident).rc == 0
        return ident

    def response_end(self) -> HookRun:
        return self.send("PostToolBatch", tool_calls=[])

    def stop(self, text: str = "done") -> HookRun:
        return self.send("Stop", stop_hook_active=False, last_assistant_message=text)

    def end(self) -> HookRun:
        return self.send("SessionEnd", reason="other")
