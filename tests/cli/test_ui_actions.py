"""The page's actions, one per session at a time: a second is refused while the first
waits for the page's turn to stop (the log's own lock is taken only after that)."""

from __future__ import annotations

import threading

import pytest
from earshot_cli import Cli

from earshot.agent.loop.workspace import Workspace
from earshot.cli.ui.actions import Actions, Busy


class SlowStop:
    """A composer whose running turn takes its time to stop."""

    def __init__(self, workspace: Workspace) -> None:
        self.workspace = workspace
        self.stopping = threading.Event()
        self.stopped = threading.Event()

    def stop(self, session: str, wait_s: float = 0.0) -> bool:
        self.stopping.set()
        return self.stopped.wait(60)

    def running(self, session: str) -> bool:
        return False


def test_a_second_rewind_while_the_first_waits_for_the_turn_to_stop_is_refused(
    cli: Cli,
) -> None:
    session = cli.new_session()
    cli.run("prompt", "one", session=session)
    cli.run("prompt", "two", session=session)
    composer = SlowStop(Workspace(cli.root, home=cli.home))
    actions = Actions(composer)  # type: ignore[arg-type]
    first: dict[str, object] = {}

    def rewind() -> None:
        first["doc"] = actions.rewind(session, 2, code=False, force=False, shown=None)

    thread = threading.Thread(target=rewind)
    thread.start()
    try:
        assert composer.stopping.wait(60)
        with pytest.raises(Busy, match="is running: wait for it"):
            actions.rewind(session, 1, code=False, force=False, shown=None)
    finally:
        composer.stopped.set()
        thread.join(60)
    assert first["doc"]["prompt"] == 2  # type: ignore[index]
    prompts = cli.json("tree", "--session", session)["prompts"]
    assert [p["text"] for p in prompts] == ["one"]
