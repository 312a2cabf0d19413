"""Who may talk to ``earshot ui``: the page its URL opened, and nothing else.

The server listens on 127.0.0.1 only, and still every request is checked,
because any web page the person visits can make their browser send one:

- the Host header must name this server (127.0.0.1 or localhost, this
  port): a DNS-rebinding page reaches 127.0.0.1 under its own name, and
  is refused here;
- the token the URL carries must come with it (the ``token`` query
  parameter, the ``X-Earshot-Token`` header, or the cookie the page sets
  when first opened with it): another local program, or a page that
  guessed the port, does not have it;
- a request that changes anything is a POST whose Origin is this
  server's, with the token in its header (a cookie alone is what a
  cross-site form would carry).

An ASGI middleware, so every route, the static files and the event stream
included, passes through it.
"""

from __future__ import annotations

import hmac
import secrets
from collections.abc import Awaitable, Callable, MutableMapping
from http.cookies import SimpleCookie
from typing import Any
from urllib.parse import parse_qs

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

COOKIE = "earshot_token"
HEADER = "x-earshot-token"
#: The methods that change nothing; everything else must come from the page.
SAFE_METHODS = frozenset({"GET", "HEAD"})


def new_token() -> str:
    """A token no one guesses: 32 random bytes, URL-safe."""
    return secrets.token_urlsafe(32)


class Refused(Exception):
    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


class Guard:
    """Refuses (403, one line of text) what does not come from the page on this port."""

    def __init__(self, app: ASGIApp, token: str, port: int) -> None:
        self.app = app
        self.token = token
        self.hosts = frozenset({f"127.0.0.1:{port}", f"localhost:{port}"})
        self.origins = frozenset(f"http://{host}" for host in self.hosts)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self.app(scope, receive, send)
            return
        if scope["type"] != "http":  # no websockets here
            await send({"type": "websocket.close", "code": 1008})
            return
        try:
            self.check(scope)
        except Refused as refused:
            await _refuse(send, refused)
            return
        await self.app(scope, receive, send)

    def check(self, scope: Scope) -> None:
        """Raise ``Refused`` unless the request is the page's."""
        headers = _headers(scope)
        host = headers.get("host", "")
        if host not in self.hosts:
            raise Refused(403, f"earshot ui answers only to {sorted(self.hosts)[0]}, not {host!r}")
        query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
        given_query = (query.get("token") or [""])[0]
        given_header = headers.get(HEADER, "")
        given_cookie = _cookie(headers.get("cookie", ""))
        if scope.get("method", "GET") in SAFE_METHODS:
            if not any(self._matches(t) for t in (given_query, given_header, given_cookie)):
                raise Refused(403, "earshot ui needs the token: open the URL 'earshot ui' printed")
            return
        origin = headers.get("origin", "")
        if origin not in self.origins:
            raise Refused(403, f"earshot ui takes changes only from its own page, not {origin!r}")
        if not self._matches(given_header):
            raise Refused(403, "earshot ui needs the token in the request's header")

    def _matches(self, given: str) -> bool:
        return bool(given) and hmac.compare_digest(given.encode(), self.token.encode())


def _headers(scope: Scope) -> dict[str, str]:
    # A repeated header keeps its first value: one Host, one Origin.
    out: dict[str, str] = {}
    for name, value in scope.get("headers", ()):
        out.setdefault(name.decode("latin-1").lower(), value.decode("latin-1"))
    return out


def _cookie(header: str) -> str:
    jar: SimpleCookie = SimpleCookie()
    try:
        jar.load(header)
    except Exception:  # a malformed cookie header is no token
        return ""
    morsel = jar.get(COOKIE)
    return morsel.value if morsel is not None else ""


async def _refuse(send: Send, refused: Refused) -> None:
    body = (refused.reason + "\n").encode()
    await send(
        {
            "type": "http.response.start",
            "status": refused.status,
            "headers": [
                (b"content-type", b"text/plain; charset=utf-8"),
                (b"content-length", str(len(body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
