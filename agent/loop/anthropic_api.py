"""The Anthropic Messages API through the ``anthropic`` SDK, streamed.

The SDK reads ``ANTHROPIC_API_KEY`` (or ``ANTHROPIC_AUTH_TOKEN``) and
``ANTHROPIC_BASE_URL``; without a key nothing is sent (``check``), and the
first request is not retried (``FirstContact``). The raw event stream is read (not the SDK's
accumulating helper) so that a tool input that is not JSON reaches the
model as an error result instead of failing the whole reply.
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
    import anthropic


#: The variables the SDK reads its key (either) and its server from.
KEY, TOKEN, URL = "ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL"

#: Where ``_take`` notes the stream's ``message_stop`` (no content block has it).
_ENDED = -1


def make(model: str) -> AnthropicProvider:
    return AnthropicProvider(model)


def _content(message: Message) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for part in message.parts:
        if isinstance(part, Text):
            out.append({"type": "text", "text": part.text})
        elif isinstance(part, Use):
            given = part.input if isinstance(part.input, dict) else {}
            out.append({"type": "tool_use", "id": part.id, "name": part.name, "input": given})
        elif isinstance(part, Output):
            block: dict[str, Any] = {
                "type": "tool_result",
                "tool_use_id": part.id,
                "content": part.text or "(no output)",
            }
            if part.is_error:
                block["is_error"] = True
            out.append(block)
    return out


def wire_messages(messages: list[Message]) -> list[dict[str, Any]]:
    """The Messages API's ``messages`` for ``messages`` (roles already alternate)."""
    return [{"role": m.role, "content": _content(m)} for m in messages]


class AnthropicProvider:
    def __init__(self, model: str) -> None:
        self.model = model
        self._client: anthropic.Anthropic | None = None
        self._contact = FirstContact()

    @property
    def name(self) -> str:
        return f"anthropic:{self.model}"

    def check(self) -> None:
        if not (os.environ.get(KEY) or os.environ.get(TOKEN)):
            raise MissingKey(self.name, KEY, f"or {TOKEN}; {URL} names another server")

    def _error(self, exc: BaseException, began: bool) -> str:
        base_url = str(self._client.base_url) if self._client is not None else None
        return one_line_error(self.name, exc, streaming=began, key=KEY, url=URL, base_url=base_url)

    def _sdk(self) -> anthropic.Anthropic:
        if self._client is None:
            import anthropic  # seconds: on first use (``provider.preload``)

            self._client = anthropic.Anthropic()
        return self._client

    def reply(self, request: Request, on_text: Callable[[str], None], cancel: Cancel) -> Reply:
        tools = [
            {"name": t.name, "description": t.description, "input_schema": t.schema}
            for t in request.tools
        ]
        kwargs: dict[str, Any] = {
            "model": self.model,
            "max_tokens": request.max_tokens,
            "messages": wire_messages(list(request.messages)),
            "stream": True,
        }
        if request.system:
            kwargs["system"] = request.system
        if tools:
            kwargs["tools"] = tools
        reply = Reply()
        blocks: dict[int, dict[str, Any]] = {}
        began = False
        self.check()
        client = self._sdk()

        def create(retries: int | None) -> Any:
            sdk = client if retries is None else client.with_options(max_retries=retries)
            return sdk.messages.create(**kwargs)

        try:
            stream = self._contact.open(create)
            cancel.on_cancel(stream.close)
            try:
                for event in stream:
                    began = True
                    if cancel.is_set:
                        break
                    self._take(event, blocks, reply, on_text)
            finally:
                cancel.on_cancel(None)
                stream.close()
        except Exception as exc:
            if cancel.is_set:
                reply.uses.clear()
                reply.stop = "interrupted"
                return reply
            raise ProviderError(self._error(exc, began), reply.text) from exc
        if cancel.is_set:
            reply.uses.clear()
            reply.stop = "interrupted"
            return reply
        if blocks.pop(_ENDED, None) is None:  # the connection closed mid-reply
            said = f"{self.name}: the reply broke off: the stream ended before its end"
            raise ProviderError(said, reply.text)
        for index in sorted(blocks):
            block = blocks[index]
            if block["type"] == "tool_use":
                reply.uses.append(_use(block))
        return reply

    @staticmethod
    def _take(
        event: Any, blocks: dict[int, dict[str, Any]], reply: Reply, on_text: Callable[[str], None]
    ) -> None:
        kind = event.type
        if kind == "content_block_start":
            block = event.content_block
            if block.type == "tool_use":
                blocks[event.index] = {"type": "tool_use", "id": block.id, "name": block.name}
                blocks[event.index]["json"] = ""
            elif block.type == "text":
                blocks[event.index] = {"type": "text"}
                if block.text:
                    reply.text += block.text
                    on_text(block.text)
        elif kind == "content_block_delta":
            delta = event.delta
            if delta.type == "text_delta":
                reply.text += delta.text
                on_text(delta.text)
            elif delta.type == "input_json_delta" and "json" in blocks.get(event.index, {}):
                blocks[event.index]["json"] += delta.partial_json
        elif kind == "message_delta":
            reply.stop = event.delta.stop_reason or reply.stop
        elif kind == "message_stop":
            blocks[_ENDED] = {"type": "end"}


def _use(block: dict[str, Any]) -> Use:
    raw = block.get("json") or "{}"
    try:
        given = json.loads(raw)
    except ValueError as exc:
        return Use(block["id"], block["name"], None, f"the tool input is not JSON ({exc})")
    return Use(block["id"], block["name"], given)
