"""An SDK's failure as one line a person can act on.

Both SDKs raise the same shapes (``APIStatusError`` with ``status_code``
and the server's JSON ``body``; ``APIConnectionError`` and
``APITimeoutError`` for the network), so one reader serves both, by
attribute, without importing either.
"""

from __future__ import annotations

from typing import Any

#: What to do next, per HTTP status ({key}, {url}: the provider's variables).
_HINTS = {
    400: "the request was refused",
    401: "the key was refused: check {key}",
    403: "the key may not use this model",
    404: "no such model or endpoint: check --model and {url}",
    408: "the server timed out",
    413: "the conversation is too large: /compact it",
    429: "rate limited: wait and send again",
    500: "the server failed",
    502: "the server failed",
    503: "the server is unavailable: try again later",
    529: "the server is overloaded: try again later",
}


def _server_message(body: Any) -> str | None:
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and isinstance(inner.get("message"), str):
            return str(inner["message"])
        if isinstance(inner, str):
            return inner
    return None


def _squash(text: str, limit: int = 240) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def one_line_error(
    model: str,
    exc: BaseException,
    *,
    streaming: bool = False,
    key: str = "the API key variable",
    url: str = "the base URL variable",
    base_url: str | None = None,
) -> str:
    """``exc`` raised by an SDK asked for ``model``, in one line; ``streaming``:
    the reply had begun (an error then arrives as an event of the stream).
    ``key`` and ``url`` name the provider's variables, ``base_url`` the
    server that was asked."""
    kind = type(exc).__name__
    status = getattr(exc, "status_code", None)
    if (streaming and kind in ("APIError", "APIStatusError")) or status == 200:
        said = _server_message(getattr(exc, "body", None)) or getattr(exc, "message", str(exc))
        return _squash(f"{model}: the reply broke off: {said}")
    if isinstance(status, int):
        said = _server_message(getattr(exc, "body", None)) or getattr(exc, "message", str(exc))
        hint = _HINTS.get(status, "the server refused the request").format(key=key, url=url)
        return _squash(f"{model}: {hint} (HTTP {status}: {said})")
    where = f" at {base_url}" if base_url else ""
    if kind == "APITimeoutError":
        return _squash(f"{model}: the server{where} did not answer in time (check {url})")
    if kind == "APIConnectionError":
        cause = exc.__cause__ or exc.__context__
        why = f": {cause}" if cause is not None else ""
        return _squash(f"{model}: cannot reach the server{where}{why} (check {url})")
    if kind in ("AuthenticationError", "OpenAIError", "AnthropicError") or "api_key" in str(exc):
        return _squash(f"{model}: {exc}")
    return _squash(f"{model}: the reply could not be read ({kind}: {exc})")
