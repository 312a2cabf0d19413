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

import json
import subprocess

from earshot.agent.hooks.quick import PROBE

#: A cold interpreter loading earshot takes well under a second; a loaded machine more.
PROBE_TIMEOUT_S = 30.0


def probe_failure(line: str, agent: str, root: str) -> str | None:
    """Why the hook command ``line`` does not answer the probe as earshot's hook
    of ``agent`` does; None: it does."""
    payload = {"hook_event_name": PROBE, "session_id": "earshot-probe", "cwd": root}
    try:
        done = subprocess.run(
            ["/bin/sh", "-c", line],
            input=json.dumps(payload),
            capture_output=True,
            text=True,
            errors="replace",
            cwd=root,
            timeout=PROBE_TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return f"it did not answer within {PROBE_TIMEOUT_S:g} s"
    except OSError as exc:
        return f"it cannot start ({exc.strerror})"
    said = [line for line in done.stderr.splitlines() if line.strip()]
    last = said[-1].strip() if said else ""
    if done.returncode == 127:
        return f"not found ({last})" if last else "not found"
    if done.returncode != 0:
        return f"it exits {done.returncode}" + (f": {last}" if last else "")
    try:
        answer = json.loads(done.stdout)
    except ValueError:
        answer = None
    probe = answer.get("earshot_probe") if isinstance(answer, dict) else None
    if not isinstance(probe, dict) or probe.get("agent") != agent:
        return "it runs, but does not answer as earshot's hook (is it earshot?)"
    return None
