"""The chat in the browser: prompts from the page run the loop ``earshot chat`` runs.

One ``Chat`` per session the page has sent to, kept while the server runs
(it holds the session open, as a terminal chat does: ``earshot sessions
rm`` refuses it). A prompt starts a turn on a thread of its own; text sent
while it runs steers it (``Chat.steer``), or, after the model's last call,
is the next turn. Stop is Esc: ``Chat.interrupt``, and a question waiting
for an answer is answered no. Every event of a turn is published to the
open pages (``live.Hub``) with its session; a permission question waits
for the page's answer (``answer``). One turn of a session runs at a time,
whichever face started it: a terminal chat's turn makes this one fail
with ``SessionBusy``'s words, published as the turn's error.
"""

from __future__ import annotations

import secrets
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from earshot.agent.core import coverage
from earshot.agent.core.batch import Batch
from earshot.agent.loop.chat import Chat
from earshot.agent.loop.history import Output, Use
from earshot.agent.loop.permissions import Answer, Grants
from earshot.agent.loop.provider import Provider, Reply
from earshot.agent.loop.workspace import Workspace
from earshot.cas.errors import EarshotError

from .live import Event

Publish = Callable[[Event], None]

#: How long a stop waits for the turn's thread (its command's group is
#: killed within a few seconds; a model request is abandoned after one).
STOP_WAIT_S = 15.0
_ANSWERS = {"once": Answer.ONCE, "session": Answer.SESSION, "deny": Answer.DENY}


class NoModel(EarshotError):
    """The composer cannot send: the model has no key, or no such provider."""


class Unknown(EarshotError):
    exit_code = 2


@dataclass
class _Question:
    session: str
    tool: str
    detail: str
    answer: Answer | None = None
    done: threading.Event = field(default_factory=threading.Event)


class _Face:
    """A session's ``Events``: everything a turn says, published for the pages."""

    def __init__(self, composer: Composer, session: str) -> None:
        self._composer = composer
        self.session = session

    def _send(self, event: str, **fields: Any) -> None:
        self._composer.publish({"kind": "turn", "session": self.session, "event": event, **fields})

    def text(self, delta: str) -> None:
        self._send("text", text=delta)

    def reply(self, reply: Reply) -> None:
        self._send("reply", text=reply.text, calls=len(reply.uses), stop=reply.stop)

    def command(self, command: str) -> None:
        self._send("command", command=command)

    def output(self, text: str) -> None:
        self._send("output", text=text)

    def command_ended(self) -> None:
        self._send("command_ended")

    def result(self, use: Use, output: Output) -> None:
        self._send("result", name=use.name, text=output.text, is_error=output.is_error)

    def batch(self, batch: Batch) -> None:
        uncovered = [u.to_json() for u in coverage.uncovered(batch.ledger)]
        self._send("batch", seq=batch.seq, changes=len(batch.ledger), uncovered=uncovered)

    def injected(self, text: str) -> None:
        self._send("injected", text=text)

    def notice(self, text: str) -> None:
        self._send("notice", text=text)

    def ask(self, tool: str, detail: str) -> Answer:
        return self._composer.ask(self.session, tool, detail)


class Composer:
    """The page's chats, one per session, in one root."""

    def __init__(
        self,
        workspace: Workspace,
        model: Callable[[], Provider],
        publish: Publish,
        allowed: frozenset[str] = frozenset(),
    ) -> None:
        self.workspace = workspace
        self._model = model
        self.publish = publish
        self._grants = Grants(allowed)
        self._lock = threading.Lock()
        self._chats: dict[str, Chat] = {}
        self._threads: dict[str, threading.Thread] = {}
        self._pending: dict[str, list[str]] = {}
        self._questions: dict[str, _Question] = {}
        #: Sessions made from the page, removed at the end if nothing came of them.
        self._made: list[str] = []

    # -- sessions -----------------------------------------------------------

    def new_session(self) -> str:
        ident = self.workspace.open_session(None, most_recent=False, new=True)
        with self._lock:
            self._made.append(ident)
        return ident

    def _chat(self, session: str) -> Chat:
        with self._lock:
            chat = self._chats.get(session)
        if chat is None:
            # One person, one page: what they allowed holds in every session of it.
            face = _Face(self, session)
            chat = Chat(self.workspace, session, self._model(), face, grants=self._grants)
            with self._lock:
                kept = self._chats.setdefault(session, chat)
            if kept is not chat:  # another request made it first
                chat.close()
            chat = kept
        return chat

    # -- turns --------------------------------------------------------------

    def running(self, session: str) -> bool:
        with self._lock:
            thread = self._threads.get(session)
        return thread is not None and thread.is_alive()

    def send(self, session: str, text: str) -> str:
        """Run ``text`` as a prompt of ``session``: "started" a turn, "steered" the
        running one, or "queued" as the next (the running one made its last call)."""
        if not text.strip():
            raise Unknown("an empty prompt: type something to send")
        chat = self._chat(session)
        with self._lock:
            thread = self._threads.get(session)
            if thread is not None and thread.is_alive():
                if chat.steer(text):
                    return "steered"
                self._pending.setdefault(session, []).append(text)
                return "queued"
            self._pending[session] = [text]
            thread = threading.Thread(
                target=self._turns, args=(session, chat), name="earshot-ui-turn", daemon=True
            )
            self._threads[session] = thread
        thread.start()
        return "started"

    def _turns(self, session: str, chat: Chat) -> None:
        """Turns of ``session`` until nothing is left to send."""
        while True:
            with self._lock:
                waiting = self._pending.get(session) or []
                if not waiting:
                    self._threads.pop(session, None)
                    return
                prompt = waiting.pop(0)
            self.publish({"kind": "turn", "session": session, "event": "started", "text": prompt})
            try:
                result = chat.turn(prompt)
                ended = {"stop": result.stop, "error": result.error, "batches": result.batches}
            except (EarshotError, OSError) as exc:
                ended = {"stop": "error", "error": str(exc), "batches": []}
            except Exception as exc:  # the page must hear the turn ended, whatever broke
                ended = {"stop": "error", "error": f"{type(exc).__name__}: {exc}", "batches": []}
            left = chat.take_queued()  # typed after the turn's last model call
            if left:
                with self._lock:
                    self._pending.setdefault(session, [])[:0] = left
            self.publish({"kind": "turn", "session": session, "event": "ended", **ended})

    def stop(self, session: str, wait_s: float = 0.0) -> bool:
        """Stop ``session``'s turn (Esc), and drop what was queued after it; whether
        none runs now (after waiting up to ``wait_s`` for it to end)."""
        with self._lock:
            chat = self._chats.get(session)
            thread = self._threads.get(session)
            self._pending.pop(session, None)
            asked = [q for q in self._questions.values() if q.session == session]
        if chat is not None:
            chat.interrupt()  # first: the call asked about must see it stopped
        for question in asked:
            self._give(question, Answer.DENY)
        if thread is None:
            return True
        thread.join(wait_s)
        return not thread.is_alive()

    # -- questions ------------------------------------------------------------

    def ask(self, session: str, tool: str, detail: str) -> Answer:
        ident = secrets.token_hex(8)
        question = _Question(session, tool, detail)
        with self._lock:
            self._questions[ident] = question
        self.publish(
            {"kind": "question", "session": session, "id": ident, "tool": tool, "detail": detail}
        )
        question.done.wait()
        with self._lock:
            self._questions.pop(ident, None)
        answer = question.answer or Answer.DENY
        self.publish({"kind": "answered", "session": session, "id": ident, "answer": answer.value})
        return answer

    def questions(self, session: str) -> list[Event]:
        """The questions of ``session`` waiting now (a page opened meanwhile shows them)."""
        with self._lock:
            return [
                {"id": i, "tool": q.tool, "detail": q.detail}
                for i, q in self._questions.items()
                if q.session == session and not q.done.is_set()
            ]

    def answer(self, ident: str, answer: str) -> None:
        if answer not in _ANSWERS:
            raise Unknown(f"an answer is once, session or deny, not {answer!r}")
        with self._lock:
            question = self._questions.get(ident)
        if question is None:
            raise Unknown("that question was answered already, or its turn stopped")
        self._give(question, _ANSWERS[answer])

    @staticmethod
    def _give(question: _Question, answer: Answer) -> None:
        if not question.done.is_set():
            question.answer = answer
            question.done.set()

    # -- the end --------------------------------------------------------------

    def close(self) -> list[str]:
        """Stop every turn, wait for them, let go of the sessions; the sessions made
        here that nothing came of are removed (their ids returned)."""
        with self._lock:
            sessions = list(self._chats)
        for session in sessions:
            self.stop(session, STOP_WAIT_S)
        with self._lock:
            chats, self._chats = list(self._chats.values()), {}
            made, self._made = self._made, []
        for chat in chats:
            chat.close()
        return [ident for ident in made if self.workspace.discard_unused(ident)]
