"""Progress of long work on a real pseudo-terminal (pexpect), and nowhere else.

``$EARSHOT_PROGRESS_AFTER=0`` shows it from the start, so a short command
in a test draws it as a long one does after a second; every stage is drawn
at least once (``progress_view.View.stage``), so what a test looks for is
in the terminal's bytes whatever the machine's speed.
"""

from __future__ import annotations

import os
import re
import signal
from pathlib import Path
from typing import TYPE_CHECKING

import pexpect
import pytest
from earshot_cli import EARSHOT

if TYPE_CHECKING:
    from earshot_cli import Cli

# Once in-process, once through the root's daemon: its worker draws on the client's terminal.
pytestmark = pytest.mark.both_modes

_ESCAPES = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
#: What a drawn progress line holds: a stage, then "N of M paths" or "N paths".
_LINE = re.compile(r"(scanning|recording|checking|undoing|redoing|restoring|marking)\b")


def _on_terminal(cli: Cli, *args: str, after: str = "0", shell: str | None = None) -> str:
    """Run ``earshot ARGS`` (or ``sh -c SHELL``) on a pseudo-terminal; all it drew, plain."""
    env = cli.env(TERM="xterm", COLUMNS="200", LINES="50", EARSHOT_PROGRESS_AFTER=after)
    command, argv = (str(EARSHOT), list(args)) if shell is None else ("sh", ["-c", shell])
    child = pexpect.spawn(
        command,
        argv,
        cwd=str(cli.root),
        env=env,
        dimensions=(50, 200),
        encoding="utf-8",
        codec_errors="replace",
        timeout=120,
    )
    child.expect(pexpect.EOF)
    child.close()
    return _ESCAPES.sub("", child.before)


def _made_60(cli: Cli) -> None:
    """A batch of this session that made 60 files, 40 in a/ and 20 in b/."""
    cli.write("keep.txt", "kept\n")
    cli.snap()
    cli.run(
        "bash",
        "mkdir a b && for i in $(seq 40); do echo $i > a/$i; done "
        "&& for i in $(seq 20); do echo $i > b/$i; done",
    )


def test_snapshot_shows_its_scan_on_a_terminal(cli: Cli) -> None:
    for i in range(30):
        cli.write(f"d{i % 3}/f{i}", f"{i}\n")
    drawn = _on_terminal(cli, "snapshot")
    assert re.search(r"scanning\b.*\d+ paths", drawn), drawn
    assert "snapshot " in drawn  # the result still follows


def test_undo_and_redo_show_each_stage_with_counts_on_a_terminal(cli: Cli) -> None:
    _made_60(cli)
    drawn = _on_terminal(cli, "undo")
    for stage in ("recording", "checking", "undoing"):
        assert re.search(rf"{stage}\b.* of \d+ paths", drawn), (stage, drawn)
    assert not (cli.root / "a").exists()
    drawn = _on_terminal(cli, "redo")
    assert re.search(r"redoing\b.* of \d+ paths", drawn), drawn
    assert len(list((cli.root / "a").iterdir())) == 40


def test_restore_shows_its_writes_on_a_terminal(cli: Cli) -> None:
    for i in range(20):
        cli.write(f"f{i}", f"{i}\n")
    snap = cli.snap()
    for i in range(20):
        cli.write(f"f{i}", f"{i} changed\n")
    drawn = _on_terminal(cli, "restore", snap)
    assert re.search(r"restoring\b.* of \d+ paths .* of ", drawn), drawn
    assert (cli.root / "f3").read_text() == "3\n"


def test_gc_and_fsck_show_progress_on_a_terminal(cli: Cli) -> None:
    for i in range(20):
        cli.write(f"f{i}", f"{i}\n")
    cli.snap()
    assert re.search(r"marking\b.*\d+ trees", _on_terminal(cli, "gc"))
    drawn = _on_terminal(cli, "fsck")
    assert re.search(r"checking\b.* of \d+ objects", drawn), drawn


def test_no_progress_when_stderr_is_not_a_terminal(cli: Cli, tmp_path: Path) -> None:
    _made_60(cli)
    ran = cli.run("undo", "--dry-run", env=cli.env(EARSHOT_PROGRESS_AFTER="0", TERM="xterm"))
    assert _LINE.search(ran.stderr) is None, ran
    # On a terminal, with stderr alone sent to a file: the result on the
    # terminal, and no progress either place.
    err = tmp_path / "err"
    drawn = _on_terminal(cli, shell=f"{EARSHOT} undo 2>{err}")
    assert "undo of batch" in drawn
    assert _LINE.search(drawn) is None, drawn
    assert _LINE.search(err.read_text()) is None


def test_no_progress_with_json_on_a_terminal(cli: Cli) -> None:
    _made_60(cli)
    drawn = _on_terminal(cli, "undo", "--json")
    assert '"count": 1' in drawn
    assert _LINE.search(drawn) is None, drawn


def test_no_progress_for_work_shorter_than_the_wait(cli: Cli) -> None:
    _made_60(cli)
    drawn = _on_terminal(cli, "undo", after="600")
    assert "undo of batch" in drawn
    assert _LINE.search(drawn) is None, drawn


def _is_stopped(pid: int) -> bool:
    """Whether ``pid`` is stopped (state T): the fault prints its line just
    before it stops itself, and a signal sent before the stop would be taken
    by its handler there and then, never left pending."""
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0] == "T"


def _pending(pid: int, signum: int) -> bool:
    """Whether ``signum`` waits for the (stopped) process ``pid``."""
    with open(f"/proc/{pid}/status") as f:
        masks = dict(line.split(":\t", 1) for line in f if line.startswith(("ShdPnd", "SigPnd")))
    return any(int(mask, 16) & 1 << (signum - 1) for mask in masks.values())


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
def test_a_kill_while_the_line_shows_restores_the_cursor_and_still_kills(
    cli: Cli, signum: int
) -> None:
    _made_60(cli)
    # Stopped at its third delete, the line drawn; under the daemon, in its worker.
    env = cli.env(
        TERM="xterm",
        EARSHOT_PROGRESS_AFTER="0",
        EARSHOT_FAULTS="restore-delete@3=stop",
        EARSHOT_FAULTS_HOSTED="1",
    )
    child = pexpect.spawn(
        str(EARSHOT),
        ["undo"],
        cwd=str(cli.root),
        env=env,
        dimensions=(50, 200),
        timeout=120,
        # As from a terminal: a suite run under nohup would hand its SIGHUP
        # ignored down to the command, which then never sees the signal.
        preexec_fn=lambda: signal.signal(signum, signal.SIG_DFL),
    )
    child.expect(rb"earshot-fault: restore-delete \(stopped: pid (\d+)\)")
    stopped = int(child.match.group(1))
    drawn = child.before
    assert b"\x1b[?25l" in drawn and b"undoing" in drawn, drawn
    while not _is_stopped(stopped):
        os.sched_yield()
    # The signal goes to the command as a terminal or a kill sends it; a
    # client passes it on to its worker (entry.py): it waits there until
    # the worker goes on.
    os.kill(child.pid, signum)
    while not _pending(stopped, signum):
        os.sched_yield()
    os.kill(stopped, signal.SIGCONT)
    child.expect(pexpect.EOF)
    child.close()
    after = child.before
    assert after.rfind(b"\x1b[?25h") > after.rfind(b"\x1b[?25l"), after
    assert b"\x1b[?25h" in after, after
    if stopped == child.pid:  # in-process: it died of the signal, as without a line
        assert child.signalstatus == signum, (child.exitstatus, after)
    else:  # the worker died of it, without a word back: its client says so
        assert child.exitstatus == 1 and b"worker stopped before the call ended" in after
    assert b"Traceback" not in drawn + after


def test_finishing_an_interrupted_undo_shows_progress_and_counts_with_separators(
    cli: Cli,
) -> None:
    cli.write("keep.txt", "kept\n")
    cli.snap()
    cli.run("bash", "mkdir many && for i in $(seq 1200); do echo $i > many/$i; done")
    killed = cli.run("undo", expect=None, env=cli.env(EARSHOT_FAULTS="restore-delete@100=kill"))
    assert "earshot-fault: restore-delete" in killed.stderr, killed
    drawn = _on_terminal(cli, "undo")  # the next command finishes it first
    assert re.search(r"undoing\b.* of 1,\d{3} paths", drawn), drawn
    assert re.search(r"finished an interrupted undo: restored 0, deleted 1,2\d\d,", drawn), drawn
    assert not (cli.root / "many").exists()
