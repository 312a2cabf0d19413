"""The web application of ``earshot ui``: routes over ``views``, ``actions`` and ``composer``.

Reads are GETs that return the documents ``views`` builds; changes are
POSTs with a JSON body (``guard`` has checked their origin and token).
The work itself (opening the store, a dry run, an undo) runs on a worker
thread, never on the event loop, so a long undo does not stall the event
stream of the other pages. An error is ``{"error": {"message", "kind"}}``
with the status the CLI's exit code suggests: 400 for what the request
got wrong, 409 for what another action holds now.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Callable
from importlib import resources
from typing import Any

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response, StreamingResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from earshot.agent.core.conversation import find
from earshot.agent.log.session import RewindInProgress, SessionBusy
from earshot.agent.loop.workspace import Workspace
from earshot.cas.errors import EarshotError

from ..common import error_kind
from . import guard, live, markup, views
from .actions import Actions, Busy, Moved
from .composer import Composer

#: The statuses of errors that say "not now": another action or turn holds the session.
_CONFLICTS = (Busy, Moved, SessionBusy, RewindInProgress)
#: A comment line on the event stream this often, so a closed page is noticed.
KEEPALIVE_S = 15.0


class BadRequest(EarshotError):
    exit_code = 2


def _error(exc: BaseException) -> JSONResponse:
    if isinstance(exc, EarshotError):
        status = 409 if isinstance(exc, _CONFLICTS) else 400
        message = str(exc)
    else:
        status, message = 500, f"{type(exc).__name__}: {exc}"
    return JSONResponse({"error": {"message": message, "kind": error_kind(exc)}}, status)


async def _body(request: Request) -> dict[str, Any]:
    try:
        doc = await request.json()
    except ValueError:
        raise BadRequest("the request's body is not JSON") from None
    if not isinstance(doc, dict):
        raise BadRequest("the request's body is not a JSON object")
    return doc


def _int(doc: dict[str, Any], key: str, default: int | None = None) -> int:
    value = doc.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise BadRequest(f"{key} is a number from 1 up, not {value!r}")
    return value


class Ui:
    """The application and the objects its routes share."""

    def __init__(self, workspace: Workspace, composer: Composer, token: str, about: dict[str, Any]):
        self.workspace = workspace
        self.composer = composer
        self.actions = Actions(composer)
        self.token = token
        self.about = about
        self.hub: live.Hub | None = None
        #: Called once the application has started (``earshot ui`` prints its URL).
        self.ready: Callable[[], None] = lambda: None

    # -- helpers ------------------------------------------------------------

    async def _work(self, func: Callable[..., Any], *args: Any, **kwargs: Any) -> Response:
        try:
            return JSONResponse(await run_in_threadpool(func, *args, **kwargs))
        except Exception as exc:
            return _error(exc)

    def _known(self, text: str) -> str:
        """The session ``text`` names (an id or unique prefix); an error if none."""
        if not views.recorded(self.workspace):
            raise BadRequest("nothing recorded in this root yet")
        with self.workspace.project(finish=False) as project:
            ident = find(project, text)
        if ident is None:
            raise BadRequest(f"no session {text!r}")
        return ident

    def publish(self, event: live.Event) -> None:
        if self.hub is not None:
            self.hub.publish(event)

    # -- pages --------------------------------------------------------------

    async def index(self, request: Request) -> Response:
        page = resources.files(__package__).joinpath("static/index.html").read_text()
        response = HTMLResponse(page.replace("{{TOKEN}}", self.token))
        response.set_cookie(guard.COOKIE, self.token, httponly=True, samesite="strict")
        response.headers["Cache-Control"] = "no-store"
        return response

    async def highlight_css(self, request: Request) -> Response:
        return Response(markup.stylesheet(), media_type="text/css")

    # -- reads --------------------------------------------------------------

    async def state(self, request: Request) -> Response:
        def read() -> dict[str, Any]:
            return {**self.about, "sessions": views.sessions(self.workspace)["sessions"]}

        return await self._work(read)

    async def session(self, request: Request) -> Response:
        at = request.query_params.get("at") or None

        def read() -> dict[str, Any]:
            ident = self._known(request.path_params["session"])
            doc = views.session(self.workspace, ident, at)
            doc["running"] = self.composer.running(ident)
            doc["questions"] = self.composer.questions(ident)
            return doc

        return await self._work(read)

    async def batch(self, request: Request) -> Response:
        def read() -> dict[str, Any]:
            ident = self._known(request.path_params["session"])
            return views.diff(self.workspace, ident, int(request.path_params["seq"]))

        return await self._work(read)

    async def events(self, request: Request) -> Response:
        hub = self.hub
        assert hub is not None

        async def stream() -> AsyncIterator[str]:
            async with hub.subscribed() as queue:
                yield ": earshot\n\n"
                while True:
                    try:
                        event = await asyncio.wait_for(queue.get(), KEEPALIVE_S)
                    except TimeoutError:
                        yield ": still here\n\n"
                        continue
                    if event.get("kind") == "closing":
                        return
                    yield f"data: {json.dumps(event)}\n\n"

        headers = {"Cache-Control": "no-store", "X-Accel-Buffering": "no"}
        return StreamingResponse(stream(), media_type="text/event-stream", headers=headers)

    # -- changes ------------------------------------------------------------

    async def new_session(self, request: Request) -> Response:
        return await self._work(lambda: {"session": self.composer.new_session()})

    async def prompt(self, request: Request) -> Response:
        try:
            body = await _body(request)
        except EarshotError as exc:
            return _error(exc)
        text = body.get("text")

        def send() -> dict[str, Any]:
            if not isinstance(text, str):
                raise BadRequest("text is the prompt, a string")
            ident = self._known(request.path_params["session"])
            return {"session": ident, "sent": self.composer.send(ident, text)}

        return await self._work(send)

    async def stop(self, request: Request) -> Response:
        def stop() -> dict[str, Any]:
            ident = self._known(request.path_params["session"])
            return {"session": ident, "stopped": self.composer.stop(ident)}

        return await self._work(stop)

    async def answer(self, request: Request) -> Response:
        try:
            body = await _body(request)
        except EarshotError as exc:
            return _error(exc)

        def give() -> dict[str, Any]:
            self.composer.answer(request.path_params["question"], str(body.get("answer")))
            return {"answered": True}

        return await self._work(give)

    async def act(self, request: Request) -> Response:
        """``rewind``, ``undo``, ``redo``: a preview, or the deed with what was shown."""
        what = request.path_params["action"]
        preview = request.path_params.get("step") == "preview"
        try:
            body = await _body(request)
        except EarshotError as exc:
            return _error(exc)

        def run() -> dict[str, Any]:
            if what not in ("rewind", "undo", "redo") or request.path_params.get("step") not in (
                None,
                "preview",
            ):
                raise BadRequest(f"no action {request.url.path!r}")
            ident = self._known(request.path_params["session"])
            shown = body.get("shown")
            force = body.get("force") is True
            if what == "rewind":
                n = _int(body, "n")
                if preview:
                    return self.actions.rewind_preview(ident, n)
                code = body.get("code") is True
                return self.actions.rewind(ident, n, code=code, force=force, shown=shown)
            count = _int(body, "count", 1) if what == "undo" else 1
            if preview:
                return self.actions.preview(ident, what, count)
            return self.actions.apply(ident, what, count, force=force, shown=shown)

        return await self._work(run)

    # -- the application -----------------------------------------------------

    @contextlib.asynccontextmanager
    async def lifespan(self, app: Starlette) -> AsyncIterator[None]:
        self.hub = live.Hub(asyncio.get_running_loop())
        watching = asyncio.create_task(
            live.watch(live.Changes(self.workspace.root, self.workspace.home), self.hub)
        )
        self.ready()
        try:
            yield
        finally:
            watching.cancel()
            self.hub.publish({"kind": "closing"})
            await run_in_threadpool(self.composer.close)

    def app(self, port: int) -> guard.Guard:
        session = "/api/sessions/{session}"
        routes = [
            Route("/", self.index),
            Route("/highlight.css", self.highlight_css),
            Mount("/static", StaticFiles(packages=[(__package__ or "", "static")])),
            Route("/api/state", self.state),
            Route("/api/events", self.events),
            Route("/api/sessions", self.new_session, methods=["POST"]),
            Route(session, self.session),
            Route(session + "/batches/{seq:int}", self.batch),
            Route(session + "/prompt", self.prompt, methods=["POST"]),
            Route(session + "/stop", self.stop, methods=["POST"]),
            Route(session + "/{action:str}/{step:str}", self.act, methods=["POST"]),
            Route(session + "/{action:str}", self.act, methods=["POST"]),
            Route("/api/questions/{question}", self.answer, methods=["POST"]),
        ]
        inner = Starlette(routes=routes, lifespan=self.lifespan)
        return guard.Guard(inner, self.token, port)
