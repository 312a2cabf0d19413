"""Models, through their official SDKs: what a provider is asked and answers.

``--model anthropic:NAME`` uses the ``anthropic`` SDK (the Messages API);
``--model openai:NAME`` the ``openai`` SDK (Chat Completions), which also
speaks to every OpenAI-compatible server (llama.cpp, vLLM, Ollama). Base
URLs and keys come from each SDK's own environment variables
(``ANTHROPIC_BASE_URL``, ``ANTHROPIC_API_KEY``, ``OPENAI_BASE_URL``,
``OPENAI_API_KEY``). A missing key is said before any request, naming its
variable (``MissingKey``); a server never reached is said at once, naming
the base URL's (``FirstContact``); past that, retries follow the SDK's own
policy. Every answer is streamed: text reaches ``on_text`` as it comes.

An SDK costs seconds to import (the ``anthropic`` package about 3 s,
``openai`` 1.1 s, on the 2-core machine of benchmarks/history/RESULTS-issues-2-25.md), so it is
imported on first use, and a face starts that import early (``preload``).
"""

from __future__ import annotations

import contextlib
import importlib
import os
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol, TypeVar

from earshot.agent.loop.history import Message, Use
from earshot.agent.loop.tools import ToolSpec
from earshot.cas.errors import EarshotError

#: The model when neither --model nor $EARSHOT_MODEL names one.
DEFAULT_MODEL = "anthropic:claude-sonnet-4-5"
#: provider name -> (the module of its adapter under earshot.agent.loop, its SDK).
PROVIDERS = {"anthropic": ("anthropic_api", "anthropic"), "openai": ("openai_api", "openai")}
#: The most a reply may hold, in tokens (the Messages API wants a bound).
MAX_TOKENS = 8192


class ProviderError(EarshotError):
    """The model's server could not answer: a bad key, a rate limit, the network.

    Said in one line; the session stays usable. ``partial`` is the text
    that streamed before the failure: the log keeps it, marked.
    """

    def __init__(self, message: str, partial: str = "") -> None:
        super().__init__(message)
        self.partial = partial


class MissingKey(ProviderError):
    """No API key in the environment: said before anything is sent."""

    def __init__(self, model: str, variable: str, other: str) -> None:
        super().__init__(f"{model}: no API key: set {variable} ({other})")
        self.variable = variable


class BadModel(EarshotError):
    exit_code = 2

    def __init__(self, text: str) -> None:
        super().__init__(
            f"model {text!r}: give PROVIDER:NAME, PROVIDER one of {', '.join(PROVIDERS)} "
            "(e.g. anthropic:claude-sonnet-4-5, openai:gpt-4o)"
        )


@dataclass(frozen=True, slots=True)
class Request:
    system: str
    messages: Sequence[Message]
    tools: Sequence[ToolSpec]
    max_tokens: int = MAX_TOKENS


@dataclass(slots=True)
class Reply:
    """What a model answered: its text, its tool calls, why it stopped.

    ``stop`` is ``"end_turn"``, ``"tool_use"``, ``"max_tokens"``, or
    ``"interrupted"`` (the stream was cut short by ``Stream.cancel``: the
    text is what came before; the tool calls, none).
    """

    text: str = ""
    uses: list[Use] = field(default_factory=list)
    stop: str = "end_turn"


class Provider(Protocol):
    """A model: streams one reply to a request."""

    @property
    def name(self) -> str:
        """``provider:model``, as --model takes it."""
        ...

    def check(self) -> None:
        """``MissingKey`` when the environment gives no key (nothing is sent)."""
        ...

    def reply(self, request: Request, on_text: Callable[[str], None], cancel: Cancel) -> Reply:
        """Stream one reply; ``ProviderError`` when the server fails."""
        ...


class Cancel:
    """Stops a reply mid-stream from another thread (a face's Esc).

    The adapter registers what closes its stream; ``cancel()`` sets the
    flag and closes it, so a server that sends nothing cannot hold the
    interruption up.
    """

    def __init__(self) -> None:
        self._set = threading.Event()
        self._lock = threading.Lock()
        self._closer: Callable[[], None] | None = None

    @property
    def is_set(self) -> bool:
        return self._set.is_set()

    def clear(self) -> None:
        self._set.clear()

    def cancel(self) -> None:
        self._set.set()
        with self._lock:
            closer, self._closer = self._closer, None
        if closer is not None:
            with contextlib.suppress(Exception):  # a closing stream may raise anything
                closer()

    def on_cancel(self, closer: Callable[[], None] | None) -> None:
        """What closes the stream now open (None once it is done)."""
        with self._lock:
            self._closer = closer
        if closer is not None and self.is_set:
            self.cancel()


_T = TypeVar("_T")


def retried_by_sdk(status: int) -> bool:
    """Whether both SDKs retry a response of ``status`` (their shared policy)."""
    return status in (408, 409, 429) or status >= 500


class FirstContact:
    """Until a provider's server has answered once, its requests are not retried.

    The SDKs retry a connection that fails (twice, with backoff: seconds of
    silence), which helps a flaky network but never a wrong base URL or a
    server that is down; the first request is sent once, so those are said
    at once. Any HTTP answer proves the server is there: from then on the
    SDK's retries are kept, and a first answer the SDK would retry (429,
    5xx) is asked again with them.
    """

    def __init__(self) -> None:
        self.reached = False

    def open(self, create: Callable[[int | None], _T]) -> _T:
        """``create(max_retries)``'s result; ``max_retries`` None: the SDK's own."""
        if self.reached:
            return create(None)
        try:
            opened = create(0)
        except Exception as exc:
            status = getattr(exc, "status_code", None)
            if not isinstance(status, int):
                raise  # never reached: said now, not after the retries
            self.reached = True
            if not retried_by_sdk(status):
                raise
            return create(None)
        self.reached = True
        return opened


def parse_model(text: str | None) -> tuple[str, str]:
    """(provider, model name) of ``--model``/$EARSHOT_MODEL, or the default."""
    spec = text or os.environ.get("EARSHOT_MODEL") or DEFAULT_MODEL
    provider, sep, name = spec.partition(":")
    if not sep or provider not in PROVIDERS or not name.strip():
        raise BadModel(spec)
    return provider, name.strip()


def make_provider(text: str | None) -> Provider:
    """The provider ``--model`` names; its SDK is imported on its first reply."""
    provider, name = parse_model(text)
    module = importlib.import_module(f"earshot.agent.loop.{PROVIDERS[provider][0]}")
    made: Provider = module.make(name)
    return made


def preload(provider: Provider) -> threading.Thread:
    """Import ``provider``'s SDK in the background, while the face starts."""
    sdk = PROVIDERS[provider.name.partition(":")[0]][1]
    thread = threading.Thread(target=importlib.import_module, args=(sdk,), daemon=True)
    thread.start()
    return thread
