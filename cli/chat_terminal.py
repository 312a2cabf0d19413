"""``earshot chat`` on a terminal: a live input line over a streaming model.

The input line (prompt_toolkit) stays live while a turn runs on a thread
of its own (``Chat.turn``): a line typed meanwhile is queued for the
model's next call (``Chat.steer``), Esc stops the turn
(``Chat.interrupt``), Ctrl-C stops it too and, twice in a row, leaves, as
``/exit`` and Ctrl-D on an empty line do, whatever is going on. Whatever
the turn prints goes above the input line (``patch_stdout``). A question
(may bash run? undo this?) is asked on the input line itself: one key
answers it (y, a, n) when the line is empty; text typed there is never an
answer. An answer typed when nothing is asked (``y`` then Enter) is not
sent at once: it stays in the input line, said so, and Enter sends it.
"""

from __future__ import annotations

import asyncio
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from prompt_toolkit import PromptSession
from prompt_toolkit.document import Document
from prompt_toolkit.filters import Condition
from prompt_toolkit.formatted_text import FormattedText
from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent
from prompt_toolkit.patch_stdout import patch_stdout
from rich.console import Console
from rich.text import Text

from earshot.agent.core.batch import Batch
from earshot.agent.loop.chat import Chat, TurnResult
from earshot.agent.loop.history import Output, Use
from earshot.agent.loop.permissions import Answer
from earshot.agent.loop.provider import Reply
from earshot.cas.errors import EarshotError

from . import chat_render
from .chat_advice import in_chat
from .chat_commands import HELP, Slash, is_command
from .chat_pane import CommandPane

#: Two Ctrl-C within this many seconds leave.
DOUBLE_PRESS_S = 2.0
_ANSWERS = {"y": Answer.ONCE, "yes": Answer.ONCE, "a": Answer.SESSION, "always": Answer.SESSION}
#: What leaves the chat, even while a turn runs.
_LEAVE = ("/exit", "/quit")
#: The answers a permission question takes; a confirmation takes y or n.
_CHOICES = ("y", "yes", "a", "always", "n", "no")
_YES_NO = ("y", "yes", "n", "no", "")
#: What each answer is echoed as, once given.
_SAID = {"y": "allowed once", "a": "allowed for this session", "n": "denied"}
_CONFIRMED = {"y": "yes", "n": "no"}


@dataclass
class _Question:
    text: str
    choices: tuple[str, ...]
    #: What the input line held when the question came: typed before it, never its answer.
    typed_before: str = ""
    answer: str | None = None
    done: threading.Event = field(default_factory=threading.Event)

    def give(self, answer: str) -> None:
        self.answer = answer
        self.done.set()


class Terminal:
    """The chat's face on a terminal: ``chat.Events`` and the slash commands' ``Screen``."""

    def __init__(self, make_chat: Callable[[Terminal], Chat]) -> None:
        self.console = Console(force_terminal=True, highlight=False, soft_wrap=False)
        self._md = chat_render.MarkdownStream(self.console)
        self._pane = CommandPane()
        self._question: _Question | None = None
        self._worker: threading.Thread | None = None
        #: Whether the worker runs a turn (not a slash command).
        self._turning = False
        #: Lines typed while a slash command ran, or after a turn's last call:
        #: run in order once the worker ends.
        self._pending: list[str] = []
        self._leaving = False
        self._last_ctrl_c = 0.0
        #: An answer word typed when nothing was asked, held back once (``_stray``).
        self._held: str | None = None
        self._session: PromptSession[str] | None = None
        self._signalled: int | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self.chat = make_chat(self)

    # -- running ---------------------------------------------------------------

    def run(self) -> int | None:
        """Until the person leaves; the signal that ended it, if one did."""
        asyncio.run(self._main())
        return self._signalled

    def _on_signal(self, signum: int) -> None:
        """SIGTERM, SIGHUP (the terminal closed): stop the turn, record it, leave."""
        self._signalled = signum
        self.leave()

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGHUP):
            self._loop.add_signal_handler(sig, self._on_signal, int(sig))
        self._session = PromptSession(
            message=self._message,
            key_bindings=self._bindings(),
            bottom_toolbar=self._toolbar,
            refresh_interval=0.5,
        )
        self._session.app.ttimeoutlen = 0.05  # a lone Esc is Esc, not an Alt- prefix
        with patch_stdout(raw=True):
            self.say(self._banner())
            while not self._leaving:
                try:
                    line = await self._session.prompt_async()
                except EOFError:
                    break
                self._submit(line)
            self._leaving = True
            self._stop_work()

    def _stop_work(self) -> None:
        question = self._question
        if question is not None:
            question.give("n")
        worker = self._worker
        if worker is not None and worker.is_alive():
            self.say("stopping the turn before leaving…")
            self.chat.interrupt()
            worker.join(60)

    def _banner(self) -> str:
        chat = self.chat
        prompts = sum(1 for entry in chat.log.context() if entry.body.TYPE == "user")
        resumed = f", resumed with {prompts} prompts" if prompts else ""
        return (
            f"earshot chat · {chat.provider.name} · {chat.workspace.root}\n"
            f"session {chat.session}{resumed} · /help for commands · Esc stops a turn"
        )

    @property
    def busy(self) -> bool:
        return self._worker is not None and self._worker.is_alive()

    def _submit(self, line: str) -> None:
        text = line.strip()
        question = self._question
        if question is not None:
            self._answer(question, text)
            return
        if not text:
            return
        if self._stray(text):
            return
        if is_command(text):
            name = text.split()[0]
            if name in _LEAVE:
                self._leaving = True
            elif name == "/help":  # here, at once: a running turn keeps its worker
                self.say(HELP)
            elif self._turning and self.chat.steering:
                self.say("a turn is running: wait for it, or press Esc to stop it")
            elif self.busy:  # a command running, or a turn's last moment: next
                self._pending.append(line)
            else:
                self._start(lambda: Slash(self.chat, self).run(text))
            return
        if text.startswith("//"):
            line = line.replace("//", "/", 1)
        if self.busy:
            if self.chat.steer(line):
                self.say(Text(f"  queued for the model's next call: {line.strip()[:80]}", "dim"))
            else:  # no call of this turn will take it: it starts the next one
                self._pending.append("/" + line if line.lstrip().startswith("/") else line)
            return
        self._start(lambda: self._turn(line))

    def _stray(self, text: str) -> bool:
        """Whether ``text`` is an answer typed when nothing is asked, held back:
        it goes back to the input line, said so; the same line again is sent."""
        held, self._held = self._held, None
        if text.lower() not in _CHOICES or held == text:
            return False
        self._held = text
        self.say(
            Text(f"  nothing is asked now: {text!r} is in the input line; Enter sends it", "dim")
        )
        self.prefill(text)
        return True

    def _next(self) -> None:
        """On the input line's loop, once a worker ended: what was typed meanwhile."""
        worker = self._worker
        if worker is not None:
            worker.join(5)  # it is in its last lines
        if self._pending and not self.busy:
            self._submit(self._pending.pop(0))

    def _start(self, work: Callable[[], None]) -> None:
        def guarded() -> None:
            try:
                work()
            except EarshotError as exc:
                self.say(Text(f"earshot: {in_chat(str(exc))}", "red"))
            except Exception as exc:  # a face must outlive one failure: said, not raised
                self.say(f"earshot: {type(exc).__name__}: {exc}")
            finally:
                self._turning = False
                self._invalidate()
                loop = self._loop
                if loop is not None and not loop.is_closed():
                    loop.call_soon_threadsafe(self._next)

        self._worker = threading.Thread(target=guarded, name="earshot-turn", daemon=True)
        self._worker.start()
        self._invalidate()

    def _turn(self, prompt: str) -> None:
        self._turning = True
        result: TurnResult = self.chat.turn(prompt)
        self._turning = False
        self._md.flush()
        if result.stop == "error":
            self.say(Text(f"earshot: {in_chat(result.error or '')}", "red"))
            self.say(Text("  the session is as it was; send again when ready", "dim"))
        elif result.stop == "interrupted":
            self.say(Text("  interrupted: every call has its result; go on when ready", "yellow"))
        unsent = self.chat.take_queued()
        if unsent:  # typed for a call that never came: back to the input line
            self.say(Text("  not sent (the turn ended first), back in the input line", "dim"))
            self.prefill(" ".join(unsent))
        elif result.stop == "max_tokens":
            self.say(Text("  the reply hit the length limit", "yellow"))

    # -- the input line --------------------------------------------------------

    def _message(self) -> FormattedText:
        rows: list[tuple[str, str]] = []
        if self._pane.running:  # the running command's last lines, above the input line
            for style, row in self._pane.rows(self._columns()):
                rows += [(style, row), ("", "\n")]
        if self._question is not None:
            return FormattedText([*rows, ("bold yellow", f"{self._question.text} ")])
        return FormattedText([*rows, ("bold cyan", "> ")])

    def _columns(self) -> int:
        session = self._session
        return session.app.output.get_size().columns if session is not None else 80

    def _toolbar(self) -> FormattedText:
        state = "working… Esc stops, Enter queues" if self.busy else "/help for commands"
        short = self.chat.session[:10]
        return FormattedText([("", f" {self.chat.provider.name} · session {short} · {state} ")])

    def _bindings(self) -> KeyBindings:
        keys = KeyBindings()

        @keys.add("escape", eager=True)
        def _esc(event: KeyPressEvent) -> None:
            question = self._question
            if question is not None and question.choices == _YES_NO:
                question.give("n")  # Esc at a confirmation is its no
                return
            if self.busy:  # and at a permission question, it stops the turn too
                self.chat.interrupt()  # first: the call asked about must see it stopped
                self.say(Text("  interrupting…", "yellow"))
            if question is not None:
                question.give("n")

        answering = Condition(lambda: self._question is not None and not self._current_text())

        def one_key(key: str) -> None:
            @keys.add(key, filter=answering)
            def _answer_key(event: KeyPressEvent) -> None:
                question = self._question
                if question is not None and key.lower() in question.choices:
                    question.give(key.lower())
                else:  # not an answer to this question: a letter of the line
                    event.app.current_buffer.insert_text(key)

        for key in ("y", "a", "n", "Y", "A", "N"):
            one_key(key)

        @keys.add("c-c")
        def _ctrl_c(event: KeyPressEvent) -> None:
            buffer = event.app.current_buffer
            if buffer.text:
                buffer.reset()
                return
            now = time.monotonic()
            if now - self._last_ctrl_c < DOUBLE_PRESS_S:
                event.app.exit(exception=EOFError())
                return
            self._last_ctrl_c = now
            if self.busy:
                self.chat.interrupt()  # before the answer, as Esc does
            if self._question is not None:
                self._question.give("n")
            self.say(Text("  (Ctrl-C again to leave, or /exit)", "dim"))

        @keys.add("c-d")
        def _ctrl_d(event: KeyPressEvent) -> None:
            if not event.app.current_buffer.text:
                event.app.exit(exception=EOFError())

        return keys

    def _current_text(self) -> str:
        session = self._session
        return session.app.current_buffer.text if session is not None else ""

    def _invalidate(self) -> None:
        session, loop = self._session, self._loop
        if session is not None and loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(session.app.invalidate)

    def _answer(self, question: _Question, text: str) -> None:
        """A line typed at a question: an answer, /exit, or text meant for something else."""
        if text.lower() in question.choices and text != question.typed_before:
            question.give(text.lower())
        elif text.split()[:1] and text.split()[0] in _LEAVE:
            question.give("n")
            self._leaving = True
        else:  # not an answer: never taken for one, never lost
            self.say(
                Text("  answer the question first; your text is back in the input line", "dim")
            )
            self.prefill(text)

    def _ask(self, text: str, choices: tuple[str, ...]) -> str:
        question = _Question(text, choices, self._current_text().strip())
        self._question = question
        self._invalidate()
        while not question.done.wait(0.2):
            if self._leaving:
                question.give("n")
        self._question = None
        self._invalidate()
        answer = (question.answer or "n")[:1]
        said = _SAID if question.choices == _CHOICES else _CONFIRMED
        self.say(Text(f"  → {said.get(answer, said['n'])}", "dim"))
        return question.answer or "n"

    # -- Screen (slash commands) -----------------------------------------------

    def say(self, text: str | Text) -> None:
        if isinstance(text, str):
            self.console.print(text, markup=False)
        else:
            self.console.print(text)

    def diff(self, text: str) -> None:
        chat_render.diff(self.console, text)

    def confirm(self, question: str) -> bool:
        return self._ask(f"{question} [y/N]", _YES_NO) in ("y", "yes")

    def prefill(self, text: str) -> None:
        session, loop = self._session, self._loop
        if session is None or loop is None:
            return

        def put() -> None:  # ahead of what is being typed, which stays
            buffer = session.app.current_buffer
            typed = buffer.text
            whole = f"{text} {typed}" if typed.strip() else text
            buffer.set_document(Document(whole, len(whole)), bypass_readonly=True)

        loop.call_soon_threadsafe(put)

    def leave(self) -> None:
        self._leaving = True
        session, loop = self._session, self._loop
        if session is not None and loop is not None:
            loop.call_soon_threadsafe(lambda: session.app.exit(exception=EOFError()))

    # -- Events (the turn) -----------------------------------------------------

    def text(self, delta: str) -> None:
        self._md.feed(delta)

    def reply(self, reply: Reply) -> None:
        self._md.flush()
        for use in reply.uses:
            self.console.print(chat_render.call_line(use))

    def command(self, command: str) -> None:
        self._pane.start(command)
        self._invalidate()

    def output(self, text: str) -> None:
        self._pane.feed(text)
        self._invalidate()

    def command_ended(self) -> None:
        self._pane.end()
        self._invalidate()

    def result(self, use: Use, output: Output) -> None:
        self.console.print(chat_render.result_lines(output))

    def batch(self, batch: Batch) -> None:
        self.console.print(chat_render.batch_text(batch))

    def injected(self, text: str) -> None:
        self.say(Text(f"  ↳ sent to the model: {text.strip()[:80]}", "dim"))

    def notice(self, text: str) -> None:
        self.say(Text(f"earshot: {in_chat(text)}", "yellow"))

    def ask(self, tool: str, detail: str) -> Answer:
        self.say(Text.assemble(("allow ", "yellow"), (tool, "bold"), (f": {detail[:300]}", "")))
        answer = self._ask("allow? [y] once · [a] for this session · [n] no", _CHOICES)
        return _ANSWERS.get(answer, Answer.DENY)
