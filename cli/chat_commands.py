"""``earshot chat``'s slash commands, over the layers the CLI's commands use.

``/undo`` is ``earshot undo``, ``/rewind 2 --code`` is ``earshot rewind 2
--code``, on the chat's session: the same core functions and renderings.
What changes files first shows its impact (the ``--dry-run`` list) and
asks; a "no" changes nothing.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from earshot.agent.core import conversation, navigation
from earshot.agent.core.engine import Engine
from earshot.agent.core.records import session_batches
from earshot.agent.core.undo import redo as redo_batches
from earshot.agent.core.undo import undo as undo_batches
from earshot.agent.loop.chat import Chat
from earshot.agent.loop.provider import make_provider
from earshot.cas.errors import EarshotError

from . import render_agent, render_session
from .chat_advice import in_chat
from .cmd_diff import batch_changes, patches_of
from .render import changes as render_changes

HELP = """\
/tree               the numbered prompts of this session
/rewind N           back to before prompt N (the conversation only)
/rewind N --code    ... and undo the batches made since (asks first)
/fork [N]           a new session from before prompt N; go on in it
/undo [N]           undo the last N batches (asks first)
/redo               redo the last undo (asks first)
/diff [N]           what batch N (default: the last) changed
/log                this session's batches
/sessions           the root's sessions
/resume ID          go on in session ID
/compact            the model summarises; the context starts from the summary
/model [P:NAME]     show or change the model (anthropic:..., openai:...)
/help               this list
/exit               leave (so do Ctrl-C twice and Ctrl-D)
Esc stops a running turn; text typed while the model works goes in at its next call."""


class Screen(Protocol):
    """Where a slash command says things and asks (the terminal)."""

    def say(self, text: str) -> None: ...

    def diff(self, text: str) -> None: ...

    def confirm(self, question: str) -> bool: ...

    def prefill(self, text: str) -> None: ...

    def leave(self) -> None: ...


class Usage(EarshotError):
    pass


@dataclass
class Slash:
    """Runs one slash command line for ``chat`` on ``screen``."""

    chat: Chat
    screen: Screen

    def run(self, line: str) -> None:
        try:
            words = shlex.split(line[1:])
        except ValueError as exc:
            self._say(f"earshot: {exc}")
            return
        if not words:
            self._say(HELP)
            return
        name, args = words[0], words[1:]
        handler: Callable[[list[str]], None] | None = getattr(self, f"do_{name}", None)
        if handler is None:
            self._say(f"earshot: no command /{name} (/help lists them)")
            return
        try:
            handler(args)
        except (EarshotError, OSError) as exc:
            text = str(exc) if isinstance(exc, EarshotError) else (exc.strerror or str(exc))
            self._say(f"earshot: {text}")

    # -- helpers ------------------------------------------------------------

    def _say(self, text: str) -> None:
        self.screen.say(in_chat(text))

    @staticmethod
    def _number(args: list[str], default: int | None, what: str) -> int | None:
        if not args:
            return default
        if not args[0].isdigit() or int(args[0]) < 1:
            raise Usage(f"{what} takes a number from 1 up, not {args[0]!r}")
        return int(args[0])

    @property
    def _session(self) -> str:
        return self.chat.session

    # -- the conversation ---------------------------------------------------------

    def do_help(self, args: list[str]) -> None:
        self._say(HELP)

    def do_exit(self, args: list[str]) -> None:
        self.screen.leave()

    do_quit = do_exit

    def do_tree(self, args: list[str]) -> None:
        with self.chat.workspace.project(finish=False) as project:
            prompts = navigation.read_prompts(project, self._session)
        self._say(render_session.tree(self._session, prompts)[1])

    def do_rewind(self, args: list[str]) -> None:
        code = "--code" in args
        rest = [a for a in args if a != "--code"]
        if len(rest) != 1:
            raise Usage("/rewind N [--code]")
        n = self._number(rest, None, "/rewind")
        assert n is not None

        def dry(engine: Engine) -> str:
            return render_session.rewound(navigation.rewind(engine, n, code=True, dry_run=True))[1]

        shown = None
        if code:
            shown = self._asked(dry, f"rewind to before prompt {n} and undo this?")
            if shown is None:
                return
        with self.chat.workspace.engine(self._session) as engine:
            if code and self._moved(dry(engine), shown):
                return
            result = navigation.rewind(engine, n, code=code)
        if result.impact is not None:
            self._say("\n".join(render_agent.impact_lines(result.impact, "rewind", False)))
        self._say(f"back before prompt {n}; its text is in the input line to edit")
        self.screen.prefill(result.plan.prompt.text)

    def do_fork(self, args: list[str]) -> None:
        n = self._number(args, None, "/fork")
        with self.chat.workspace.project(finish=False) as project:
            forked = navigation.fork(project, self._session, n)
        old = self._session
        self.chat.switch(forked.record.id)
        self._say(
            f"forked session {old} into {forked.record.id} ({forked.prompts} prompts); "
            f"now in {forked.record.id} (/resume {old} goes back)"
        )

    def do_sessions(self, args: list[str]) -> None:
        with self.chat.workspace.project(finish=False) as project:
            items = conversation.summaries(project, with_prompt_counts=True)
        self._say(render_session.sessions(items)[1])

    def do_resume(self, args: list[str]) -> None:
        if len(args) != 1:
            raise Usage("/resume ID (an id or unique prefix; /sessions lists them)")
        ident = self.chat.workspace.open_session(args[0], most_recent=False, new=False)
        self.chat.switch(ident)
        with self.chat.workspace.project(finish=False) as project:
            prompts = navigation.read_prompts(project, ident)
        self._say(f"now in session {ident} ({len(prompts)} prompts)")

    def do_compact(self, args: list[str]) -> None:
        summary = self.chat.compact()
        self._say(
            f"compacted: the context now starts from a summary of {len(summary):,} characters"
        )

    def do_model(self, args: list[str]) -> None:
        if args:
            chosen = make_provider(args[0])
            chosen.check()  # a model without its key is not switched to
            self.chat.provider = chosen
        self._say(f"model: {self.chat.provider.name}")

    # -- the code -------------------------------------------------------------

    def do_log(self, args: list[str]) -> None:
        with (
            self.chat.workspace.project(finish=False) as project,
            project.store.backend.read() as view,
        ):
            batches = session_batches(view, self._session)
        self._say(render_agent.log(self._session, batches)[1])

    def do_diff(self, args: list[str]) -> None:
        seq = self._number(args, None, "/diff")
        with self.chat.workspace.project(finish=False) as project:
            if seq is None:
                with project.store.backend.read() as view:
                    batches = session_batches(view, self._session)
                if not batches:
                    self._say("no batches yet")
                    return
                seq = batches[-1].seq
            changes = batch_changes(project, self._session, seq)
            text = render_changes(changes, False, patches_of(project, changes))[1]
        self._say(f"batch {seq}:")
        self.screen.diff(text)

    def do_undo(self, args: list[str]) -> None:
        count = self._number(args, 1, "/undo")
        assert count is not None

        def dry(engine: Engine) -> str:
            return render_agent.impact(undo_batches(engine, count, dry_run=True), "undo", True)[1]

        shown = self._asked(dry, "undo this?")
        if shown is None:
            return
        with self.chat.workspace.engine(self._session) as engine:
            if self._moved(dry(engine), shown):
                return
            done = undo_batches(engine, count)
        self._say(render_agent.impact(done, "undo", False)[1])

    def do_redo(self, args: list[str]) -> None:
        def dry(engine: Engine) -> str:
            return render_agent.impact(redo_batches(engine, dry_run=True), "redo", True)[1]

        shown = self._asked(dry, "redo this?")
        if shown is None:
            return
        with self.chat.workspace.engine(self._session) as engine:
            if self._moved(dry(engine), shown):
                return
            done = redo_batches(engine)
        self._say(render_agent.impact(done, "redo", False)[1])

    def _asked(self, dry: Callable[[Engine], str], question: str) -> str | None:
        """Show the impact ``dry`` renders and ask; the impact shown if the answer is yes.

        The store is closed while the person decides (that may be hours:
        ``earshot gc`` and the other terminals go on meanwhile).
        """
        with self.chat.workspace.engine(self._session) as engine:
            shown = dry(engine)
        self._say(shown)
        if self.screen.confirm(question):
            return shown
        self._say("nothing changed")
        return None

    def _moved(self, now: str, shown: str | None) -> bool:
        """Whether the impact is no longer the one agreed to (said, and nothing done)."""
        if now == shown:
            return False
        self._say(
            "the impact changed while you answered (another command ran): nothing changed; "
            "run it again to see it as it is now"
        )
        return True


def is_command(line: str) -> bool:
    """A line the chat runs itself rather than send (``/undo``; ``//x`` is sent as ``/x``)."""
    return line.startswith("/") and not line.startswith("//")
