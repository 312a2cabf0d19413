"""Running a batch's shell command with its output captured (``command.run_command``):
in the order written, bounded in memory, never waiting on what it left running."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from earshot.agent.core.command import CAPTURE_HEAD, CAPTURE_TAIL, run_command, shell_argv


def run(command: str, cwd: Path) -> tuple[int, str, float]:
    began = time.monotonic()
    ran = run_command(shell_argv(command), str(cwd), True)
    assert ran.output is not None
    return ran.returncode, ran.output, time.monotonic() - began


def test_stdout_and_stderr_read_in_the_order_written(tmp_path: Path) -> None:
    code, out, _ = run("echo a; echo b >&2; echo c; exit 3", tmp_path)
    assert (code, out) == (3, "a\nb\nc\n")


def test_a_background_child_holding_the_output_is_not_waited_for(tmp_path: Path) -> None:
    for command in ("sleep 30 & echo started", "setsid sleep 30 & echo started"):
        code, out, took = run(command, tmp_path)
        assert code == 0 and out.startswith("started\n") and took < 10, (command, took)
        assert "still holds its output, which is not waited for" in out


def test_what_a_background_child_writes_later_never_kills_it(tmp_path: Path) -> None:
    # Its output drains on: a closed pipe would end it with SIGPIPE on its next write.
    script = "(sleep 2; echo late; touch wrote) & echo now"
    _, out, _ = run(script, tmp_path)
    assert out.startswith("now\n")
    deadline = time.monotonic() + 20
    while not (tmp_path / "wrote").exists():
        assert time.monotonic() < deadline, "the background child died"
        time.sleep(0.1)


def test_huge_output_keeps_its_head_and_tail_and_says_the_cut(tmp_path: Path) -> None:
    total = 3 * (CAPTURE_HEAD + CAPTURE_TAIL)
    code, out, _ = run(f"head -c {total} /dev/zero | tr '\\0' x; echo; echo the-end", tmp_path)
    assert code == 0
    assert len(out) < CAPTURE_HEAD + CAPTURE_TAIL + 200
    assert out.rstrip().endswith("the-end")
    assert (
        f"{total + 1 - CAPTURE_HEAD - CAPTURE_TAIL + len('the-end') + 1:,} bytes of output not kept"
        in out
    )


def _wait_for_file(path: Path) -> None:
    deadline = time.monotonic() + 120  # a bound for a command that never starts
    while not path.exists() and time.monotonic() < deadline:
        time.sleep(0.01)


def _name(group: list[int]) -> str:
    """The command name of the group's leader, once it has one."""
    try:
        return Path(f"/proc/{group[0]}/comm").read_text().strip() if group else ""
    except OSError:
        return ""


def test_a_signal_still_stops_a_captured_command(tmp_path: Path) -> None:
    import threading

    group: list[int] = []

    def later() -> None:
        # Sent once the shell is sleep itself (exec): dash -c catches a SIGINT
        # that lands between two commands and acts on it only when the next
        # one ends, as it does in a terminal (sleep 30 ran out once in CI).
        deadline = time.monotonic() + 120  # a bound for a command that never starts
        while _name(group) != "sleep" and time.monotonic() < deadline:
            time.sleep(0.01)
        os.kill(os.getpid(), signal.SIGINT)

    threading.Thread(target=later, daemon=True).start()
    began = time.monotonic()
    ran = run_command(
        shell_argv("touch started; exec sleep 30"), str(tmp_path), True, on_spawn=group.append
    )
    # Stopped, not run out: sleep 30 would take 30 s.
    assert ran.interrupted_by == signal.SIGINT and time.monotonic() - began < 29


def test_a_captured_command_that_closed_its_output_and_ignores_sigterm_is_killed_after_the_grace(
    tmp_path: Path,
) -> None:
    # Its output ends (EOF) long before it does: the grace period must still run.
    import threading

    from earshot.agent.core.command import GRACE_S

    def later() -> None:
        _wait_for_file(tmp_path / "started")
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=later, daemon=True).start()
    began = time.monotonic()
    command = "trap '' TERM HUP; exec >/dev/null 2>&1; touch started; sleep 30"
    ran = run_command(shell_argv(command), str(tmp_path), True)
    took = time.monotonic() - began
    assert ran.interrupted_by == signal.SIGTERM and ran.returncode == -signal.SIGKILL
    assert GRACE_S < took < GRACE_S + 10


def test_a_signal_from_before_the_command_existed_stops_it_even_if_its_shell_loses_it(
    tmp_path: Path,
) -> None:
    # A shell starting up may lose a SIGINT (dash's -c does, now and then). Made
    # certain here: the child sends it to earshot before exec, then ignores it.
    def on_start(pgid: int, start: int | None) -> None:
        os.kill(os.getppid(), signal.SIGINT)
        signal.signal(signal.SIGINT, signal.SIG_IGN)

    ran = run_command(shell_argv("sleep 30"), str(tmp_path), True, on_start)
    assert ran.interrupted_by == signal.SIGINT
    assert ran.returncode == -signal.SIGKILL
