"""``earshot ui``: the root's sessions, and the chat, in a browser on this machine."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import socket
import sys
import threading
from types import FrameType
from typing import Any

import click

from .common import configure_logging, discovered, error_kind, fail, root_option, tracker

HOST = "127.0.0.1"


def _listening(port: int) -> socket.socket:
    """A socket on 127.0.0.1:``port`` (0: a free one), listening already."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((HOST, port))
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            fail(f"port {port} is in use on {HOST}: another --port, or --port 0 for a free one")
        fail(f"cannot listen on {HOST}:{port}: {exc.strerror or exc}")
    sock.listen(128)
    sock.set_inheritable(True)
    return sock


@click.command()
@root_option("The working tree whose sessions the page shows and where its chat works.")
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=0,
    show_default=True,
    help="The port on 127.0.0.1; 0 picks a free one.",
)
@click.option("--open", "open_", is_flag=True, help="Open the page in the default browser too.")
@click.option(
    "--model",
    metavar="PROVIDER:NAME",
    help="The composer's model, as 'earshot chat --model' takes it.",
)
@click.option(
    "--allow",
    metavar="TOOLS",
    help="Allow these tools without asking: bash,write_file,edit (comma-separated).",
)
@click.option(
    "--json", "as_json", is_flag=True, help="The first line is a JSON document with the URL."
)
@click.option("-v", "--verbose", count=True, help="Log to stderr (-vv: each request too).")
def ui(
    root: str | None,
    port: int,
    open_: bool,
    model: str | None,
    allow: str | None,
    as_json: bool,
    verbose: int,
) -> None:
    """Serve a page of the root's sessions on 127.0.0.1, with a chat; print its URL first.

    \b
    earshot ui                 a free port; open the URL printed (its token included)
    earshot ui --port 8765 --open

    The page lists the root's sessions (earshot chat's and those recorded
    through Claude Code, Codex or Gemini CLI hooks); shows a session's
    conversation with its branches, each batch of tool calls in place with
    its diff; updates itself within a second when anything appends to the
    session. Each prompt has a ↶ button: back to before it, the
    conversation only or the code too, the impact listed first. Undo and
    redo show what they would do before they do it. Its composer runs the
    loop 'earshot chat' runs (keys as for earshot chat; --allow as there).

    Only this machine can reach it, and only with the URL's token: requests
    without it, with another Host (DNS rebinding) or a change from another
    origin are refused. Ctrl-C stops it; a turn running then is stopped and
    recorded.
    """
    configure_logging(verbose)
    from earshot.agent.loop.permissions import parse_allow
    from earshot.agent.loop.provider import Provider, make_provider
    from earshot.agent.loop.workspace import Workspace
    from earshot.cas.errors import EarshotError

    try:
        root = discovered(root)
        if not os.path.isdir(root):
            fail(f"{root}: no such directory (give --root an existing directory)")
        allowed = parse_allow(allow)
        provider = make_provider(model)
    except EarshotError as exc:
        fail(str(exc), exc.exit_code, error_kind(exc))
    try:
        provider.check()
        missing = None
    except EarshotError as exc:  # the page still shows history; sending says this
        missing = str(exc)

    def model_for_a_chat() -> Provider:
        provider.check()
        return provider

    from .ui import guard
    from .ui.composer import Composer
    from .ui.server import Ui

    sock = _listening(port)
    port = sock.getsockname()[1]
    token = guard.new_token()
    url = f"http://{HOST}:{port}/?token={token}"
    ui_app: Ui | None = None

    def publish(event: dict[str, Any]) -> None:
        if ui_app is not None:
            ui_app.publish(event)

    def notify(text: str) -> None:
        publish({"kind": "notice", "text": text})

    workspace = Workspace(root, tracker=tracker, notify=notify)
    composer = Composer(workspace, model_for_a_chat, publish, allowed)
    about = {"root": workspace.root, "model": provider.name, "model_error": missing}
    ui_app = Ui(workspace, composer, token, about)

    def ready() -> None:
        """Serving: the URL, now that a request made on reading it is answered."""
        if as_json:
            # One line: a script reads the URL with a readline.
            click.echo(json.dumps({"url": url, "port": port, "root": workspace.root}))
        else:
            click.echo(url)
        sys.stdout.flush()
        click.echo(f"earshot: the sessions of {workspace.root} at {url}; Ctrl-C stops", err=True)
        if missing:
            click.echo(f"earshot: the composer cannot send: {missing}", err=True)
        if open_:
            import webbrowser

            threading.Thread(target=webbrowser.open, args=(url,), daemon=True).start()

    ui_app.ready = ready
    # uvicorn stops cleanly on Ctrl-C, then raises it again: Ctrl-C is how this
    # server is meant to end (before it served, too), so it is no failure.
    with contextlib.suppress(KeyboardInterrupt):
        _serve(ui_app, sock, port, verbose)


def _serve(ui_app: Any, sock: socket.socket, port: int, verbose: int) -> None:
    import uvicorn

    class Server(uvicorn.Server):
        def handle_exit(self, sig: int, frame: FrameType | None) -> None:
            ui_app.publish({"kind": "closing"})  # the event streams end: no wait for them
            super().handle_exit(sig, frame)

    config = uvicorn.Config(
        ui_app.app(port),
        log_level="info" if verbose >= 2 else "warning",
        access_log=verbose >= 2,
        lifespan="on",
        ws="none",
        timeout_graceful_shutdown=3,
        server_header=False,
    )
    Server(config).run(sockets=[sock])
