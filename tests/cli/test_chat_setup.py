"""``earshot chat`` set up wrong: no key, a base URL nothing answers on.

Each is said at once and names the variable to fix; nothing is retried
until the server has answered once, and no session is left behind.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator

import pexpect
import pytest
from earshot_cli import EARSHOT, Cli
from model_servers import AnthropicServer, ChatCompletionsServer, Fail

#: provider -> (its model, its key variable, its base URL variable, the URL's path).
PROVIDERS = {
    "anthropic": ("anthropic:claude-test", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", ""),
    "openai": ("openai:gpt-test", "OPENAI_API_KEY", "OPENAI_BASE_URL", "/v1"),
}
both = pytest.mark.parametrize("provider", sorted(PROVIDERS))


def env_without(cli: Cli, *names: str, **extra: str) -> dict[str, str]:
    env = cli.env(**extra)
    for name in (*names, "ANTHROPIC_AUTH_TOKEN", "EARSHOT_MODEL"):
        env.pop(name, None)
    return env


class Hangup:
    """A port that takes each connection and closes it unanswered, counting them.

    An SDK that retries connects again: the count is what the model's
    server would have seen."""

    def __init__(self) -> None:
        self._socket = socket.create_server(("127.0.0.1", 0))
        self._socket.settimeout(0.05)
        self.url = f"http://127.0.0.1:{self._socket.getsockname()[1]}"
        self.connections = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._socket.accept()
            except TimeoutError:
                continue
            self.connections += 1
            conn.close()

    def close(self) -> int:
        """Stop; every connection made, those still in the backlog included."""
        if self._stop.is_set():
            return self.connections
        self._stop.set()
        self._thread.join()
        self._socket.setblocking(False)
        with contextlib.suppress(BlockingIOError):
            while True:
                self._socket.accept()[0].close()
                self.connections += 1
        self._socket.close()
        return self.connections


@pytest.fixture
def hangup() -> Iterator[Hangup]:
    port = Hangup()
    yield port
    port.close()


@both
def test_a_missing_key_is_said_at_once_naming_its_variable_and_nothing_is_sent(
    cli: Cli, provider: str
) -> None:
    model, key, url, path = PROVIDERS[provider]
    with AnthropicServer([]) as server:
        # The Anthropic SDK would go to ANTHROPIC_BASE_URL; without a key, nowhere.
        extra = {url: server.url + path} if provider == "anthropic" else {}
        env = env_without(cli, key, url, **extra)
        ran = cli.run("chat", "-p", "hi", "--model", model, env=env, expect=1)
        assert server.exchanges == []
    (line,) = ran.stderr.splitlines()
    assert line.startswith(f"earshot: {model}: no API key: set {key} (")
    assert url in line or provider == "anthropic"
    assert not (cli.home / "sessions").exists() or cli.json("sessions")["sessions"] == []


@both
def test_a_server_that_never_answers_is_said_at_once_without_the_sdks_retries(
    cli: Cli, provider: str, hangup: Hangup
) -> None:
    model, key, url, path = PROVIDERS[provider]
    env = env_without(cli, **{key: "k", url: hangup.url + path})
    ran = cli.run("chat", "-p", "hi", "--model", model, env=env, expect=1, timeout=120)
    assert hangup.close() == 1, "the first request was retried"
    (line,) = ran.stderr.splitlines()
    assert "cannot reach the server at http://127.0.0.1:" in line and f"(check {url})" in line
    assert cli.json("sessions")["sessions"] == []


@both
def test_a_first_answer_the_sdk_retries_is_asked_again_and_the_chat_goes_on(
    cli: Cli, provider: str
) -> None:
    model, key, url, path = PROVIDERS[provider]
    server_class = AnthropicServer if provider == "anthropic" else ChatCompletionsServer
    with server_class([Fail(529, "overloaded"), "Here after all."]) as server:
        env = env_without(cli, **{key: "k", url: server.url + path})
        ran = cli.run("chat", "-p", "hi", "--model", model, "--json", env=env, timeout=120)
        assert ran.json()["text"] == "Here after all."
        assert len(server.main_requests) == 2


def test_a_refused_key_names_its_variable(cli: Cli) -> None:
    with AnthropicServer([Fail(401, "invalid x-api-key")]) as server:
        env = env_without(cli, ANTHROPIC_API_KEY="bad", ANTHROPIC_BASE_URL=server.url)
        ran = cli.run("chat", "-p", "hi", "--model", "anthropic:x", env=env, expect=1)
        assert len(server.main_requests) == 1
    (line,) = ran.stderr.splitlines()
    assert "the key was refused: check ANTHROPIC_API_KEY" in line


def test_the_terminal_chat_without_a_key_stops_before_it_opens(cli: Cli) -> None:
    env = env_without(cli, "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", TERM="xterm-256color")
    child = pexpect.spawn(
        str(EARSHOT), ["chat"], cwd=str(cli.root), env=env, encoding="utf-8", timeout=60
    )
    child.expect(pexpect.EOF)
    child.close()
    assert "no API key: set ANTHROPIC_API_KEY" in child.before
    assert child.exitstatus == 1
    assert not (cli.home / "sessions").exists() or cli.json("sessions")["sessions"] == []
