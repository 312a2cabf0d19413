"""Scripted model servers on 127.0.0.1 that the real agent binaries talk to.

Four wire protocols (Anthropic Messages for Claude Code and earshot chat,
OpenAI Responses for Codex CLI, Gemini for Gemini CLI, OpenAI Chat
Completions for earshot chat), one idea: a script of turns, one per
main-loop model request, and a record of every request for assertions.
Standard library only, so the servers run wherever the tests do.

    script = [[ToolCall("Bash", {"command": "rm -r build"}), ToolCall("Write", {...})], "all done"]
    with AnthropicServer(script) as model:
        result = run(claude("clean up", cwd=project, model=model))   # tests/real_agents
        assert model.remaining == 0
        assert model.main_requests[-1]["messages"][-1]["content"][0]["type"] == "tool_result"
"""

from ._anthropic import AnthropicServer
from ._base import DONE, Broken, CutOff, Exchange, Fail, Hang, ScriptedServer, ToolCall, Turn
from ._gemini import GeminiServer
from ._openai import ResponsesServer
from ._openai_chat import ChatCompletionsServer

__all__ = [
    "DONE",
    "AnthropicServer",
    "Broken",
    "ChatCompletionsServer",
    "CutOff",
    "Exchange",
    "Fail",
    "GeminiServer",
    "Hang",
    "ResponsesServer",
    "ScriptedServer",
    "ToolCall",
    "Turn",
]
