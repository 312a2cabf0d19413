"""``earshot ui`` refuses every request that is not its page's, and says its URL first.

The real script as a server (tests/ui_harness.py), asked by hand with
urllib: what a browser sends, and what a hostile page or another local
program would send instead.
"""

from __future__ import annotations

import json
import socket
import subprocess

import pytest
from earshot_cli import EARSHOT, Cli
from ui_harness import UiServer, ui_server


@pytest.fixture
def server(cli: Cli) -> UiServer:
    cli.new_session()
    with ui_server(cli) as running:
        yield running


def test_the_first_line_is_the_url_with_its_token_and_port_0_picks_a_free_port(
    cli: Cli,
) -> None:
    with subprocess.Popen(
        [str(EARSHOT), "ui", "--port", "0"],
        cwd=cli.root,
        env=cli.env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    ) as proc:
        assert proc.stdout is not None
        first = proc.stdout.readline().decode().strip()
        assert first.startswith("http://127.0.0.1:") and "/?token=" in first
        port = int(first.split(":")[2].split("/")[0])
        assert port > 0
        with socket.create_connection(("127.0.0.1", port), timeout=10):
            pass  # it listens there
        proc.terminate()


def test_it_listens_on_127_0_0_1_only(server: UiServer) -> None:
    # 127.0.0.2 is this machine too: a server on every address would answer there.
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.2", server.port), timeout=10).close()


def test_a_port_in_use_is_one_line_and_exit_1(cli: Cli, check_error) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        ran = cli.run("ui", "--port", str(port), expect=1, timeout=60)
    assert f"port {port} is in use" in check_error(ran)


@pytest.mark.parametrize("path", ["/", "/api/state", "/static/app.js", "/api/events"])
def test_a_request_without_the_token_is_refused(server: UiServer, path: str) -> None:
    status, text = server.request(path, token=None)
    assert status == 403
    assert "token" in text


def test_the_token_in_the_query_or_the_header_is_let_in(server: UiServer) -> None:
    assert server.request("/api/state", token="query")[0] == 200
    assert server.request("/api/state", token="header")[0] == 200


def test_a_wrong_token_is_refused(server: UiServer) -> None:
    status, _ = server.request("/api/state", token=None, headers={"X-Earshot-Token": "x" * 43})
    assert status == 403


def test_the_page_sets_the_token_cookie_that_lets_its_assets_in(server: UiServer) -> None:
    import urllib.request

    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor())
    with opener.open(server.url, timeout=30) as response:
        page = response.read().decode()
        cookie = response.headers["Set-Cookie"]
    assert "HttpOnly" in cookie and "SameSite=strict" in cookie
    assert server.token in page  # the page's script sends it in a header
    with opener.open(server.base + "/static/app.js", timeout=30) as response:
        assert response.status == 200


@pytest.mark.parametrize("host", ["evil.example", "evil.example:{port}", "127.0.0.1:1", ""])
def test_another_host_is_refused_even_with_the_token(server: UiServer, host: str) -> None:
    status, text = server.request(
        "/api/state", token="query", headers={"Host": host.format(port=server.port)}
    )
    assert status == 403
    assert "answers only to" in text


def test_localhost_is_this_server_too(server: UiServer) -> None:
    status, _ = server.request("/api/state", headers={"Host": f"localhost:{server.port}"})
    assert status == 200


def test_a_cross_origin_post_is_refused_and_changes_nothing(server: UiServer, cli: Cli) -> None:
    before = cli.json("sessions")["sessions"]
    for origin in ("http://evil.example", "null", f"http://127.0.0.1:{server.port + 1}"):
        status, text = server.request("/api/sessions", {}, headers={"Origin": origin})
        assert status == 403, origin
        assert "its own page" in text
    assert cli.json("sessions")["sessions"] == before


def test_a_post_without_an_origin_is_refused(server: UiServer) -> None:
    import urllib.error
    import urllib.request

    req = urllib.request.Request(
        server.base + "/api/sessions",
        data=b"{}",
        headers={"X-Earshot-Token": server.token, "Host": f"127.0.0.1:{server.port}"},
    )
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(req, timeout=30)
    with refused.value as answer:
        assert answer.code == 403


def test_a_post_with_the_cookie_alone_is_refused(server: UiServer) -> None:
    # What a form on another page could make the browser send: the cookie, no header.
    status, text = server.request(
        "/api/sessions", {}, token=None, headers={"Cookie": f"earshot_token={server.token}"}
    )
    assert status == 403
    assert "header" in text


def test_a_get_cannot_change_anything(server: UiServer) -> None:
    status, _ = server.request("/api/sessions")  # the POST route, as a GET
    assert status == 405


def test_the_page_posts_with_its_origin_and_token(server: UiServer, cli: Cli) -> None:
    status, text = server.request("/api/sessions", {})
    assert status == 200, text
    made = json.loads(text)["session"]
    assert made in {s["id"] for s in cli.json("sessions")["sessions"]}


def test_ctrl_c_stops_it_with_exit_0(cli: Cli) -> None:
    server = UiServer(cli, cli.env())
    assert server.stop() == 0


def test_nothing_is_loaded_from_the_network(server: UiServer) -> None:
    page = server.request("/", token="query")[1]
    assets = [server.request(f"/static/{name}")[1] for name in ("app.js", "dialogs.js", "turn.js")]
    css = server.request("/static/app.css")[1]
    for text in (page, *assets, css):
        assert "https://" not in text and "http://" not in text.replace("http://127", "")
        assert "//cdn" not in text
