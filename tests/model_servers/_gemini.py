"""The Gemini API, as Gemini CLI (0.61.x) calls it with an API key.

The main loop streams ``POST /v1beta/models/{model}:streamGenerateContent?alt=sse``
with its function declarations. Besides it the CLI asks, unstreamed
(``:generateContent``), for small JSON documents: the model router's
``{"complexity_reasoning", "complexity_score"}``, the next-speaker check,
loop detection. Those side requests carry a response schema; the server
answers a minimal document that fits it, and takes no turn (compression's
unstreamed requests have no schema and get ``side_text``). A subagent
(``invoke_agent``) is offered a ``complete_task`` tool, which must end its
run: its lane is "subagent".
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ._base import JSON, Fail, Handler, ScriptedServer, ToolCall, call_input, parts

_STATUS_NAMES = {
    400: "INVALID_ARGUMENT",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    503: "UNAVAILABLE",
}

#: Answers for the side questions whose field names are known: the router's
#: low score keeps the default model; "user" speaks next, so the turn ends.
_KNOWN_FIELDS: Mapping[str, object] = {
    "complexity_reasoning": "simple scripted task",
    "complexity_score": 10,
    "next_speaker": "user",
    "reasoning": "scripted",
}


class GeminiServer(ScriptedServer):
    """A scripted ``:streamGenerateContent``, ``:generateContent`` and ``:countTokens``."""

    default_model = "gemini-2.5-pro"

    def lane_of(self, headers: Mapping[str, str], body: JSON) -> str:
        names = {
            declaration.get("name")
            for tool in body.get("tools") or ()
            for declaration in tool.get("functionDeclarations") or ()
        }
        return "subagent" if "complete_task" in names else "main"

    def serve(self, handler: Handler, method: str, body: JSON) -> None:
        path = handler.path.split("?", 1)[0]
        action = path.rsplit(":", 1)[-1] if ":" in path else ""
        model = path.rsplit("/", 1)[-1].split(":", 1)[0] or self.default_model
        streamed = action == "streamGenerateContent"
        main = streamed and bool(body.get("tools"))
        if action not in ("streamGenerateContent", "generateContent"):
            self.record(handler, method, body, main=False)
            if action == "countTokens":
                handler.send_json(200, {"totalTokens": 100})
            else:
                handler.send_json(404, _error(404, f"no route {method} {path}"))
            return
        turn = self.record(handler, method, body, main=main)
        answer = self.resolve(turn) if turn is not None else self._side_answer(body)
        if answer is None:
            return
        if isinstance(answer, Fail):
            handler.send_json(answer.status, _error(answer.status, answer.message))
            return
        response = {
            "candidates": [
                {
                    "content": {"role": "model", "parts": [_part(b) for b in parts(answer)]},
                    "finishReason": "STOP",
                    "index": 0,
                }
            ],
            "usageMetadata": {
                "promptTokenCount": 100,
                "candidatesTokenCount": 20,
                "totalTokenCount": 120,
            },
            "modelVersion": model,
        }
        if streamed:
            handler.start_sse()
            handler.sse(response)
        else:
            handler.send_json(200, response)

    def _side_answer(self, body: JSON) -> str:
        config = body.get("generationConfig") or {}
        schema = config.get("responseJsonSchema") or config.get("responseSchema")
        if isinstance(schema, dict):
            return json.dumps(_fit(schema))
        return self.side_text


def _part(block: ToolCall | str) -> JSON:
    if isinstance(block, str):
        return {"text": block}
    return {"functionCall": {"name": block.name, "args": call_input(block)}}


def _fit(schema: Mapping[str, Any], name: str = "") -> object:
    """A small value that validates against ``schema`` (both Gemini's
    upper-case types and JSON Schema's lower-case ones)."""
    if name in _KNOWN_FIELDS:
        return _KNOWN_FIELDS[name]
    if schema.get("enum"):
        return schema["enum"][0]
    kind = str(schema.get("type", "object")).lower()
    if kind == "object":
        properties = schema.get("properties") or {}
        return {key: _fit(sub, key) for key, sub in properties.items()}
    if kind == "array":
        return []
    if kind in ("integer", "number"):
        return int(schema.get("minimum", 0))
    if kind == "boolean":
        return False
    return "ok"


def _error(status: int, message: str) -> JSON:
    name = _STATUS_NAMES.get(status, "UNKNOWN")
    return {"error": {"code": status, "message": message, "status": name}}
