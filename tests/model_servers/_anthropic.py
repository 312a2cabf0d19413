"""The Anthropic Messages API, as Claude Code (2.1.x) calls it.

Claude Code streams every main-loop request (``POST /v1/messages?beta=true``
with its tools); a request without tools (a title, a topic check) is a side
request and takes no turn. Subagents (the Agent tool, which 2.1.x launches
in the background) call the same endpoint with tools and an
``x-claude-code-agent-id`` header: their lane is "subagent", so a test can
script them apart from their parent (``lanes={"subagent": [...]}``).
``/compact`` sends its summarization request with all the tools, so it takes
a main turn; an answer without ``<summary>...</summary>`` makes Claude Code
ask a second time.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

from ._base import (
    JSON,
    Broken,
    CutOff,
    Fail,
    Handler,
    ScriptedServer,
    ToolCall,
    call_input,
    has_tool_calls,
    parts,
)

_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    529: "overloaded_error",
}


class AnthropicServer(ScriptedServer):
    """A scripted ``/v1/messages`` (streaming or not) and ``/v1/messages/count_tokens``."""

    default_model = "claude-sonnet-4-5"

    def lane_of(self, headers: Mapping[str, str], body: JSON) -> str:
        return "subagent" if headers.get("x-claude-code-agent-id") else "main"

    def serve(self, handler: Handler, method: str, body: JSON) -> None:
        path = handler.path.split("?", 1)[0].rstrip("/")
        if method != "POST" or not path.endswith("/v1/messages"):
            self.record(handler, method, body, main=False)
            if path.endswith("/count_tokens"):
                handler.send_json(200, {"input_tokens": 100})
            else:
                handler.send_json(404, _error(404, f"no route {method} {path}"))
            return
        turn = self.record(handler, method, body, main=bool(body.get("tools")))
        answer = self.resolve(turn) if turn is not None else self.side_text
        if answer is None:
            return
        if isinstance(answer, Fail):
            handler.send_json(answer.status, _error(answer.status, answer.message))
            return
        if isinstance(answer, Broken):
            self._broken(handler, str(body.get("model") or self.default_model), answer)
            return
        cut = isinstance(answer, CutOff)
        turn = answer.turn if isinstance(answer, CutOff) else answer
        blocks = [self._block(block) for block in parts(turn)]
        stop = "tool_use" if has_tool_calls(parts(turn)) else "end_turn"
        model = str(body.get("model") or self.default_model)
        if body.get("stream"):
            self._stream(handler, model, blocks, stop, cut=cut)
        else:
            handler.send_json(200, self._message(model, blocks, stop, _usage()))

    def _block(self, block: ToolCall | str) -> JSON:
        if isinstance(block, str):
            return {"type": "text", "text": block}
        return {
            "type": "tool_use",
            "id": block.id or self.next_id("toolu_"),
            "name": block.name,
            "input": call_input(block),
        }

    def _message(self, model: str, content: list[JSON], stop: str | None, usage: JSON) -> JSON:
        return {
            "id": self.next_id("msg_"),
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": content,
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": usage,
        }

    def _stream(
        self, handler: Handler, model: str, blocks: Sequence[JSON], stop: str, *, cut: bool = False
    ) -> None:
        """The event sequence the SDK's stream accumulator expects, one delta per block;
        ``cut``: the connection closes after the last block's delta, the end unsent."""
        start = self._message(model, [], None, _usage(output=1))
        handler.start_sse()
        handler.sse({"type": "message_start", "message": start}, "message_start")
        for index, block in enumerate(blocks):
            if block["type"] == "text":
                opening: JSON = {"type": "text", "text": ""}
                delta: JSON = {"type": "text_delta", "text": block["text"]}
            else:
                opening = {**block, "input": {}}
                delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
            handler.sse(
                {"type": "content_block_start", "index": index, "content_block": opening},
                "content_block_start",
            )
            handler.sse(
                {"type": "content_block_delta", "index": index, "delta": delta},
                "content_block_delta",
            )
            if cut and index == len(blocks) - 1:
                return
            handler.sse({"type": "content_block_stop", "index": index}, "content_block_stop")
        handler.sse(
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop, "stop_sequence": None},
                "usage": {"output_tokens": 20},
            },
            "message_delta",
        )
        handler.sse({"type": "message_stop"}, "message_stop")

    def _broken(self, handler: Handler, model: str, broken: Broken) -> None:
        """Some text, then the ``error`` event the API sends when it fails mid-stream."""
        handler.start_sse()
        start = self._message(model, [], None, _usage(output=1))
        handler.sse({"type": "message_start", "message": start}, "message_start")
        block: JSON = {"type": "text", "text": ""}
        opening = {"type": "content_block_start", "index": 0, "content_block": block}
        handler.sse(opening, "content_block_start")
        delta = {"type": "text_delta", "text": broken.text}
        piece = {"type": "content_block_delta", "index": 0, "delta": delta}
        handler.sse(piece, "content_block_delta")
        handler.sse(_error(529, broken.message), "error")


def _usage(output: int = 20) -> JSON:
    return {
        "input_tokens": 100,
        "output_tokens": output,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
    }


def _error(status: int, message: str) -> JSON:
    kind = _ERROR_TYPES.get(status, "api_error")
    return {"type": "error", "error": {"type": kind, "message": message}}
