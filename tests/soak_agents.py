"""The soak's sessions: the ways a batch reaches earshot, one kind of session each.

- ``claude``, ``gemini``, ``codex``: an agent's hook events (tests/fake_agent.py),
  the tool's work done here between a call's two events, as the agent would;
  Claude Code and Gemini CLI close a batch per model response, Codex per turn;
- ``bash``: one ``earshot bash`` per batch;
- ``chat``: ``earshot chat -p`` against a scripted model server
  (tests/model_servers), one tool-calling reply per batch.

What each batch does is planned in tests/soak_plans.py.
"""

from __future__ import annotations

import json
import random
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

from earshot_cli import EARSHOT
from fake_agent import FakeAgent, HookRun
from model_servers import AnthropicServer, ToolCall
from soak_plans import Op, perform, shell, writes

#: What a session can be, in the order sessions are given them.
ROLES = ("claude", "gemini", "bash", "chat", "codex")

#: Called with a batch's index before the batch runs, when the tree is between
#: batches and can be pictured.
Mark = Callable[[int], None]


class Role:
    """One session's kind: how its windows of batches are run."""

    name = ""

    def __init__(self, root: Path, env: dict[str, str], index: int, work: Path) -> None:
        self.root = root
        self.env = env
        self.index = index
        self.work = work
        #: The session's earshot id, once known.
        self.session = ""
        #: What the hooks or chat said that a person would see (warnings).
        self.messages: list[str] = []
        self.calls = 0
        #: ``earshot`` processes this session started (hook events among them).
        self.processes = 0
        #: Calls whose tool failed: an edit whose line another session's undo took back.
        self.failed = 0

    def window(self, batches: list[list[Op]], mark: Mark) -> None:
        """Run the batches, calling ``mark(j)`` before each one it can picture."""
        raise NotImplementedError

    def close(self) -> None:
        """The session's end (an agent's SessionEnd)."""

    def earshot(self, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        self.processes += 1
        return subprocess.run(
            [str(EARSHOT), *args],
            cwd=self.root,
            env=self.env,
            input=stdin or "",
            capture_output=True,
            text=True,
            check=False,
            timeout=600,
        )


class BashRole(Role):
    """``earshot bash``: one command per batch, in a session made for it."""

    name = "bash"

    def window(self, batches: list[list[Op]], mark: Mark) -> None:
        if not self.session:
            made = self.earshot("session", "new", "--json")
            assert made.returncode == 0, made.stderr
            self.session = json.loads(made.stdout)["id"]
        for j, ops in enumerate(batches):
            mark(j)
            done = self.earshot("bash", "--session", self.session, " && ".join(map(shell, ops)))
            self.calls += 1
            if done.returncode != 0:
                raise RuntimeError(f"earshot bash -> {done.returncode}: {done.stderr.strip()}")
            self.messages += done.stderr.splitlines()


class ChatRole(Role):
    """``earshot chat -p``: each window is a few runs, each a few tool-calling replies."""

    name = "chat"

    def __init__(self, root: Path, env: dict[str, str], index: int, work: Path) -> None:
        super().__init__(root, env, index, work)
        self.runs = 0
        self.rng = random.Random(index)

    def window(self, batches: list[list[Op]], mark: Mark) -> None:
        j = 0
        while j < len(batches):
            size = min(len(batches) - j, self.rng.randrange(1, 4))
            mark(j)
            self._run(batches[j : j + size])
            j += size

    def _run(self, replies: list[list[Op]]) -> None:
        script: list[Any] = [[*self._calls(ops)] for ops in replies]
        script.append(f"done: {len(replies)} replies")
        with AnthropicServer(script) as server:
            env = {
                **self.env,
                "ANTHROPIC_BASE_URL": server.url,
                "ANTHROPIC_API_KEY": "soak-key",
            }
            args = ["chat", "-p", f"soak run {self.runs}", "--model", "anthropic:claude-soak"]
            args += ["--allow", "bash,write_file,edit", "--json"]
            if self.session:
                args += ["--resume", self.session]
            self.processes += 1
            done = subprocess.run(
                [str(EARSHOT), *args],
                cwd=self.root,
                env=env,
                capture_output=True,
                text=True,
                check=False,
                timeout=600,
            )
            left = server.remaining
        self.runs += 1
        if done.returncode != 0:
            raise RuntimeError(f"earshot chat -> {done.returncode}: {done.stderr.strip()}")
        doc = json.loads(done.stdout)
        self.session = doc["session"]
        self.calls += sum(len(r) for r in script[:-1])
        if left or len(doc["batches"]) != len(replies):
            raise RuntimeError(f"chat made batches {doc['batches']} of {len(replies)} replies")
        self.messages += done.stderr.splitlines()

    @staticmethod
    def _calls(ops: list[Op]) -> list[ToolCall]:
        calls = []
        for op in ops:
            if op.kind == "create":
                calls.append(ToolCall("write_file", {"path": op.path, "content": op.text}))
            elif op.kind == "edit":
                calls.append(ToolCall("edit", {"path": op.path, "old": op.old, "new": op.text}))
            elif op.kind == "share":
                calls.append(ToolCall("read_file", {"path": op.old}))
                calls.append(ToolCall("bash", {"command": shell(op)}))
            else:
                calls.append(ToolCall("bash", {"command": shell(op)}))
        return calls


class HookRole(Role):
    """An agent's hook events, sent by a stand-in agent process."""

    def __init__(self, root: Path, env: dict[str, str], index: int, work: Path) -> None:
        super().__init__(root, env, index, work)
        self.agent = FakeAgent(env, root, agent=self.name, session=f"soak-{self.name}-{index}")
        self.ids = 0
        self.turns = 0
        self.first_prompt = f"soak session {index} ({self.name})"
        self.closed = False

    def send(self, event: str, **fields: Any) -> HookRun:
        self.processes += 1
        ran = self.agent.send(event, **fields)
        if ran.rc != 0:
            raise RuntimeError(f"hook {event} -> {ran.rc}: {ran.stderr.strip()}")
        answer = ran.answer()
        if answer and answer.get("systemMessage"):
            self.messages.append(f"{event}: {answer['systemMessage']}")
        if answer and answer.get("decision") in ("block", "deny"):
            raise RuntimeError(f"hook {event} refused: {answer}")
        return ran

    def prompt_text(self) -> str:
        self.turns += 1
        return self.first_prompt if self.turns == 1 else f"turn {self.turns}"

    def new_id(self) -> str:
        self.ids += 1
        return f"{self.name}-{self.index}-call-{self.ids:06d}"

    def perform(self, op: Op) -> str | None:
        """The tool's work, done here between its two events; its error, if any."""
        self.calls += 1
        error = perform(self.root, op)
        self.failed += error is not None
        return error

    def find_session(self) -> None:
        """The earshot session the agent's session is bound to (by its first prompt)."""
        if self.session:
            return
        done = self.earshot("sessions", "--json")
        assert done.returncode == 0, done.stderr
        found = [
            s["id"]
            for s in json.loads(done.stdout)["sessions"]
            if s.get("first_prompt") == self.first_prompt
        ]
        if len(found) != 1:
            raise RuntimeError(f"no one session for {self.first_prompt!r}: {found}")
        self.session = found[0]

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        try:
            self.send("SessionEnd", reason="other")
        finally:
            self.agent.close()


class ClaudeRole(HookRole):
    """Claude Code: a window is one turn; each batch one model response."""

    name = "claude"

    def window(self, batches: list[list[Op]], mark: Mark) -> None:
        if not self.turns:
            self.send("SessionStart", source="startup")
        self.send("UserPromptSubmit", prompt=self.prompt_text(), prompt_id=f"p{self.turns}")
        self.find_session()
        for j, ops in enumerate(batches):
            mark(j)
            for op in ops:
                self._call(op)
            self.send("PostToolBatch", tool_calls=[])
        self.send("Stop", stop_hook_active=False, last_assistant_message="done")

    def _call(self, op: Op) -> None:
        ident = self.new_id()
        if op.kind == "create" or op.kind == "append":
            name = "Write"
            after = (self.root / op.path).read_text() + op.text if op.kind == "append" else op.text
            given: dict[str, Any] = {"file_path": str(self.root / op.path), "content": after}
        elif op.kind == "edit":
            name = "Edit"
            given = {"file_path": str(self.root / op.path), "old_string": op.old}
            given["new_string"] = op.text
        else:
            name, given = "Bash", {"command": shell(op), "description": "soak"}
        self.send("PreToolUse", tool_name=name, tool_input=given, tool_use_id=ident)
        common = {"tool_name": name, "tool_input": given, "tool_use_id": ident}
        error = self.perform(op)
        if error is None:
            self.send("PostToolUse", **common, tool_response={})
        else:
            self.send("PostToolUseFailure", **common, error=error, is_interrupt=False)


class GeminiRole(HookRole):
    """Gemini CLI: a window is one turn; each batch one model response (its next
    BeforeModel closes it)."""

    name = "gemini"

    def window(self, batches: list[list[Op]], mark: Mark) -> None:
        if not self.turns:
            self.send("SessionStart", source="startup")
        prompt = self.prompt_text()
        self.send("BeforeAgent", prompt=prompt)
        self.find_session()
        for j, ops in enumerate(batches):
            mark(j)
            self.send("BeforeModel")
            for op in ops:
                self._call(op)
        self.send("BeforeModel")
        self.send("AfterAgent", prompt=prompt, prompt_response="done")

    def _call(self, op: Op) -> None:
        if op.kind == "create" or op.kind == "append":
            after = (self.root / op.path).read_text() + op.text if op.kind == "append" else op.text
            name, given = "write_file", {"file_path": str(self.root / op.path), "content": after}
        elif op.kind == "edit":
            name = "replace"
            given = {"file_path": str(self.root / op.path), "old_string": op.old}
            given["new_string"] = op.text
        else:
            name, given = "run_shell_command", {"command": shell(op)}
        self.send("BeforeTool", tool_name=name, tool_input=given)
        said = self.perform(op) or ""
        self.send("AfterTool", tool_name=name, tool_input=given, tool_response={"llmContent": said})


class CodexRole(HookRole):
    """Codex CLI: no event ends a model response, so each batch is a turn."""

    name = "codex"

    def window(self, batches: list[list[Op]], mark: Mark) -> None:
        if not self.turns:
            self.send("SessionStart", source="startup", **self._turn())
        for j, ops in enumerate(batches):
            mark(j)
            turn = self._turn()
            self.send("UserPromptSubmit", prompt=self.prompt_text(), **turn)
            self.find_session()
            for op in ops:
                self._call(op, turn)
            self.send("Stop", last_assistant_message="done", **turn)

    def _turn(self) -> dict[str, str]:
        return {"turn_id": f"t{self.turns}", "model": "gpt-soak", "permission_mode": "default"}

    def _call(self, op: Op, turn: dict[str, str]) -> None:
        ident = self.new_id()
        if writes(op):
            name, given = "apply_patch", {"command": self._patch(op)}
        else:
            name, given = "Bash", {"command": shell(op)}
        self.send("PreToolUse", tool_name=name, tool_input=given, tool_use_id=ident, **turn)
        if self.perform(op) is None:  # a patch that fails fires no PostToolUse
            common = {"tool_name": name, "tool_input": given, "tool_use_id": ident}
            self.send("PostToolUse", **common, tool_response="ok", **turn)

    def _patch(self, op: Op) -> str:
        if op.kind == "create":
            body = "".join(f"+{line}\n" for line in op.text.splitlines())
            return f"*** Begin Patch\n*** Add File: {op.path}\n{body}*** End Patch\n"
        if op.kind == "append":
            last = (self.root / op.path).read_text().splitlines()[-1:] or [""]
            hunk = f"@@\n {last[0]}\n+{op.text.rstrip()}\n"
        else:
            hunk = f"@@\n-{op.old}\n+{op.text}\n"
        return f"*** Begin Patch\n*** Update File: {op.path}\n{hunk}*** End Patch\n"


ROLE_CLASSES: dict[str, type[Role]] = {
    "claude": ClaudeRole,
    "gemini": GeminiRole,
    "codex": CodexRole,
    "bash": BashRole,
    "chat": ChatRole,
}
