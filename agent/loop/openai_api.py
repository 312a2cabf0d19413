"""OpenAI Chat Completions through the ``openai`` SDK, streamed.

Chat Completions is what every OpenAI-compatible server speaks (llama.cpp,
vLLM, Ollama), so it is the one used. The SDK reads ``OPENAI_API_KEY`` and
``OPENAI_BASE_URL``; the first request is not retried (``FirstContact``).
A local server needs no key, but the SDK refuses to start without one: with
``OPENAI_BASE_URL`` set and no key, a placeholder is sent; with neither,
nothing is sent (``check``).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from earshot.agent.loop.errors import one_line_error
from earshot.agent.loop.history import Message, Output, Text, Use
from earshot.agent.loop.provider import (
    Cancel,
    FirstContact,
    MissingKey,
    ProviderError,
    Reply,
    Request,
)

if TYPE_CHECKING:
    import openai

#: The variables the SDK reads its key and its server from.
KEY, URL = "OPENAI_API_KEY", "OPENAI_BASE_URL"

#: finish_reason -> the stop reasons a Reply says.
_STOPS = {"stop": "end_turn", "tool_calls": "tool_use", "length": "max_tokens"}


def make(model: str) -> OpenAIProvider:
    return OpenAIProvider(model)


def wire_messages(system: str, messages: list[Message]) -> list[dict[str, Any]]:
    """Chat Completions' ``messages``: a tool result is a message of its own."""
    out: list[dict[str, Any]] = [{"role": "system", "content": system}] if system else []
    for message in messages:
        texts = [p.text for p in message.parts if isinstance(p, Text)]
        if message.role == "assistant":
            calls = [
                {
                    "id": p.id,
                    "type": "function",
                    "function": {
                        "name": p.name,
                        "arguments": json.dumps(p.input if isinstance(p.input, dict) else {}),
                    },
                }
                for p in message.parts
                if isinstance(p, Use)
            ]
            doc: dict[str, Any] = {"role": "assistant", "content": "\n\n".join(texts) or None}
            if calls:
                doc["tool_calls"] = calls
            out.append(doc)
            continue
        for part in message.parts:
            if isinstance(part, Output):
                text = part.text if not part.is_error else f"[error] {part.text}"
                out.append({"role": "tool", "tool_call_id": part.id, "content": text})
        if texts:
            out.append({"role": "user", "content": "\n\n".join(texts)})
    return out


class OpenAIProvider:
    def __init__(self, model: str) -> None:
        self.model = model
        self._client: openai.OpenAI | None = None
        self._contact = FirstContact()

    @property
    def name(self) -> str:
        return f"openai:{self.model}"

    def check(self) -> None:
        if not (os.environ.get(KEY) or os.environ.get(URL)):
            raise MissingKey(self.name, KEY, f"or {URL}, for a local server that needs none")

    def _error(self, exc: BaseException, began: bool) -> str:
        base_url = str(self._client.base_url) if self._client is not None else None
        return one_line_error(self.name, exc, streaming=began, key=KEY, url=URL, base_url=base_url)

    def _sdk(self) -> openai.OpenAI:
        if self._client is None:
            import openai  # seconds: on first use (``provider.preload``)

            key = None
            if os.environ.get(URL) and not os.environ.get(KEY):
                key = "none"  # a local server wants none; the SDK wants one
            try:
                self._client = openai.OpenAI(api_key=key)
            except openai.OpenAIError as exc:
                raise ProviderError(self._error(exc, False)) from exc
        return self._client

    def reply(self, request: Request, on_text: Callable[[str], None], cancel: Cancel) -> Reply:
        tools = [
            {
                "type": "function",
                "function": {"name": t.name, "description": t.description, "parameters": t.schema},
            }
            for t in request.tools
        ]
        kwargs: dict[str, Any] = {
            "model": self.model,
            "messages": wire_messages(request.system, list(request.messages)),
            "stream": True,
        }
        if tools:
            kwargs["tools"] = tools
        reply = Reply()
        calls: dict[int, dict[str, str]] = {}
        began = finished = False
        self.check()
        client = self._sdk()

        def create(retries: int | None) -> Any:
            sdk = client if retries is None else client.with_options(max_retries=retries)
            return sdk.chat.completions.create(**kwargs)

        try:
            stream = self._contact.open(create)
            cancel.on_cancel(stream.close)
            try:
                for chunk in stream:
                    began = True
                    if cancel.is_set:
                        break
                    finished = _take(chunk, calls, reply, on_text) or finished
            finally:
                cancel.on_cancel(None)
                stream.close()
        except Exception as exc:
            if cancel.is_set:
                return Reply(reply.text, [], "interrupted")
            raise ProviderError(self._error(exc, began), reply.text) from exc
        if cancel.is_set:
            return Reply(reply.text, [], "interrupted")
        if not finished:  # the connection closed mid-reply: no finish_reason came
            said = f"{self.name}: the reply broke off: the stream ended before its end"
            raise ProviderError(said, reply.text)
        for index in sorted(calls):
            reply.uses.append(_use(calls[index], index))
        if reply.uses:
            reply.stop = "tool_use"
        return reply


def _take(
    chunk: Any, calls: dict[int, dict[str, str]], reply: Reply, on_text: Callable[[str], None]
) -> bool:
    """Take one chunk into ``reply``; whether it ended the reply (a finish_reason)."""
    finished = False
    for choice in chunk.choices or ():
        delta = choice.delta
        if delta is not None and delta.content:
            reply.text += delta.content
            on_text(delta.content)
        for call in (delta.tool_calls if delta is not None else None) or ():
            slot = calls.setdefault(call.index, {"id": "", "name": "", "arguments": ""})
            if call.id:
                slot["id"] = call.id
            function = call.function
            if function is not None:
                slot["name"] += function.name or ""
                slot["arguments"] += function.arguments or ""
        if choice.finish_reason:
            reply.stop = _STOPS.get(choice.finish_reason, choice.finish_reason)
            finished = True
    return finished


def _use(call: dict[str, str], index: int) -> Use:
    ident = call["id"] or f"call_{index}"
    raw = call["arguments"] or "{}"
    try:
        given = json.loads(raw)
    except ValueError as exc:
        return Use(ident, call["name"], None, f"the tool input is not JSON ({exc})")
    return Use(ident, call["name"], given)
