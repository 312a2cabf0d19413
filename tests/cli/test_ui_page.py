"""``earshot ui`` in a real browser: Debian's chromium, headless, driven by Playwright.

The sessions are real: made through the CLI (prompt, bash, rewind), through
the page's own composer against a scripted model server
(tests/model_servers), and through a real Claude Code run whose hooks
``earshot install`` wrote. What the page shows is checked in the page; what
its buttons did is checked on disk and with the CLI's ``--json``.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from earshot_cli import EARSHOT, Cli
from model_servers import AnthropicServer, ToolCall, Turn
from real_agents import Invocation, claude, run
from ui_harness import UiServer, browser, page, ui_server

__all__ = ["browser", "page"]  # the fixtures, used by name

#: Where the README's screenshot is written when this is set (a test makes it).
SCREENSHOT = "EARSHOT_UI_SCREENSHOT"


def transcript(cli: Cli, session: str) -> dict[str, Any]:
    doc: dict[str, Any] = cli.json("transcript", "--session", session)
    return doc


def two_prompts(cli: Cli) -> str:
    """A session made through the CLI: prompt 1 makes a.txt, prompt 2 changes it and adds b.py."""
    session = cli.new_session()
    cli.run("prompt", "make a file", session=session)
    cli.run("bash", "echo hello > a.txt", session=session)
    cli.run("say", "I made **a.txt**", session=session)
    cli.run("prompt", "change it", session=session)
    cli.run("bash", "echo bye > a.txt; echo 'x = 1' > b.py", session=session)
    cli.run("say", "changed `a.txt`, added `b.py`", session=session)
    return session


def opened(page: Any, server: UiServer, session: str) -> Any:
    page.goto(server.url)
    page.click(f'#sessions [data-session="{session}"]')
    page.wait_for_selector(f'#session-head h1:has-text("{session}")')
    return page


@pytest.fixture
def model_env(cli: Cli) -> Iterator[Any]:
    """A scripted Anthropic server and the environment that points earshot at it."""

    def make(script: list[Turn]) -> tuple[AnthropicServer, dict[str, str]]:
        server = AnthropicServer(script)
        servers.append(server)
        env = cli.env(ANTHROPIC_BASE_URL=server.url, ANTHROPIC_API_KEY="test-key")
        return server, env

    servers: list[AnthropicServer] = []
    yield make
    for server in servers:
        server.close()


# -- history ----------------------------------------------------------------------


def test_a_rewound_conversations_branches_are_visible_and_reachable(cli: Cli, page: Any) -> None:
    session = two_prompts(cli)
    cli.run("rewind", "2", session=session)
    cli.run("prompt", "change it differently", session=session)
    with ui_server(cli) as server:
        opened(page, server, session)
        second = page.locator('[data-prompt="2"]')
        assert second.locator(".text").inner_text() == "change it differently"
        branch = second.locator(".branch")
        assert branch.count() == 1
        assert page.locator('.navigation[data-where="to"]').count() == 1
        branch.click()
        page.wait_for_selector("#branch-note:not([hidden])")
        assert page.locator('[data-prompt="2"] .text').inner_text() == "change it"
        assert page.locator('.navigation[data-where="from"]').count() == 1
        assert page.locator('[data-batch="2"]').count() == 1  # the old branch's batch
        page.click("#branch-note a")
        page.wait_for_selector("#branch-note[hidden]", state="attached")
        assert page.locator('[data-prompt="2"] .text').inner_text() == "change it differently"


def test_each_batch_shows_its_changes_and_a_coloured_diff_per_file(cli: Cli, page: Any) -> None:
    session = two_prompts(cli)
    with ui_server(cli) as server:
        opened(page, server, session)
        batch = page.locator('[data-batch="2"]')
        assert batch.locator(".b-counts").inner_text() == "+1 ~1 -0"
        batch.locator("summary").click()
        page.wait_for_selector('[data-batch="2"] .file[data-path="b.py"] pre.diff')
        added = batch.locator('.file[data-path="b.py"] .d-add')
        assert added.inner_text() == "+x = 1"
        assert added.locator("span").count() > 0  # coloured as Python
        assert batch.locator('.file[data-path="a.txt"] .d-del').inner_text() == "-hello"
        assert "null" not in batch.locator(".b-files").inner_text()


def test_undone_batches_and_paths_undo_does_not_cover_are_marked(cli: Cli, page: Any) -> None:
    cli.write(".earshotignore", "notes.local\n")
    cli.write("notes.local", "mine\n")
    session = two_prompts(cli)
    cli.run("undo", session=session)
    cli.run("bash", "rm notes.local", session=session)
    log = cli.json("log", "--session", session)
    assert log["batches"][-1]["uncovered"], "an excluded file's content is not held"
    with ui_server(cli) as server:
        opened(page, server, session)
        flags = page.locator('[data-batch="2"] .flag').all_inner_texts()
        assert "undone by 3" in flags
        assert "undo of 2" in page.locator('[data-batch="3"] .flag').all_inner_texts()
        assert "1 not covered by undo" in page.locator('[data-batch="4"] .flag').all_inner_texts()


def test_a_page_left_open_shows_a_batch_made_afterwards_from_the_cli(cli: Cli, page: Any) -> None:
    session = two_prompts(cli)
    with ui_server(cli) as server:
        opened(page, server, session)
        page.wait_for_selector("#link.up")
        assert page.locator('[data-batch="3"]').count() == 0
        cli.run("prompt", "one more", session=session)
        cli.run("bash", "echo late > late.txt", session=session)
        page.wait_for_selector('[data-batch="3"]', timeout=15_000)
        page.wait_for_selector('[data-prompt="3"]')
        assert (
            page.locator("#sessions li")
            .first.locator(".s-counts")
            .inner_text()
            .startswith("3 prompts · 3 batches")
        )


# -- rewind, undo, redo ---------------------------------------------------------------


def test_rewind_with_code_shows_the_impact_then_restores_and_gives_the_prompt_back(
    cli: Cli, page: Any
) -> None:
    session = two_prompts(cli)
    with ui_server(cli) as server:
        opened(page, server, session)
        page.click('[data-batch="2"] summary')  # its diff, under the dialog
        page.wait_for_selector('[data-batch="2"] pre.diff')
        page.click('[data-prompt="2"] .rewind')
        page.click(".with-code")
        impact = page.locator("ul.impact")
        impact.wait_for()
        assert impact.locator("li.restore").inner_text().split() == ["restore", "a.txt"]
        assert impact.locator("li.delete").inner_text().split() == ["delete", "b.py"]
        # Nothing happened yet: the files are as the batch left them.
        assert (cli.root / "a.txt").read_text() == "bye\n"
        assert (cli.root / "b.py").exists()
        if os.environ.get(SCREENSHOT):
            page.screenshot(path=os.environ[SCREENSHOT])
        page.click("#confirm")
        page.wait_for_selector("#dialog-back[hidden]", state="attached")
        assert page.input_value("#prompt") == "change it"
    assert (cli.root / "a.txt").read_text() == "hello\n"
    assert not (cli.root / "b.py").exists()
    items = transcript(cli, session)["items"]
    assert [i["where"] for i in items if i["type"] == "navigation"] == ["to"]
    assert [i["n"] for i in items if i["type"] == "user"] == [1]
    assert cli.json("log", "--session", session)["batches"][-1]["kind"] == "rewind"


def test_the_code_option_is_hidden_where_nothing_is_left_to_undo(cli: Cli, page: Any) -> None:
    session = two_prompts(cli)
    cli.run("undo", session=session)  # batch 2, all there is after prompt 2
    with ui_server(cli) as server:
        opened(page, server, session)
        page.click('[data-prompt="2"] .rewind')
        page.wait_for_selector(".conversation-only")
        assert page.locator(".with-code").count() == 0
        assert "Nothing after this prompt is left to undo" in page.inner_text("#dialog")
        page.click(".cancel")
        page.click('[data-prompt="1"] .rewind')  # batch 1 is still there
        page.wait_for_selector(".with-code")
        page.click(".conversation-only")
        page.wait_for_selector("#dialog-back[hidden]", state="attached")
        assert page.input_value("#prompt") == "make a file"
    assert (cli.root / "a.txt").read_text() == "hello\n"  # the conversation only


def test_undo_and_redo_preview_and_conflicts_need_a_second_confirmation(
    cli: Cli, page: Any
) -> None:
    session = two_prompts(cli)
    with ui_server(cli) as server:
        opened(page, server, session)
        page.click("#undo")
        page.wait_for_selector("ul.impact")
        assert "restore a.txt" in " ".join(page.inner_text("ul.impact").split())
        page.click("#confirm")
        page.wait_for_selector("#dialog-back[hidden]", state="attached")
        assert (cli.root / "a.txt").read_text() == "hello\n"
        assert not (cli.root / "b.py").exists()

        (cli.root / "a.txt").write_text("mine\n")  # changed since the undo
        page.click("#redo")
        page.wait_for_selector("ul.impact li.conflict")
        page.once("dialog", lambda dialog: dialog.dismiss())
        page.click("button.force")  # no to the second question: nothing happens
        assert page.is_visible("ul.impact")
        assert (cli.root / "a.txt").read_text() == "mine\n"
        assert not (cli.root / "b.py").exists()
        page.once("dialog", lambda dialog: dialog.accept())
        page.click("button.force")
        page.wait_for_selector("#dialog-back[hidden]", state="attached")
    assert (cli.root / "a.txt").read_text() == "bye\n"
    assert (cli.root / "b.py").exists()


def test_an_impact_that_changed_since_it_was_shown_is_not_done(cli: Cli, page: Any) -> None:
    session = two_prompts(cli)
    with ui_server(cli) as server:
        opened(page, server, session)
        page.click("#undo")
        page.wait_for_selector("ul.impact")
        cli.run("bash", "echo more > c.txt", session=session)  # another terminal
        page.click("#confirm")
        page.wait_for_selector("#toast.bad")
        assert "changed while you looked" in page.inner_text("#toast")
    assert (cli.root / "c.txt").exists() and (cli.root / "b.py").exists()


def test_a_second_rewind_while_one_runs_is_refused_with_a_message(cli: Cli) -> None:
    session = two_prompts(cli)
    path = Path(cli.json("sessions", "check")["directory"]) / f"{session}.jsonl"
    with ui_server(cli) as server:
        holder = subprocess.Popen(
            [
                "python",
                "-c",
                "import sys; from pathlib import Path; "
                "from earshot.agent.log.session import Session; "
                "s = Session.open(Path(sys.argv[1]))\n"
                "with s.rewind_lock():\n print('held', flush=True); sys.stdin.read()",
                str(path),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert holder.stdout is not None and holder.stdout.readline() == "held\n"
            status, text = server.request(
                f"/api/sessions/{session}/rewind", {"n": 2, "code": False}
            )
        finally:
            assert holder.stdin is not None
            holder.stdin.close()
            holder.wait(30)
            holder.stdout.close()
        assert status == 409
        assert "rewound elsewhere" in json.loads(text)["error"]["message"]
        status, _ = server.request(f"/api/sessions/{session}/rewind", {"n": 2, "code": False})
        assert status == 200  # and once it is over, it goes
    assert [i["n"] for i in transcript(cli, session)["items"] if i["type"] == "user"] == [1]


# -- the composer -------------------------------------------------------------------


def send(page: Any, text: str) -> None:
    page.fill("#prompt", text)
    page.press("#prompt", "Enter")


def test_a_prompt_from_the_composer_runs_a_turn_whose_calls_are_a_batch(
    cli: Cli, page: Any, model_env: Any
) -> None:
    model, env = model_env(
        [[ToolCall("bash", {"command": "echo hi > made.txt"})], "I made **made.txt**"]
    )
    with ui_server(cli, env) as server:
        page.goto(server.url)
        page.click("#new-session")
        page.wait_for_selector("#composer:not([hidden])")
        send(page, "make a file")
        question = page.locator(".question")
        question.wait_for()
        assert "bash" in question.inner_text() and "echo hi > made.txt" in question.inner_text()
        question.locator('[data-answer="session"]').click()
        page.wait_for_selector('[data-batch="1"]', timeout=30_000)
        page.wait_for_selector(".item.assistant strong:has-text('made.txt')")
        page.wait_for_selector("#stop[hidden]", state="attached")
    assert (cli.root / "made.txt").read_text() == "hi\n"
    (made,) = cli.json("log")["batches"]
    assert made["calls"][0]["command"] == "echo hi > made.txt"
    assert model.remaining == 0


def test_text_sent_while_a_turn_runs_steers_it(cli: Cli, page: Any, model_env: Any) -> None:
    model, env = model_env([[ToolCall("bash", {"command": "echo one > one.txt"})], "done"])
    with ui_server(cli, env) as server:
        page.goto(server.url)
        page.click("#new-session")
        page.wait_for_selector("#composer:not([hidden])")
        send(page, "make one")
        page.locator(".question").wait_for()  # the turn waits for an answer: it runs
        send(page, "and say hello")
        page.wait_for_selector("#toast:has-text('sent into the running turn')")
        page.click('.question [data-answer="once"]')
        page.wait_for_selector("#stop[hidden]", state="attached", timeout=30_000)
    last = model.main_requests[-1]["messages"][-1]["content"]
    assert any(part.get("text") == "and say hello" for part in last), last


def test_stop_interrupts_a_sleep_30_and_the_batch_is_recorded(
    cli: Cli, page: Any, model_env: Any
) -> None:
    _, env = model_env(
        [
            [
                ToolCall(
                    "bash",
                    {"command": "echo started > started.txt; sleep 30; echo late > late.txt"},
                )
            ]
        ]
    )
    with ui_server(cli, env, "--allow", "bash") as server:
        page.goto(server.url)
        page.click("#new-session")
        page.wait_for_selector("#composer:not([hidden])")
        send(page, "take your time")
        page.wait_for_selector("#live .running-command:has-text('sleep 30')", timeout=30_000)
        page.click("#stop")
        page.wait_for_selector("#toast:has-text('stopped')")
        page.wait_for_selector("#stop[hidden]", state="attached")
        session = page.locator("#sessions li.chosen").get_attribute("data-session")
    assert session is not None
    (call,) = [i for i in transcript(cli, session)["items"] if i["type"] == "tool_call"]
    assert call["result"]["interrupted"] or "interrupted" in call["result"]["output"]
    assert not (cli.root / "late.txt").exists()
    (batch,) = cli.json("log", "--session", session)["batches"]
    assert [c["path"] for c in batch["changes"]] == ["started.txt"]


def test_rewind_stops_a_running_turn_first(cli: Cli, page: Any, model_env: Any) -> None:
    _, env = model_env([[ToolCall("bash", {"command": "echo started > s.txt; sleep 30"})]])
    with ui_server(cli, env, "--allow", "bash") as server:
        page.goto(server.url)
        page.click("#new-session")
        page.wait_for_selector("#composer:not([hidden])")
        send(page, "wait a while")
        page.wait_for_selector("#live .running-command:has-text('sleep 30')", timeout=30_000)
        page.click('[data-prompt="1"] .rewind')
        page.wait_for_selector("#dialog p.warn:has-text('stopped first')")
        page.click(".conversation-only")
        page.wait_for_selector("#dialog-back[hidden]", state="attached", timeout=30_000)
        assert page.input_value("#prompt") == "wait a while"
        session = page.locator("#sessions li.chosen").get_attribute("data-session")
    assert session is not None
    items = transcript(cli, session)["items"]
    assert [i["type"] for i in items] == ["navigation"]  # back before prompt 1
    everything = cli.json("transcript", "--session", session, "--at", items[0]["from"])["items"]
    (call,) = [i for i in everything if i["type"] == "tool_call"]
    assert call["result"]["interrupted"] or "interrupted" in call["result"]["output"]


# -- an agent's session ----------------------------------------------------------------


def hooked(invocation: Invocation, cli: Cli) -> Invocation:
    """``earshot install claude --user`` into the run's home, run as a person would."""
    env = {**cli.env(), "HOME": str(invocation.home)}
    done = subprocess.run(
        [str(EARSHOT), "install", invocation.agent, "--user"],
        env=env,
        cwd=invocation.cwd,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    env = {**invocation.env, "EARSHOT_HOME": str(cli.home)}
    return Invocation(invocation.agent, invocation.argv, env, invocation.cwd, invocation.home)


@pytest.mark.slow
def test_a_claude_code_session_recorded_by_its_hooks_is_listed_shown_and_rewound(
    cli: Cli, page: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EARSHOT_WATCH", "auto")
    (cli.root / "src.py").write_text("x = 1\n")
    script: list[Turn] = [
        [ToolCall("Bash", {"command": "echo 'x = 2' > src.py && echo new > new.txt"})],
        "edited",
    ]
    try:
        with AnthropicServer(script) as model:
            invocation = claude("edit src.py", cwd=cli.root, model=model, home=tmp_path / "h")
            done = run(hooked(invocation, cli))
            assert done.rc == 0, done
        (summary,) = cli.json("sessions")["sessions"]
        assert summary["agent"]["name"] == "claude"
        with ui_server(cli) as server:
            opened(page, server, summary["id"])
            listed = page.locator(f'#sessions [data-session="{summary["id"]}"]')
            assert listed.locator(".s-agent").inner_text() == "claude"
            assert page.is_visible("#composer-off") and not page.is_visible("#composer")
            page.wait_for_selector('[data-batch="1"]')
            page.click('[data-prompt="1"] .rewind')
            page.click(".with-code")
            assert "src.py" in page.inner_text("ul.impact li.restore")
            page.click("#confirm")
            page.wait_for_selector("#dialog-back[hidden]", state="attached")
    finally:
        cli.run("watch", "--stop", expect=None)
    assert (cli.root / "src.py").read_text() == "x = 1\n"
    assert not (cli.root / "new.txt").exists()


def test_undo_is_refused_while_the_pages_turn_runs(cli: Cli, model_env: Any) -> None:
    _, env = model_env([[ToolCall("bash", {"command": "sleep 30"})]])
    session = two_prompts(cli)
    with ui_server(cli, env, "--allow", "bash") as server:
        status, text = server.request(f"/api/sessions/{session}/prompt", {"text": "wait"})
        assert status == 200 and json.loads(text)["sent"] == "started", text
        status, text = server.request(f"/api/sessions/{session}/undo", {"count": 1})
        assert status == 409
        assert "is running: stop it" in json.loads(text)["error"]["message"]
        status, _ = server.request(f"/api/sessions/{session}/stop", {})
        assert status == 200
    assert (cli.root / "b.py").exists()  # nothing was undone


def test_what_the_session_holds_is_shown_as_text_never_run(cli: Cli, page: Any) -> None:
    bad = '<img src=x onerror="window.pwned=1">'
    session = cli.new_session()
    cli.run("prompt", f"look {bad}", session=session)
    cli.write("f.txt", "old\n")
    cli.run("bash", f"echo '{bad}' > f.txt; echo x > '<b>odd<i>.txt'", session=session)
    cli.run(
        "say",
        f"done {bad} <script>window.pwned=2</script> [x](javascript:window.pwned=3)",
        session=session,
    )
    with ui_server(cli) as server:
        opened(page, server, session)
        assert page.locator('[data-prompt="1"] .text').inner_text() == f"look {bad}"
        assert "<script>" in page.locator(".item.assistant").inner_text()
        page.click('[data-batch="1"] summary')
        page.wait_for_selector('[data-batch="1"] .file[data-path="<b>odd<i>.txt"]')
        assert bad in page.locator('[data-batch="1"] .file[data-path="f.txt"] .d-add').inner_text()
        assert page.locator('a[href^="javascript"]').count() == 0
        assert page.evaluate("window.pwned") is None
        assert page.locator("img").count() == 0
