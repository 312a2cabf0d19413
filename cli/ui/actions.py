"""What the page's buttons change: rewind, undo and redo, each shown before it is done.

Every action is two requests. The preview is the CLI's ``--dry-run``
(the same core call, the same document ``--json`` prints); the page shows
it and the person confirms, and the confirmation sends back what was
shown. If the dry run now says something else (another terminal ran a
command meanwhile), nothing is done and the page is told to look again,
as ``earshot chat``'s ``/undo`` does. Conflicts are left alone as the CLI
leaves them; overwriting them (``force``) is a second confirmation the
page asks for on its own.

A rewind first stops a turn the page runs in that session, and waits for
it (``composer.STOP_WAIT_S``); one action per session runs at a time here,
and the log's rewind lock refuses a second rewind from anywhere else.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from earshot.agent.core import coverage, navigation
from earshot.agent.core.engine import Engine
from earshot.agent.core.records import session_batches
from earshot.agent.core.undo import redo as redo_batches
from earshot.agent.core.undo import undo as undo_batches
from earshot.cas.errors import EarshotError

from .. import render_agent, render_session
from .composer import STOP_WAIT_S, Composer

Doc = dict[str, Any]


class Busy(EarshotError):
    exit_code = 3


class Moved(EarshotError):
    exit_code = 3

    def __init__(self) -> None:
        super().__init__(
            "what this would do changed while you looked (another command ran): nothing "
            "changed; look at it again"
        )


class Actions:
    """Rewind, undo and redo of the root's sessions, for the page."""

    def __init__(self, composer: Composer) -> None:
        self.composer = composer
        self.workspace = composer.workspace
        self._lock = threading.Lock()
        self._acting: set[str] = set()

    @contextmanager
    def _one_at_a_time(self, session: str, what: str) -> Iterator[None]:
        with self._lock:
            if session in self._acting:
                raise Busy(
                    f"a rewind, undo or redo of session {session} is running: wait for it, "
                    f"then {what} again"
                )
            self._acting.add(session)
        try:
            yield
        finally:
            with self._lock:
                self._acting.discard(session)

    def _engine(self, session: str) -> Any:
        return self.workspace.engine(session)

    # -- rewind ---------------------------------------------------------------

    def rewind_preview(self, session: str, n: int) -> Doc:
        """Prompt ``n``'s text and, if any batch after it is left to undo, the code's
        impact (``rewind N --code --dry-run --json``) with the paths undo does not cover."""
        with self._engine(session) as engine:
            try:
                result = navigation.rewind(engine, n, code=True, dry_run=True)
            except navigation.NothingToRestore:
                prompts = navigation.read_prompts(engine.project, session)
                return {
                    "prompt": n,
                    "text": prompts[n - 1].text,
                    "code": None,
                    "code_refused": "no batch after this prompt is left to undo",
                    "not_covered": [],
                    "lines": [],
                }
            doc, _ = render_session.rewound(result)
            assert result.impact is not None
            lines = render_agent.impact_lines(result.impact, "rewind", True)
            return {
                "prompt": n,
                "text": doc["text"],
                "code": doc["code"],
                "code_refused": None,
                "not_covered": _not_covered(engine, result.plan.batches),
                "lines": lines,
            }

    def rewind(self, session: str, n: int, *, code: bool, force: bool, shown: Doc | None) -> Doc:
        """``rewind N [--code [--force]]``; with ``code``, only if its dry run is still
        ``shown``. A turn the page runs in the session is stopped first."""
        with self._one_at_a_time(session, "rewind"):
            if not self.composer.stop(session, STOP_WAIT_S):
                raise Busy(
                    f"the running turn did not stop within {STOP_WAIT_S:.0f} s; "
                    "nothing was rewound: try again"
                )
            with self._engine(session) as engine:
                if code:
                    now = navigation.rewind(engine, n, code=True, dry_run=True)
                    _same(render_session.rewound(now)[0]["code"], shown)
                result = navigation.rewind(engine, n, code=code, force=force)
            doc, _ = render_session.rewound(result)
            lines = (
                render_agent.impact_lines(result.impact, "rewind", False)
                if result.impact is not None
                else []
            )
            return {**doc, "lines": lines}

    # -- undo and redo -----------------------------------------------------------

    def preview(self, session: str, what: str, count: int = 1) -> Doc:
        """``undo N --dry-run --json`` or ``redo --dry-run --json``, and what undo
        does not cover in those batches."""
        with self._engine(session) as engine:
            impact = _run(what, count)(engine, False, True)
            doc, _ = render_agent.impact(impact, what, True, session)
            lines = render_agent.impact_lines(impact, what, True, session)
            return {**doc, "lines": lines, "not_covered": _not_covered(engine, impact.batches)}

    def apply(self, session: str, what: str, count: int, *, force: bool, shown: Doc | None) -> Doc:
        """``undo N`` or ``redo`` (``force``: ``--force``), only if its dry run is
        still ``shown``. Refused while the page runs a turn of the session."""
        with self._one_at_a_time(session, what):
            if self.composer.running(session):
                raise Busy(f"a turn of session {session} is running: stop it, then {what}")
            run = _run(what, count)
            with self._engine(session) as engine:
                _same(render_agent.impact(run(engine, False, True), what, True, session)[0], shown)
                impact = run(engine, force, False)
                doc, _ = render_agent.impact(impact, what, False, session)
                return {**doc, "lines": render_agent.impact_lines(impact, what, False, session)}


def _run(what: str, count: int) -> Callable[[Engine, bool, bool], Any]:
    """``(engine, force, dry_run) -> Impact`` for undo of ``count`` batches, or redo."""
    if what == "undo":
        return lambda engine, force, dry_run: undo_batches(
            engine, count, force=force, dry_run=dry_run
        )
    if what == "redo":
        return lambda engine, force, dry_run: redo_batches(engine, force=force, dry_run=dry_run)
    raise EarshotError(f"no action {what!r}: undo or redo")


#: What differs between a preview and the deed itself.
_OF_THE_DEED = ("dry_run", "record")


def _same(now: Doc | None, shown: Doc | None) -> None:
    """Raise ``Moved`` unless ``shown`` (what the page showed: the preview, which
    may hold more) says what the dry run ``now`` says."""
    if now is None or not isinstance(shown, dict):
        if now is not shown:
            raise Moved()
        return
    if any(now[key] != shown.get(key) for key in now if key not in _OF_THE_DEED):
        raise Moved()


def _not_covered(engine: Engine, batches: Any) -> list[Doc]:
    """The paths of ``batches`` that undo does not take back, as ``log --json`` lists them."""
    wanted = set(batches)
    with engine.project.store.backend.read() as view:
        found = [b for b in session_batches(view, engine.session.id) if b.seq in wanted]
    out: list[Doc] = []
    for batch in found:
        out += [{"batch": batch.seq, **u.to_json()} for u in coverage.uncovered(batch.ledger)]
    return out
