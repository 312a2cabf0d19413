"""Whether a hook command runs: fed the probe event, as the agent would run it.

The agents run a hook's command line through ``/bin/sh -c`` with the event
on stdin. The probe event (``quick.PROBE``) is one no agent sends: earshot's
hook answers it with ``{"earshot_probe": ...}`` once the modules a real
event needs have loaded, and opens no store, so probing leaves no session,
batch or daemon behind. Any other answer (a shell's "not found", a
traceback, a program that is not earshot) says why the agent's events
would go unrecorded.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess

from earshot.agent.hooks.quick import PROBE

#: A cold interpreter loading earshot takes well under a second; a loaded machine more.
PROBE_TIMEOUT_S = 30.0
#: Seconds the probe waits, when set (tests lower it; a slow machine may raise it).
ENV_TIMEOUT = "EARSHOT_PROBE_TIMEOUT"


def probe_timeout() -> float:
    """How long a hook command has to answer the probe: $EARSHOT_PROBE_TIMEOUT,
    else 30 s (a value that is not a positive number is ignored)."""
    try:
        given = float(os.environ.get(ENV_TIMEOUT, ""))
    except ValueError:
        return PROBE_TIMEOUT_S
    return given if 0 < given < float("inf") else PROBE_TIMEOUT_S


def probe_failure(line: str, agent: str, root: str) -> str | None:
    """Why the hook command ``line`` does not answer the probe as earshot's hook
    of ``agent`` does, worded to follow "the hook command" or "--command X";
    None: it does.

    The command runs in a session of its own, and the whole process group is
    killed however the probe ends: a command that hangs (or leaves a child
    behind) leaves nothing running."""
    payload = {"hook_event_name": PROBE, "session_id": "earshot-probe", "cwd": root}
    timeout = probe_timeout()
    try:
        proc = subprocess.Popen(
            ["/bin/sh", "-c", line],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            errors="replace",
            cwd=root,
            start_new_session=True,
        )
    except OSError as exc:
        return f"cannot start ({exc.strerror})"
    try:
        stdout, stderr = proc.communicate(json.dumps(payload), timeout=timeout)
    except subprocess.TimeoutExpired:
        return f"did not answer within {timeout:g} s"
    finally:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.kill()  # a no-op once it has exited
        proc.wait()
        for pipe in (proc.stdin, proc.stdout, proc.stderr):
            if pipe is not None:
                with contextlib.suppress(OSError):
                    pipe.close()
    said = [line for line in stderr.splitlines() if line.strip()]
    last = said[-1].strip() if said else ""
    if proc.returncode == 127:
        return f"is not found ({last})" if last else "is not found"
    if proc.returncode != 0:
        return f"exits {proc.returncode}" + (f": {last}" if last else "")
    try:
        answer = json.loads(stdout)
    except ValueError:
        answer = None
    probe = answer.get("earshot_probe") if isinstance(answer, dict) else None
    if not isinstance(probe, dict) or probe.get("agent") != agent:
        return "runs, but does not answer as earshot's hook (is it earshot?)"
    return None
