"""OpenAI Chat Completions, streamed, as the ``openai`` SDK calls it (and as
llama.cpp, vLLM and Ollama serve it).

``POST /v1/chat/completions`` with ``stream: true``: ``data:`` chunks of
``chat.completion.chunk`` (the role, then text deltas, then each tool
call's id, name and arguments), one with ``finish_reason``, then ``data:
[DONE]``. A request with tools takes a main turn. Tool results come back as
``{"role": "tool", "tool_call_id", "content"}`` messages.
"""

from __future__ import annotations

import json
import time

from ._base import (
    JSON,
    Broken,
    CutOff,
    Fail,
    Handler,
    ScriptedServer,
    ToolCall,
    call_input,
    parts,
)


class ChatCompletionsServer(ScriptedServer):
    """A scripted ``/v1/chat/completions`` (streaming or not) and ``/v1/models``."""

    default_model = "gpt-4o"

    def serve(self, handler: Handler, method: str, body: JSON) -> None:
        path = handler.path.split("?", 1)[0].rstrip("/")
        if method != "POST" or not path.endswith("/chat/completions"):
            self.record(handler, method, body, main=False)
            if method == "GET" and path.endswith("/models"):
                handler.send_json(200, {"object": "list", "data": []})
            else:
                handler.send_json(404, _error(f"no route {method} {path}"))
            return
        turn = self.record(handler, method, body, main=bool(body.get("tools")))
        answer = self.resolve(turn) if turn is not None else self.side_text
        if answer is None:
            return
        if isinstance(answer, Fail):
            handler.send_json(answer.status, _error(answer.message))
            return
        model = str(body.get("model") or self.default_model)
        ident = self.next_id("chatcmpl-")
        if isinstance(answer, Broken):
            handler.start_sse()
            handler.sse(_chunk(ident, model, {"role": "assistant", "content": answer.text}))
            handler.sse(_error(answer.message))
            return
        cut = isinstance(answer, CutOff)
        blocks = parts(answer.turn if isinstance(answer, CutOff) else answer)
        text = "".join(b for b in blocks if isinstance(b, str))
        calls = [
            {
                "id": b.id or self.next_id("call_"),
                "type": "function",
                "function": {"name": b.name, "arguments": json.dumps(call_input(b))},
            }
            for b in blocks
            if isinstance(b, ToolCall)
        ]
        finish = "tool_calls" if calls else "stop"
        if not body.get("stream"):
            message: JSON = {"role": "assistant", "content": text or None}
            if calls:
                message["tool_calls"] = calls
            choice = {"index": 0, "message": message, "finish_reason": finish}
            handler.send_json(200, {**_head(ident, model, "chat.completion"), "choices": [choice]})
            return
        handler.start_sse()
        handler.sse(_chunk(ident, model, {"role": "assistant", "content": ""}))
        if text:
            handler.sse(_chunk(ident, model, {"content": text}))
        for index, call in enumerate(calls):
            opening = {"index": index, "id": call["id"], "type": "function"}
            named = {**opening, "function": {"name": call["function"]["name"], "arguments": ""}}
            handler.sse(_chunk(ident, model, {"tool_calls": [named]}))
            arguments = {"index": index, "function": {"arguments": call["function"]["arguments"]}}
            handler.sse(_chunk(ident, model, {"tool_calls": [arguments]}))
        if cut:
            return  # closed: no finish_reason, no [DONE]
        handler.sse(_chunk(ident, model, {}, finish))
        handler.wfile.write(b"data: [DONE]\n\n")
        handler.wfile.flush()


def _head(ident: str, model: str, kind: str) -> JSON:
    return {"id": ident, "object": kind, "created": int(time.time()), "model": model}


def _chunk(ident: str, model: str, delta: JSON, finish: str | None = None) -> JSON:
    choice = {"index": 0, "delta": delta, "finish_reason": finish}
    return {**_head(ident, model, "chat.completion.chunk"), "choices": [choice]}


def _error(message: str) -> JSON:
    return {"error": {"message": message, "type": "server_error", "param": None, "code": None}}
