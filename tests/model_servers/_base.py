"""The part every scripted model server shares: a script, a recorder, an HTTP loop.

The real agents are the thing under test, so their model is a script: each
main-loop request (one that offers tools) takes the next turn; requests an
agent makes on the side (titles, routing, classifiers) get a canned answer
and take nothing, so a test's script only names the turns it cares about.
Everything listens on 127.0.0.1 with an ephemeral port: no test may reach
another host, and parallel tests must not collide.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Self
from urllib.parse import urlsplit

JSON = dict[str, Any]


@dataclass(frozen=True)
class ToolCall:
    """One tool call in a model turn: the tool's name and its input.

    ``input`` is a dict for JSON tools; a ``str`` is the raw input of a
    freeform tool (Codex's ``apply_patch``)."""

    name: str
    input: Mapping[str, Any] | str = field(default_factory=dict)
    #: The call's id as the model gives it (default: a fresh one per call).
    id: str | None = None


@dataclass(frozen=True)
class Hang:
    """Answer ``then`` only after ``seconds``: for tests that interrupt an agent
    while it waits on its model. Closing the server ends the wait."""

    seconds: float
    then: Turn = "done"


@dataclass(frozen=True)
class Fail:
    """Answer with an HTTP error ``status`` in the provider's error format.

    An agent that retries takes a turn per attempt. tests/real_agents turns
    the agents' own retries off, but Claude Code still repeats a request
    once after a 400."""

    status: int
    message: str = "scripted failure"


@dataclass(frozen=True)
class Broken:
    """Stream ``text``, then fail mid-reply with an error in the provider's
    streaming format (the Anthropic ``error`` event; an ``error`` chunk of Chat
    Completions). Served by the servers earshot chat talks to."""

    text: str = "partial"
    message: str = "overloaded in the middle of the reply"


@dataclass(frozen=True)
class CutOff:
    """Stream the blocks of ``turn`` whole, then close the connection without the
    reply's end (no ``message_stop``; no ``finish_reason`` or ``[DONE]``), as a
    dropped connection or a proxy would. Served by the servers earshot chat
    talks to."""

    turn: Sequence[ToolCall | str]


#: A turn: final text, or a response of tool calls (a ``str`` inside the list
#: is a text block before them), or a hang, or an error (before or mid-reply).
Turn = str | Sequence[ToolCall | str] | Hang | Fail | Broken | CutOff

#: What an exhausted script answers.
DONE = "done"


@dataclass(frozen=True)
class Exchange:
    """One request the server received."""

    method: str
    path: str
    body: JSON
    headers: Mapping[str, str]
    main: bool
    #: Which script the request drew on ("main", or a lane named in ``lanes``).
    lane: str


def parts(turn: str | Sequence[ToolCall | str]) -> list[ToolCall | str]:
    """A text-or-calls turn as a list of blocks (final text is one text block)."""
    return [turn] if isinstance(turn, str) else list(turn)


def has_tool_calls(blocks: Sequence[ToolCall | str]) -> bool:
    """Whether a response of these blocks asks for tools (so the agent loops)."""
    return any(isinstance(block, ToolCall) for block in blocks)


def call_input(call: ToolCall) -> JSON:
    """The JSON input of a call; a freeform input is wrapped as ``{"input": ...}``."""
    return {"input": call.input} if isinstance(call.input, str) else dict(call.input)


class Handler(BaseHTTPRequestHandler):
    """Reads one request and hands it to the owning server.

    HTTP/1.0: every response ends by closing the connection, so a streamed
    (SSE) body needs neither a length nor chunked encoding."""

    server: _HTTPServer

    def do_GET(self) -> None:
        self._dispatch("GET", {})

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        if self.headers.get("Content-Encoding", "").lower() == "gzip":
            raw = gzip.decompress(raw)
        try:
            body = json.loads(raw) if raw else {}
        except ValueError:
            body = {"_unparsed": raw.decode("utf-8", "replace")}
        self._dispatch("POST", body if isinstance(body, dict) else {"_body": body})

    def _dispatch(self, method: str, body: JSON) -> None:
        # The agent may go away mid-answer (killed, interrupted): nothing to do then.
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            self.server.owner.serve(self, method, body)

    def send_json(self, status: int, payload: object) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()

    def start_sse(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()

    def sse(self, data: object, event: str | None = None) -> None:
        head = f"event: {event}\n" if event is not None else ""
        self.wfile.write(f"{head}data: {json.dumps(data)}\n\n".encode())
        self.wfile.flush()

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: a test's output is the agent's, not the server's access log."""


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True  # a hanging answer must not hold up close()
    owner: ScriptedServer


class ScriptedServer:
    """A model server on 127.0.0.1 answering from ``script``; a context manager.

    ``url`` is the base URL (no trailing slash, no version path);
    ``requests`` the JSON bodies received, in order; ``main_requests`` the
    ones that took a turn; ``exchanges`` the full records.

    ``lanes`` gives some requesters a script of their own: a main-loop
    request that :meth:`lane_of` names (a subagent's, say) takes its turn
    from ``lanes[name]`` when there is one, else from ``script``. A subagent
    runs beside its parent, so one shared script would be taken in an
    order that depends on timing."""

    #: The model name a response reports when the request names none.
    default_model = "scripted"

    def __init__(
        self,
        script: Sequence[Turn] = (),
        *,
        lanes: Mapping[str, Sequence[Turn]] | None = None,
        side_text: str = "ok",
    ) -> None:
        self.script: list[Turn] = list(script)
        self.lanes: dict[str, list[Turn]] = {k: list(v) for k, v in (lanes or {}).items()}
        self.side_text = side_text
        self.exchanges: list[Exchange] = []
        self._lock = threading.Lock()
        self._closed = threading.Event()
        self._ids: Iterator[int] = iter(range(1, 1 << 62))
        self._http = _HTTPServer(("127.0.0.1", 0), Handler)
        self._http.owner = self
        self._thread = threading.Thread(target=self._http.serve_forever, daemon=True)
        self._thread.start()
        self.port: int = self._http.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        """Stop listening and end any hanging answer."""
        self._closed.set()
        self._http.shutdown()
        self._http.server_close()

    @property
    def requests(self) -> list[JSON]:
        with self._lock:
            return [exchange.body for exchange in self.exchanges]

    @property
    def main_requests(self) -> list[JSON]:
        with self._lock:
            return [exchange.body for exchange in self.exchanges if exchange.main]

    @property
    def remaining(self) -> int:
        """Turns not yet taken, of the script and every lane."""
        with self._lock:
            return len(self.script) + sum(len(lane) for lane in self.lanes.values())

    def lane_of(self, headers: Mapping[str, str], body: JSON) -> str:
        """The lane a main-loop request belongs to (each protocol may tell its subagents)."""
        return "main"

    def next_id(self, prefix: str) -> str:
        """A fresh identifier, unique in this server (``toolu_0000…1``)."""
        with self._lock:
            return f"{prefix}{next(self._ids):024d}"

    def record(self, handler: Handler, method: str, body: JSON, *, main: bool) -> Turn | None:
        """Record a request; a main one takes (and returns) the next turn."""
        path = urlsplit(handler.path).path
        headers = {key.lower(): value for key, value in handler.headers.items()}
        lane = self.lane_of(headers, body) if main else "side"
        with self._lock:
            self.exchanges.append(Exchange(method, path, body, headers, main, lane))
            if not main:
                return None
            script = self.lanes.get(lane, self.script)
            return script.pop(0) if script else DONE

    def resolve(self, turn: Turn) -> str | Sequence[ToolCall | str] | Fail | Broken | CutOff | None:
        """Sleep out any hangs; ``None`` when the server closed meanwhile."""
        while isinstance(turn, Hang):
            if self._closed.wait(turn.seconds):
                return None
            turn = turn.then
        return turn

    def serve(self, handler: Handler, method: str, body: JSON) -> None:
        """Answer one request (each protocol's server defines this)."""
        raise NotImplementedError
