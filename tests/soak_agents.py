"""The soak's sessions: what each batch does, and the four ways a batch reaches earshot.

A batch is planned as a few operations on the session's own directory
(create, append, edit, delete, remove a folder, move, chmod, symlink, and
a read of a shared file into one of its own), from a model of that
directory; every batch creates or appends something, so each one changes
the tree (undo steps over a batch that changed nothing). The operations
then reach earshot the way each kind of session sends them:

- ``claude``, ``gemini``, ``codex``: an agent's hook events (tests/fake_agent.py),
  the tool's work done here between a call's two events, as the agent would;
  Claude Code and Gemini CLI close a batch per model response, Codex per turn;
- ``bash``: one ``earshot bash`` per batch;
- ``chat``: ``earshot chat -p`` against a scripted model server
  (tests/model_servers), one tool-calling reply per batch.
"""

from __future__ import annotations

import json
import os
import random
import shlex
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from earshot_cli import EARSHOT
from fake_agent import FakeAgent, HookRun
from model_servers import AnthropicServer, ToolCall

#: What a session can be, in the order sessions are given them.
ROLES = ("claude", "gemini", "bash", "chat", "codex")
SHARED = "shared"


# -- a batch's operations, planned on a model of the session's directory ----------


@dataclass(frozen=True)
class Op:
    """One change to the session's directory (paths relative to the root).

    ``kind``: create, append, edit, delete, rmtree, move, chmod, link, or
    share (append a shared file's content: a shared read)."""

    kind: str
    path: str
    text: str = ""  # create/append: the text; edit: the new line; link: the target
    old: str = ""  # edit: the line replaced; move: the destination; share: the source


@dataclass
class Tree:
    """The session's directory as the planner believes it: files, dirs, links."""

    own: str
    files: dict[str, str]
    dirs: set[str]
    links: dict[str, str]

    @classmethod
    def read(cls, root: Path, own: str) -> Tree:
        tree = cls(own, {}, {own}, {})
        for dirpath, dirnames, filenames in os.walk(root / own):
            rel = Path(dirpath).relative_to(root).as_posix()
            tree.dirs.update(f"{rel}/{d}" for d in dirnames if not (Path(dirpath) / d).is_symlink())
            for name in [*filenames, *(d for d in dirnames if (Path(dirpath) / d).is_symlink())]:
                path = Path(dirpath) / name
                if path.is_symlink():
                    tree.links[f"{rel}/{name}"] = os.readlink(path)
                else:
                    tree.files[f"{rel}/{name}"] = path.read_text()
        return tree

    def taken(self, path: str) -> bool:
        return path in self.files or path in self.dirs or path in self.links

    def parents(self, path: str) -> None:
        parent = path.rsplit("/", 1)[0]
        while parent != self.own and parent not in self.dirs:
            self.dirs.add(parent)
            parent = parent.rsplit("/", 1)[0]


#: What a batch does after its first change, each as likely as its count here.
KINDS = ("create", "append", "edit", "edit", "delete", "rmtree", "move", "chmod", "link", "share")


class Planner:
    """Plans each batch of one session, seeded: the same seed, the same plan."""

    def __init__(self, own: str, shared: Sequence[str], seed: int) -> None:
        self.own = own
        self.shared = list(shared)
        self.rng = random.Random(seed)
        self.lines = 0

    def line(self, batch: int) -> str:
        """A line no other line contains (fixed widths, a running number)."""
        self.lines += 1
        return f"{self.own}-b{batch:04d}-l{self.lines:05d}-{self.rng.randrange(16**6):06x}"

    def batch(self, tree: Tree, batch: int) -> list[Op]:
        """One batch's operations, applied to ``tree`` as they are planned."""
        rng = self.rng
        fresh = rng.random() < 0.5 or not tree.files
        ops = [self._create(tree, batch) if fresh else self._append(tree, batch)]
        for _ in range(rng.randrange(4)):
            op = self._other(tree, batch, rng.choice(KINDS))
            if op is not None:
                ops.append(op)
        return ops

    def _pick(self, tree: Tree) -> str | None:
        return self.rng.choice(sorted(tree.files)) if tree.files else None

    def _create(self, tree: Tree, batch: int) -> Op:
        rng = self.rng
        folders = sorted(tree.dirs)
        where = rng.choice(folders)
        if rng.random() < 0.2 and where.count("/") < 4:
            where = f"{where}/d{batch:04d}{rng.randrange(100):02d}"
        path = f"{where}/f{batch:04d}-{self.lines:05d}.txt"
        text = "".join(f"{self.line(batch)}\n" for _ in range(rng.randrange(1, 4)))
        tree.parents(path)
        tree.files[path] = text
        return Op("create", path, text)

    def _append(self, tree: Tree, batch: int) -> Op:
        path = self._pick(tree)
        assert path is not None
        text = f"{self.line(batch)}\n"
        tree.files[path] += text
        return Op("append", path, text)

    def _other(self, tree: Tree, batch: int, kind: str) -> Op | None:
        rng = self.rng
        if kind == "create" or (len(tree.files) < 6 and kind in ("delete", "rmtree", "move")):
            return self._create(tree, batch)
        if kind == "append":
            return self._append(tree, batch) if tree.files else None
        path = self._pick(tree)
        if path is None:
            return None
        if kind == "edit":
            lines = [x for x in tree.files[path].splitlines() if x.startswith(self.own)]
            if not lines:
                return None
            old = rng.choice(lines)
            new = f"{old} edited-b{batch:04d}"
            tree.files[path] = tree.files[path].replace(f"{old}\n", f"{new}\n", 1)
            return Op("edit", path, new, old)
        if kind == "delete":
            del tree.files[path]
            return Op("delete", path)
        if kind == "rmtree":
            inner = sorted(d for d in tree.dirs if d != self.own)
            if not inner:
                return None
            gone = rng.choice(inner)
            for table in (tree.files, tree.links):
                for p in [p for p in table if p.startswith(f"{gone}/")]:
                    del table[p]
            tree.dirs -= {d for d in tree.dirs if d == gone or d.startswith(f"{gone}/")}
            return Op("rmtree", gone)
        if kind == "move":
            dst = f"{rng.choice(sorted(tree.dirs))}/m{batch:04d}-{self.lines:05d}.txt"
            self.lines += 1
            tree.files[dst] = tree.files.pop(path)
            return Op("move", path, old=dst)
        if kind == "chmod":
            return Op("chmod", path, rng.choice(["755", "644", "600"]))
        if kind == "link":
            folder, name = path.rsplit("/", 1)
            link = f"{folder}/l{batch:04d}-{self.lines:05d}"
            self.lines += 1
            tree.links[link] = name
            return Op("link", link, name)
        assert kind == "share"
        source = rng.choice(self.shared)
        tree.files[path] += SHARED_TEXT[source]
        return Op("share", path, old=source)


#: Each shared file's content (read by every session, written by none).
SHARED_TEXT = {f"{SHARED}/s{i}.txt": f"shared line {i}\n" * (i + 1) for i in range(4)}


def shell(op: Op) -> str:
    """The operation as one POSIX shell command, run in the root."""
    q = shlex.quote
    if op.kind in ("create", "append"):
        into = ">" if op.kind == "create" else ">>"
        folder = op.path.rsplit("/", 1)[0]
        return f"mkdir -p {q(folder)} && printf %s {q(op.text)} {into} {q(op.path)}"
    if op.kind == "edit":
        return f"sed -i 's/^{op.old}$/{op.text}/' {q(op.path)}"
    if op.kind == "delete":
        return f"rm {q(op.path)}"
    if op.kind == "rmtree":
        return f"rm -r {q(op.path)}"
    if op.kind == "move":
        return f"mv {q(op.path)} {q(op.old)}"
    if op.kind == "chmod":
        return f"chmod {op.text} {q(op.path)}"
    if op.kind == "link":
        return f"ln -s {q(op.text)} {q(op.path)}"
    assert op.kind == "share"
    return f"cat {q(op.old)} >> {q(op.path)}"


def perform(root: Path, op: Op) -> None:
    """Do the operation here, as an agent's own tool would (files by Python, the
    rest through the shell)."""
    path = root / op.path
    if op.kind == "create":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(op.text)
    elif op.kind == "append":
        path.write_text(path.read_text() + op.text)
    elif op.kind == "edit":
        text = path.read_text()
        assert text.count(f"{op.old}\n") == 1, (op, text)
        path.write_text(text.replace(f"{op.old}\n", f"{op.text}\n"))
    else:
        run_shell(root, shell(op))


def run_shell(root: Path, command: str) -> None:
    done = subprocess.run(
        ["/bin/sh", "-c", command], cwd=root, capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise RuntimeError(f"{command!r} -> {done.returncode}: {done.stderr.strip()}")


def writes(op: Op) -> bool:
    """Whether an agent's file tool would do this (else its shell does)."""
    return op.kind in ("create", "append", "edit")


# -- the ways a batch reaches earshot ---------------------------------------------


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

    def window(self, batches: list[list[Op]], mark: Mark) -> None:
        """Run the batches, calling ``mark(j)`` before each one it can picture."""
        raise NotImplementedError

    def close(self) -> None:
        """The session's end (an agent's SessionEnd)."""

    def earshot(self, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
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
        perform(self.root, op)
        self.send(
            "PostToolUse", tool_name=name, tool_input=given, tool_use_id=ident, tool_response={}
        )
        self.calls += 1


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
        perform(self.root, op)
        self.send("AfterTool", tool_name=name, tool_input=given, tool_response={"llmContent": ""})
        self.calls += 1


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
        perform(self.root, op)
        self.send(
            "PostToolUse",
            tool_name=name,
            tool_input=given,
            tool_use_id=ident,
            tool_response="ok",
            **turn,
        )
        self.calls += 1

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
