"""``earshot ui`` for tests: the real script as a server, and Debian's chromium to look at it.

``UiServer`` starts ``earshot ui --port 0 --json`` on a test's home and
root, reads the URL from its first line, and stops it with SIGINT (as
Ctrl-C does), waiting for it to end. ``browser`` launches /usr/bin/chromium
headless through Playwright's Python package (its own browser download is
never used; ``.ci/run`` installs Debian's), with the flags a closed
network needs: no background connections, no component updates.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from earshot_cli import EARSHOT, Cli

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",  # as root, chromium's sandbox refuses to start
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


class UiServer:
    """A running ``earshot ui``."""

    def __init__(self, cli: Cli, env: dict[str, str], *args: str) -> None:
        self.cli = cli
        self.proc = subprocess.Popen(
            [str(EARSHOT), "ui", "--port", "0", "--json", *args],
            cwd=cli.root,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        assert self.proc.stdout is not None
        first = self.proc.stdout.readline()
        if not first:
            self.proc.wait(30)
            assert self.proc.stderr is not None
            raise AssertionError(f"earshot ui did not start: {self.proc.stderr.read().decode()}")
        doc = json.loads(first)
        self.url: str = doc["url"]
        self.port: int = doc["port"]
        self.token = self.url.split("token=", 1)[1]
        self.base = f"http://127.0.0.1:{self.port}"
        self.stderr: list[str] = []
        # Drained as it comes: a full pipe would stall the server.
        self._drain = threading.Thread(target=self._read_stderr, daemon=True)
        self._drain.start()

    def _read_stderr(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.stderr.append(line.decode(errors="replace"))

    def stop(self) -> int:
        """Ctrl-C, and its exit code once it has ended."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
        try:
            rc = self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            rc = self.proc.wait()
        self._drain.join(10)
        for pipe in (self.proc.stdout, self.proc.stderr):
            if pipe is not None:
                pipe.close()
        return rc

    def request(
        self,
        path: str,
        body: Any = None,
        *,
        token: str | None = "header",
        headers: dict[str, str] | None = None,
    ) -> tuple[int, str]:
        """``(status, body)`` of a request made by hand; ``token``: "header",
        "query", or None for none. A body makes it a POST from the page's origin
        unless ``headers`` says otherwise."""
        url = self.base + path
        sent = {"Host": f"127.0.0.1:{self.port}"}
        if token == "header":
            sent["X-Earshot-Token"] = self.token
        elif token == "query":
            url += ("&" if "?" in url else "?") + f"token={self.token}"
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            sent["Content-Type"] = "application/json"
            sent["Origin"] = self.base
        sent.update(headers or {})
        req = urllib.request.Request(url, data=data, headers=sent)
        try:
            with urllib.request.urlopen(req, timeout=60) as response:
                return response.status, response.read().decode()
        except urllib.error.HTTPError as err:
            with err:
                return err.code, err.read().decode()

    def get(self, path: str) -> Any:
        status, text = self.request(path)
        assert status == 200, (status, text)
        return json.loads(text)


@contextmanager
def ui_server(cli: Cli, env: dict[str, str] | None = None, *args: str) -> Iterator[UiServer]:
    server = UiServer(cli, env or cli.env(), *args)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    """Headless Debian chromium through Playwright, one per test process."""
    if not (os.path.exists(CHROMIUM) and shutil.which("chromium")):
        pytest.skip("no /usr/bin/chromium: .ci/run installs Debian's chromium")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS
        )
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture
def page(browser: Any, tmp_path: Path) -> Iterator[Any]:
    """A fresh browser context and page; its console errors fail the test."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    opened = context.new_page()
    errors: list[str] = []
    opened.on("pageerror", lambda exc: errors.append(str(exc)))
    opened.set_default_timeout(30_000)
    try:
        yield opened
    finally:
        context.close()
    assert not errors, errors
