"""``earshot chat`` on a real pseudo-terminal (pexpect), against a scripted model:
the screen a test reads and types into, and its fixture (``chat``)."""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Callable, Iterator
from typing import Any

import pexpect
import pytest
from earshot_cli import EARSHOT, Cli
from model_servers import AnthropicServer, Turn

#: The pseudo-terminal's answer time for one expected screen (a model turn
#: includes the SDK's import, seconds on a busy machine).
WAIT_S = 60


class Screen:
    """``earshot chat`` running on a pseudo-terminal, and its model."""

    def __init__(
        self, cli: Cli, server: AnthropicServer, *args: str, command: str = "chat"
    ) -> None:
        self.server = server
        env = cli.env(
            ANTHROPIC_BASE_URL=server.url,
            ANTHROPIC_API_KEY="test-key",
            TERM="xterm-256color",
            # pexpect answers no cursor-position request; prompt_toolkit would
            # wait for one, then warn.
            PROMPT_TOOLKIT_NO_CPR="1",
            # The pseudo-terminal's size, whatever a parent said (rich reads these first).
            COLUMNS="160",
            LINES="50",
        )
        self.child = pexpect.spawn(
            str(EARSHOT),
            [command, "--model", "anthropic:claude-test", *args]
            if command
            else ["--model", "anthropic:claude-test", *args],
            cwd=str(cli.root),
            env=env,
            dimensions=(50, 160),
            encoding="utf-8",
            timeout=WAIT_S,
        )
        if log := os.environ.get("EARSHOT_TEST_PTY_LOG"):  # to see what a failure saw
            self.child.logfile_read = open(log, "a")  # noqa: SIM115 (closed by close_log)
        self.child.expect("Esc stops a turn")
        self.session = self._banner_session()
        #: Whether a question's options were on the screen since the last answer.
        self._asked = False

    def _banner_session(self) -> str:
        found = re.search(r"session (\w+)", self.child.before + self.child.after)
        assert found is not None
        return found.group(1)

    def line(self, text: str) -> None:
        self.child.send(text + "\r")

    def expect(self, pattern: str) -> str:
        """Wait for ``pattern`` (a regular expression); what came before it."""
        self.child.expect(pattern)
        before: str = self.child.before
        self._asked = self._asked or "[y" in before + str(self.child.after)
        return before

    def answer(self, key: str) -> None:
        """Answer the question now on the input line with one key.

        The question is drawn on the input line while what precedes it (an
        impact, a call) is printed above by another thread, in either order:
        it may have come before the text a test waited for."""
        if not self._asked:
            self.expect(r"\[y")  # the question's options
        self._asked = False
        self.child.send(key)
        self.child.expect("→ ")  # taken: its echo (what came before it is stale)

    def requests(self, count: int) -> list[dict[str, Any]]:
        """Wait until the model got ``count`` main requests; their bodies."""
        deadline = time.monotonic() + WAIT_S
        while len(self.server.main_requests) < count:
            assert time.monotonic() < deadline, "the model was not asked"
            time.sleep(0.05)
        return self.server.main_requests

    def leave(self) -> str:
        """/exit; what the chat said until it ended."""
        self.line("/exit")
        self.child.expect(pexpect.EOF)
        said: str = self.child.before
        self.child.close()
        assert self.child.exitstatus == 0
        return said

    def close_log(self) -> None:
        if self.child.logfile_read is not None:
            self.child.logfile_read.close()


@pytest.fixture
def chat(cli: Cli) -> Iterator[Callable[..., Screen]]:
    screens: list[Screen] = []
    servers: list[AnthropicServer] = []

    def start(
        script: list[Turn], *args: str, server: AnthropicServer | None = None, command: str = "chat"
    ) -> Screen:
        if server is None:
            server = AnthropicServer(script)
            servers.append(server)
        screens.append(Screen(cli, server, *args, command=command))
        return screens[-1]

    yield start
    for screen in screens:
        if screen.child.isalive():
            screen.child.terminate(force=True)
        screen.close_log()
    for server in servers:
        server.close()


def entries(cli: Cli, session: str) -> list[dict[str, Any]]:
    (path,) = (cli.home / "sessions").glob(f"*/{session}.jsonl")
    return [json.loads(line) for line in path.read_text().splitlines()[1:]]
