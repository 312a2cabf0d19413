"""Drivers for the real agent binaries (Claude Code, Codex CLI, Gemini CLI) on a scripted model.

earshot is called by these agents' hooks, and what matters (the payloads, the
order of events, the process tree a hook runs in) is only true of the real
binaries; a fake would test our reading of them. So the versions are pinned,
installed once with npm into ``$EARSHOT_AGENTS_DIR`` (default ``<repo>/.agents``),
and every run gets a home of its own: no configuration, credential or login
of the developer's reaches a test, and the agent's own files land somewhere
a test can read them.

Nothing may leave the machine: the model is a local server
(tests/model_servers), every proxy variable points at a dead port on
127.0.0.1 with only loopback exempt, and telemetry, updates and analytics
are off. Retries of failed model requests are off too, so that each request
takes exactly one turn of the script.

    with AnthropicServer([[ToolCall("Bash", {"command": "make"})], "built", "again"]) as model:
        first = run(claude("build it", cwd=project, model=model, home=tmp_path / "home"))
        again = run(claude("again", cwd=project, model=model, home=first.home,
                           resume=first.session_id))

    running = start(codex("wait", cwd=project, model=model, hooks={"PreToolUse": cmd}))
    ...                                  # e.g. until the tool's first output exists
    os.kill(running.worker(), signal.SIGINT)
    interrupted = running.wait()

``_install`` finds or installs the binaries, ``_agents`` builds an
invocation per agent, ``_process`` runs it.
"""

from ._agents import CLAUDE_TOOLS, CODEX_MODEL, DEAD_PROXY, Hooks, claude, codex, gemini
from ._install import AGENTS_DIR_VARIABLE, PACKAGES, Agent, Package, agents_dir, binary
from ._process import RUN_TAG, AgentRun, Invocation, Running, leftovers, run, session_id, start

__all__ = [
    "AGENTS_DIR_VARIABLE",
    "CLAUDE_TOOLS",
    "CODEX_MODEL",
    "DEAD_PROXY",
    "PACKAGES",
    "RUN_TAG",
    "Agent",
    "AgentRun",
    "Hooks",
    "Invocation",
    "Package",
    "Running",
    "agents_dir",
    "binary",
    "claude",
    "codex",
    "gemini",
    "leftovers",
    "run",
    "session_id",
    "start",
]
