"""Telling processes apart by (pid, start time), read from /proc."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from earshot.cas import procs


def test_a_running_process_is_alive_with_its_own_start_time_only() -> None:
    me = os.getpid()
    started = procs.start_time(me)
    assert started is not None
    assert procs.alive(me, started)
    assert procs.alive(me, None)
    assert not procs.alive(me, started + 1)  # a pid reused by another process


def test_a_parent_is_read_from_proc() -> None:
    assert procs.parent_of(os.getpid()) == os.getppid()


def test_a_command_name_with_spaces_and_parentheses_does_not_shift_the_fields() -> None:
    # The name sits in parentheses in /proc/PID/stat; one holding ") 1 2 (" must
    # not be read as fields.
    with subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time\n"
            "open('/proc/self/comm', 'w').write(') 7 8 (x')\n"
            "print('ready', flush=True); time.sleep(30)",
        ],
        stdout=subprocess.PIPE,
    ) as child:
        try:
            assert child.stdout is not None and child.stdout.readline() == b"ready\n"
            assert procs.name_of(child.pid) == ") 7 8 (x"
            assert procs.parent_of(child.pid) == os.getpid()
            assert procs.alive(child.pid, procs.start_time(child.pid))
        finally:
            child.kill()


def test_a_zombie_and_a_reaped_process_count_as_gone() -> None:
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    started = None
    for _ in range(100):  # until the child has exited and is a zombie
        with open(f"/proc/{pid}/stat", "rb") as handle:
            data = handle.read()
        started = procs.start_time(pid)
        if data[data.rfind(b")") + 2 :][:1] == b"Z":
            break
        time.sleep(0.01)
    assert started is not None
    assert not procs.alive(pid, started)
    os.waitpid(pid, 0)
    assert procs.start_time(pid) is None
    assert procs.name_of(pid) is None
    assert not procs.alive(pid, started)
