"""Building one agent invocation: its isolated home, configuration, environment and argv.

Each agent is configured the way its own documentation and settings files
ask, in a fresh HOME, to talk only to the scripted model on 127.0.0.1: every
proxy variable points at a dead local port with only loopback exempt, and
telemetry, update checks and analytics are off. Retries of failed model
requests are off too, so that each request takes exactly one turn.
"""

from __future__ import annotations

import json
import os
import tempfile
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

from model_servers import ScriptedServer

from ._install import Agent, binary
from ._process import RUN_TAG, Invocation

#: Hook commands to install: an event name in the agent's own vocabulary
#: ("PreToolUse", or Gemini's "BeforeTool") -> a shell command line.
Hooks = Mapping[str, str]

#: Nothing listens here: a request that ignores NO_PROXY fails at once.
DEAD_PROXY: Final = "http://127.0.0.1:9"

#: The tools Claude Code may use without asking (2.1.x has no MultiEdit).
CLAUDE_TOOLS: Final = ("Bash", "Write", "Edit", "Read", "Agent", "Glob", "Grep")

#: A slug from Codex's built-in model list: with an unknown one Codex drops
#: its apply_patch tool.
CODEX_MODEL: Final = "gpt-5.5"


def _home(home: Path | None, agent: Agent) -> Path:
    """The run's HOME: the one given (a test's tmp_path, cleaned by pytest), or a new one."""
    path = home if home is not None else Path(tempfile.mkdtemp(prefix=f"earshot-{agent}-home-"))
    path.mkdir(parents=True, exist_ok=True)
    return path


def _env(home: Path, extra: Mapping[str, str] | None, **agent: str) -> dict[str, str]:
    """A small environment built from nothing, not os.environ: a developer's
    API keys, proxies or agent variables (CLAUDECODE, CODEX_HOME) would
    change what the agent does."""
    env = {
        "HOME": str(home),
        "PATH": os.environ.get("PATH", os.defpath),
        "LANG": "C.UTF-8",
        "TERM": "dumb",
        "NO_COLOR": "1",
        "TMPDIR": os.environ.get("TMPDIR", "/tmp"),
        "NO_PROXY": "127.0.0.1,localhost",
        "no_proxy": "127.0.0.1,localhost",
        RUN_TAG: uuid.uuid4().hex,
    }
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"):
        env[name] = env[name.lower()] = DEAD_PROXY
    env.update(agent)
    env.update(extra or {})
    return env


def _url(model: ScriptedServer | str) -> str:
    return model if isinstance(model, str) else model.url


def _write_json(path: Path, document: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document, indent=2) + "\n")


def claude(
    prompt: str,
    *,
    cwd: Path,
    model: ScriptedServer | str,
    home: Path | None = None,
    hooks: Hooks | None = None,
    resume: str | None = None,
    tools: Sequence[str] = CLAUDE_TOOLS,
    args: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
) -> Invocation:
    """``claude -p PROMPT --output-format json`` on ``model`` (an AnthropicServer).

    Hooks go to the home's user settings (``~/.claude/settings.json``), not
    the project's, so the project tree holds only what the test put there;
    each invocation rewrites them, so a resumed run passes its hooks again.
    ``tools`` are allowed without asking (as root Claude Code refuses
    --dangerously-skip-permissions, and -p cannot ask)."""
    home = _home(home, "claude")
    groups = {
        event: [{"matcher": "*", "hooks": [{"type": "command", "command": cmd, "timeout": 30}]}]
        for event, cmd in (hooks or {}).items()
    }
    _write_json(home / ".claude" / "settings.json", {"hooks": groups} if groups else {})
    argv = [str(binary("claude")), "-p", prompt, "--output-format", "json"]
    argv += ["--allowedTools", ",".join(tools)] if tools else []
    argv += ["--resume", resume] if resume else []
    variables = {
        "ANTHROPIC_BASE_URL": _url(model),
        "ANTHROPIC_API_KEY": "scripted",
        "CLAUDE_CODE_MAX_RETRIES": "0",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_TELEMETRY": "1",
        "DISABLE_ERROR_REPORTING": "1",
        "DISABLE_AUTOUPDATER": "1",
    }
    return Invocation("claude", (*argv, *args), _env(home, env, **variables), cwd, home)


def codex(
    prompt: str,
    *,
    cwd: Path,
    model: ScriptedServer | str,
    home: Path | None = None,
    hooks: Hooks | None = None,
    resume: str | None = None,
    args: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
) -> Invocation:
    """``codex exec --json PROMPT`` (or ``codex exec resume ID PROMPT``) on
    ``model`` (a ResponsesServer), with approvals, sandbox and hook trust off.

    Hooks go to ``$CODEX_HOME/hooks.json``, rewritten by each invocation;
    ``args`` come before the prompt (``["-c", "key=value"]`` overrides config)."""
    home = _home(home, "codex")
    codex_home = home / ".codex"
    codex_home.mkdir(exist_ok=True)
    (codex_home / "config.toml").write_text(
        f'model = "{CODEX_MODEL}"\n'
        'model_provider = "scripted"\n'
        "check_for_update_on_startup = false\n"
        "[model_providers.scripted]\n"
        'name = "scripted"\n'
        f'base_url = "{_url(model)}/v1"\n'
        'wire_api = "responses"\n'
        'env_key = "SCRIPTED_API_KEY"\n'
        "request_max_retries = 0\n"
        "stream_max_retries = 0\n"
        "[analytics]\n"
        "enabled = false\n"
        "[features]\n"
        "plugins = false\n"  # without it Codex reaches for outside hosts at start
    )
    groups = {
        event: [{"hooks": [{"type": "command", "command": cmd, "timeout": 30}]}]
        for event, cmd in (hooks or {}).items()
    }
    _write_json(codex_home / "hooks.json", {"hooks": groups})
    flags = [
        "--skip-git-repo-check",
        "--dangerously-bypass-approvals-and-sandbox",
        "--dangerously-bypass-hook-trust",  # without it, hooks are skipped silently
        "--json",
        *args,
    ]
    head = [str(binary("codex")), "exec"]
    argv = [*head, "resume", *flags, resume, prompt] if resume else [*head, *flags, prompt]
    variables = {"CODEX_HOME": str(codex_home), "SCRIPTED_API_KEY": "scripted"}
    return Invocation("codex", tuple(argv), _env(home, env, **variables), cwd, home)


def gemini(
    prompt: str,
    *,
    cwd: Path,
    model: ScriptedServer | str,
    home: Path | None = None,
    hooks: Hooks | None = None,
    resume: str | None = None,
    args: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
) -> Invocation:
    """``gemini -p PROMPT --yolo --output-format json`` on ``model`` (a GeminiServer).

    Hooks go to ``~/.gemini/settings.json`` (timeouts in milliseconds),
    rewritten by each invocation; ``resume`` is what ``--resume`` takes (the
    session id, ``latest`` or an index)."""
    home = _home(home, "gemini")
    groups = {
        event: [
            {
                "matcher": "*",
                "hooks": [{"type": "command", "name": event, "command": cmd, "timeout": 30000}],
            }
        ]
        for event, cmd in (hooks or {}).items()
    }
    settings: dict[str, Any] = {
        "security": {"auth": {"selectedType": "gemini-api-key"}, "folderTrust": {"enabled": False}},
        "general": {
            "enableAutoUpdate": False,
            "enableAutoUpdateNotification": False,
            "maxAttempts": 1,  # no retries: one request, one turn
        },
        "privacy": {"usageStatisticsEnabled": False},
        "telemetry": {"enabled": False},
    }
    if groups:
        settings |= {"hooksConfig": {"enabled": True, "notifications": False}, "hooks": groups}
    _write_json(home / ".gemini" / "settings.json", settings)
    argv = [str(binary("gemini")), "-p", prompt, "--yolo", "--output-format", "json"]
    argv += ["--resume", resume] if resume else []
    variables = {
        "GEMINI_API_KEY": "scripted",
        "GOOGLE_GEMINI_BASE_URL": _url(model),
        "GEMINI_CLI_TRUST_WORKSPACE": "true",
    }
    return Invocation("gemini", (*argv, *args), _env(home, env, **variables), cwd, home)
