"""``earshot hook AGENT`` fed any stdin: it never breaks the agent. It exits 0 and
prints one JSON answer or nothing on stdout (a message the agent shows the
person when the event cannot be read), and never a traceback.

Each example runs the real script, so the profile's count is cut to a fifth.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from earshot_cli import Cli
from fuzz import damaged, examples, json_values, mutated_doc
from hypothesis import example, given
from hypothesis import strategies as st

AGENTS = ("claude", "codex", "gemini")
EVENT = {
    "session_id": "fuzz-session",
    "transcript_path": "/nowhere.jsonl",
    "hook_event_name": "PreToolUse",
    "tool_name": "Bash",
    "tool_input": {"command": "echo hi > out.txt"},
    "tool_use_id": "t1",
}
events = st.fixed_dictionaries(
    {
        **{k: st.just(v) for k, v in EVENT.items()},
        "hook_event_name": st.sampled_from(
            ["SessionStart", "UserPromptSubmit", "PreToolUse", "BeforeTool", "Stop", "Zzz"]
        ),
        "prompt": st.sampled_from(["hello", "earshot log", "earshot undo 'x"]),
        "tool_input": json_values,
    }
)
stdins = st.one_of(
    damaged(events.map(lambda e: json.dumps(e).encode()), max_size=80),
    mutated_doc(events).map(lambda e: json.dumps(e).encode()),
)


@examples(0.2)
@given(st.sampled_from(AGENTS), stdins)
@example("claude", b"")
@example("codex", b"[" * 100_000)
@example("gemini", b'{"session_id": "\\ud800", "hook_event_name": "SessionStart"}')
@example("claude", b"\xff\xfe{}")
def test_the_hook_answers_any_stdin_with_one_json_line_or_nothing(agent: str, stdin: bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "root"
        root.mkdir()
        cli = Cli(Path(tmp) / "home", root)
        ran = cli.run("hook", agent, "--root", str(root), stdin=stdin, expect=None, timeout=120)
    assert ran.rc == 0, str(ran)
    assert "Traceback" not in ran.stderr, str(ran)
    lines = ran.stdout.splitlines()
    assert len(lines) <= 1, str(ran)
    if lines:
        assert isinstance(json.loads(lines[0]), dict), str(ran)
