"""earshot ui: how long the page takes to show what happened, in headless chromium.

A session of N prompts, each with a batch, made through the CLI; then, with
``earshot ui`` serving the root:

- ``session_doc``: one ``GET /api/sessions/ID`` (the transcript, the log,
  markdown made HTML), as the page asks on every change;
- ``first_render``: from the page's navigation to its last prompt shown;
- ``live``: from ``earshot bash`` returning (the batch is committed) to the
  page showing that batch, with no reload: the page's own clock against
  this process's, one machine.

    python benchmarks/bench_ui.py --prompts 30 --repeat 10 --out benchmarks/results-ui.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from earshot_cli import Cli
from ui_harness import CHROMIUM, CHROMIUM_ARGS, ui_server


def spread(values: list[float]) -> dict[str, float]:
    return {
        "median": statistics.median(values),
        "min": min(values),
        "max": max(values),
        "n": len(values),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--prompts", type=int, default=30)
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as tmp:
        home, root = Path(tmp) / "home", Path(tmp) / "root"
        home.mkdir()
        root.mkdir()
        cli = Cli(home, root)
        session = cli.new_session()
        for n in range(args.prompts):
            cli.run("prompt", f"prompt {n}: change file {n}", session=session)
            cli.run("bash", f"echo {n} > f{n}.txt", session=session)
            cli.run("say", f"changed **f{n}.txt**", session=session)
        results: dict[str, object] = {}
        with ui_server(cli) as server:
            doc_s = []
            for _ in range(args.repeat):
                start = time.perf_counter()
                server.get(f"/api/sessions/{session}")
                doc_s.append(time.perf_counter() - start)
            results["session_doc_s"] = spread(doc_s)
            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(
                    executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS
                )
                page = browser.new_page()
                render_s = []
                for _ in range(args.repeat):
                    start = time.perf_counter()
                    page.goto(server.url)
                    page.wait_for_selector(f'[data-prompt="{args.prompts}"]')
                    render_s.append(time.perf_counter() - start)
                results["first_render_s"] = spread(render_s)
                page.wait_for_selector("#link.up")
                live_s = []
                for i in range(args.repeat):
                    seq = args.prompts + i + 1
                    page.evaluate(
                        """seq => {
                          window.seen = null;
                          const look = () => document.querySelector(`[data-batch="${seq}"]`);
                          new MutationObserver((_, obs) => {
                            if (look()) { window.seen = Date.now(); obs.disconnect(); }
                          }).observe(document.body, {childList: true, subtree: true});
                        }""",
                        seq,
                    )
                    subprocess.run(
                        [
                            os.fspath(Path(sys.executable).parent / "earshot"),
                            "bash",
                            f"echo {i} > live{i}.txt",
                        ],
                        cwd=root,
                        env=cli.env(session),
                        check=True,
                        capture_output=True,
                    )
                    done_ms = time.time() * 1000
                    page.wait_for_function("window.seen !== null", timeout=30_000)
                    live_s.append((page.evaluate("window.seen") - done_ms) / 1000)
                results["live_s"] = spread(live_s)
                browser.close()
    doc = {
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count()},
        "prompts": args.prompts,
        "repeat": args.repeat,
        **results,
    }
    print(json.dumps(doc, indent=2))
    if args.out:
        args.out.write_text(json.dumps(doc, indent=2) + "\n")


if __name__ == "__main__":
    main()
