"""The OpenAI Responses API, as Codex CLI (0.171.x) calls it.

Codex streams ``POST /v1/responses`` and needs ``response.completed`` (with
usage) to end a turn; a stream that stops before it is a failed turn. Its
automatic compaction asks for the summary without tools: a side request,
answered with ``side_text``. Tool results come back as ``function_call_output`` and
``custom_tool_call_output`` items in the next request's ``input``. A call
whose tool is declared freeform (``"type": "custom"``, e.g. ``apply_patch``)
is sent as a ``custom_tool_call`` with a raw string input. A tool inside a
namespace (Codex's ``collaboration`` tools for subagents) is named
``"namespace.tool"`` in the script. A subagent's requests name it in
``client_metadata`` (``agent_name`` "/root/<task>", the root being "/root"):
their lane is "subagent".
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping

from ._base import JSON, Fail, Handler, ScriptedServer, ToolCall, call_input, parts


class ResponsesServer(ScriptedServer):
    """A scripted ``/v1/responses`` (streaming or not) and ``/v1/models``."""

    default_model = "gpt-5.5"

    def lane_of(self, headers: Mapping[str, str], body: JSON) -> str:
        metadata = (body.get("client_metadata") or {}).get("x-codex-turn-metadata")
        try:
            agent = json.loads(metadata).get("agent_name") if metadata else None
        except (ValueError, AttributeError):
            agent = None
        return "subagent" if agent not in (None, "/root") else "main"

    def serve(self, handler: Handler, method: str, body: JSON) -> None:
        path = handler.path.split("?", 1)[0].rstrip("/")
        if method == "GET" and path.endswith("/models"):
            self.record(handler, method, body, main=False)
            handler.send_json(200, {"object": "list", "data": []})
            return
        if method != "POST" or not path.endswith("/responses"):
            self.record(handler, method, body, main=False)
            if path.endswith("/responses/compact"):
                summary = _message_item(self.next_id("msg_"), self.side_text)
                handler.send_json(200, {"output": [summary]})
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
        custom = {
            str(tool.get("name"))
            for tool in body.get("tools") or ()
            if tool.get("type") == "custom"
        }
        items = [self._item(block, custom) for block in parts(answer)]
        response = {
            "id": self.next_id("resp_"),
            "object": "response",
            "created_at": int(time.time()),
            "model": str(body.get("model") or self.default_model),
            "status": "completed",
            "output": items,
            "usage": _usage(),
        }
        if not body.get("stream"):
            handler.send_json(200, response)
            return
        handler.start_sse()
        sequence = iter(range(1 << 30))

        def emit(kind: str, **fields: object) -> None:
            handler.sse({"type": kind, "sequence_number": next(sequence), **fields}, kind)

        emit("response.created", response={**response, "status": "in_progress", "output": []})
        for index, item in enumerate(items):
            emit(
                "response.output_item.added",
                output_index=index,
                item={**item, "status": "in_progress", **_emptied(item)},
            )
            for kind, delta in _deltas(item):
                emit(kind, item_id=item["id"], output_index=index, content_index=0, delta=delta)
            emit("response.output_item.done", output_index=index, item=item)
        emit("response.completed", response=response)

    def _item(self, block: ToolCall | str, custom: set[str]) -> JSON:
        if isinstance(block, str):
            return _message_item(self.next_id("msg_"), block)
        call_id = self.next_id("call_")
        if block.name in custom or isinstance(block.input, str):
            raw = block.input if isinstance(block.input, str) else str(block.input.get("input"))
            return {
                "type": "custom_tool_call",
                "id": self.next_id("ctc_"),
                "call_id": call_id,
                "name": block.name,
                "input": raw,
                "status": "completed",
            }
        namespace, _, name = block.name.rpartition(".")
        item = {
            "type": "function_call",
            "id": self.next_id("fc_"),
            "call_id": call_id,
            "name": name,
            "arguments": json.dumps(call_input(block)),
            "status": "completed",
        }
        return {**item, "namespace": namespace} if namespace else item


def _message_item(item_id: str, text: str) -> JSON:
    return {
        "type": "message",
        "id": item_id,
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }


def _emptied(item: JSON) -> JSON:
    """An item as ``output_item.added`` shows it, before its deltas."""
    if item["type"] == "function_call":
        return {"arguments": ""}
    if item["type"] == "custom_tool_call":
        return {"input": ""}
    return {"content": []}


def _deltas(item: JSON) -> list[tuple[str, str]]:
    if item["type"] == "function_call":
        return [("response.function_call_arguments.delta", item["arguments"])]
    if item["type"] == "custom_tool_call":
        return [("response.custom_tool_call_input.delta", item["input"])]
    return [("response.output_text.delta", item["content"][0]["text"])]


def _usage() -> JSON:
    return {
        "input_tokens": 100,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": 20,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": 120,
    }


def _error(status: int, message: str) -> JSON:
    kind = "rate_limit_exceeded" if status == 429 else "server_error" if status >= 500 else None
    return {"error": {"message": message, "type": kind or "invalid_request_error", "code": kind}}
