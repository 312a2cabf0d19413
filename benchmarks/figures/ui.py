"""earshot ui: how long the page takes to show what happened, in headless chromium.

A session of 30 prompts (``--quick``: 10), each with a batch and a reply,
made through the CLI in an empty root of the figure's own; then, with
``earshot ui`` serving it (tests/ui_harness), 10 times each (``--quick``: 3):

- ``ui_session_doc``: one ``GET /api/sessions/ID`` (the transcript, the log,
  markdown made HTML), as the page asks on every change;
- ``ui_first_render``: from the page's navigation to its last prompt shown;
- ``ui_live``: from ``earshot bash`` returning (the batch is committed) to
  the page showing that batch, with no reload: the page's own clock against
  this process's, one machine.

Debian's chromium (/usr/bin/chromium, installed by .ci/run) is driven
through Playwright; without it the figure fails with that said. The server
is the earshot beside this Python (tests/ui_harness), not ``--earshot``.
It runs once, on the plan's first tree.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from typing import Any

from benchmarks.suite import testkit
from benchmarks.suite.plan import Plan
from benchmarks.suite.runner import Context, Tree
from benchmarks.suite.trees import TreeSpec

NAME = "ui"
PEER = "earshot"
SEEN = """seq => {
  window.seen = null;
  const look = () => document.querySelector(`[data-batch="${seq}"]`);
  new MutationObserver((_, obs) => {
    if (look()) { window.seen = Date.now(); obs.disconnect(); }
  }).observe(document.body, {childList: true, subtree: true});
}"""


class Ui:
    name = NAME
    title = "earshot ui in headless chromium"

    def applies(self, tree: TreeSpec, plan: Plan) -> bool:
        return tree == plan.trees[0]

    def weight(self, tree: TreeSpec, plan: Plan) -> float:
        return 30_000.0 if plan.quick else 90_000.0

    def run(self, ctx: Context, tree: Tree) -> None:
        testkit.on_path()
        from earshot_cli import EARSHOT, Cli
        from ui_harness import CHROMIUM, CHROMIUM_ARGS, ui_server

        if not (os.path.exists(CHROMIUM) and shutil.which("chromium")):
            raise RuntimeError(f"no {CHROMIUM}: .ci/run installs Debian's chromium")
        from playwright.sync_api import sync_playwright

        prompts, repeat = (10, 3) if ctx.plan.quick else (30, 10)
        home, root = ctx.scratch("home"), ctx.scratch("root")
        cli = Cli(home, root)
        # --root: the work directory may lie inside another git work tree
        here = ("--root", str(root))
        session = cli.json("session", "new", *here)["id"]
        ctx.progress.step(f"a session of {prompts} prompts")
        for n in range(prompts):
            cli.run("prompt", f"prompt {n}: change file {n}", *here, session=session)
            cli.run("bash", f"echo {n} > f{n}.txt", *here, session=session)
            cli.run("say", f"changed **f{n}.txt**", *here, session=session)
        note = f"a session of {prompts} prompts, each with a batch and a reply"

        def record(metric: str, seconds: float) -> None:
            ctx.results.measure(NAME, metric, tree.key, PEER, seconds, note=note)

        with ui_server(cli, None, *here) as server:
            ctx.progress.step("the session's document")
            for _ in range(repeat):
                start = time.perf_counter()
                server.get(f"/api/sessions/{session}")
                record("ui_session_doc", time.perf_counter() - start)
            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(
                    executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS
                )
                try:
                    page = browser.new_page()
                    ctx.progress.step("the page's first render")
                    for _ in range(repeat):
                        start = time.perf_counter()
                        page.goto(server.url)
                        page.wait_for_selector(f'[data-prompt="{prompts}"]')
                        record("ui_first_render", time.perf_counter() - start)
                    page.wait_for_selector("#link.up")
                    ctx.progress.step("a batch shown live")
                    for i in range(repeat):
                        page.evaluate(SEEN, prompts + i + 1)
                        subprocess.run(
                            [str(EARSHOT), "bash", f"echo {i} > live{i}.txt", *here],
                            cwd=root,
                            env=cli.env(session),
                            check=True,
                            capture_output=True,
                        )
                        done_ms = time.time() * 1000
                        page.wait_for_function("window.seen !== null", timeout=30_000)
                        seen: Any = page.evaluate("window.seen")
                        record("ui_live", (float(seen) - done_ms) / 1000)
                finally:
                    browser.close()
        cli.run("watch", "--stop", *here, expect=None)  # the CLI's batches started one


FIGURE = Ui()
