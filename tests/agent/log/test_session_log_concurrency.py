"""Many writers on one session: threads, real processes, a writer killed mid-append."""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from earshot.agent.log.check import check
from earshot.agent.log.entries import UserMessage
from earshot.agent.log.session import RewindInProgress, Session

APPENDER = """
import sys, threading, time
from pathlib import Path
from earshot.agent.log.entries import UserMessage
from earshot.agent.log.session import Session

path, tag, go = Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3])
threads, count = int(sys.argv[4]), int(sys.argv[5])
session = Session.open(path)
Path(str(go) + "." + tag).touch()  # ready: imported and opened
while not go.exists():
    time.sleep(0.001)

# Both processes go through ROUNDS rounds in step: a process starts round k
# once all its threads and the other process have ended round k-1 (a marker
# file each), so the two interleave whatever the scheduler does on a busy
# machine (each round holds records of both).
ROUNDS = 20
other = "B" if tag == "A" else "A"
step = max(1, count // ROUNDS)
rounds = [
    threading.Barrier(threads, action=lambda k=k: Path(f"{go}.{tag}.{k}").touch())
    for k in range(ROUNDS + 1)
]

def work(t):
    for i in range(count):
        if i and i % step == 0:
            k = i // step
            rounds[k].wait()
            while not Path(f"{go}.{other}.{k}").exists():
                time.sleep(0.001)
        session.append(UserMessage(f"{tag}-{t}-{i}"))

workers = [threading.Thread(target=work, args=(t,)) for t in range(threads)]
for w in workers:
    w.start()
for w in workers:
    w.join()
"""

KILLED_WRITER = """
import os, sys
from pathlib import Path
from earshot.agent.log.entries import AssistantMessage
from earshot.agent.log.session import Session

session = Session.open(Path(sys.argv[1]))
i = 0
while True:  # until the planned fault kills it
    size = int.from_bytes(os.urandom(3), "big") % 1_000_000
    session.append(AssistantMessage(str(i) + "x" * size))
    i += 1
"""

REWIND_HOLDER = """
import sys
from pathlib import Path
from earshot.agent.log.session import Session

session = Session.open(Path(sys.argv[1]))
with session.rewind_lock():
    print("locked", flush=True)
    sys.stdin.readline()
"""


def assert_one_chain(path: Path) -> list[dict[str, object]]:
    records = [json.loads(line) for line in path.read_bytes().splitlines()[1:]]
    previous = None
    for record in records:
        assert record["parentId"] == previous
        previous = record["id"]
    return records


@pytest.mark.slow
def test_threads_in_two_processes_append_one_chain(tmp_path: Path) -> None:
    session = Session.create(tmp_path / "sessions", tmp_path)
    go = tmp_path / "go"
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", APPENDER, str(session.path), tag, str(go), "8", "1000"]
        )
        for tag in ("A", "B")
    ]
    try:
        # Start both at once only when both are ready, however loaded the machine.
        deadline = time.monotonic() + 120
        while not all(Path(f"{go}.{tag}").exists() for tag in ("A", "B")):
            assert time.monotonic() < deadline, "appender processes did not start"
            time.sleep(0.01)
        go.touch()
        for proc in procs:
            assert proc.wait(timeout=300) == 0
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()

    records = assert_one_chain(session.path)
    assert len(records) == 16_000
    texts = [str(r["text"]) for r in records]
    assert len(set(texts)) == 16_000
    for tag in "AB":
        for t in range(8):
            mine = [int(x.rsplit("-", 1)[1]) for x in texts if x.startswith(f"{tag}-{t}-")]
            assert mine == list(range(1000))  # each thread's own order is kept
    # Both processes really interleaved.
    switches = sum(1 for a, b in itertools.pairwise(texts) if a[0] != b[0])
    assert switches > 10
    assert len(Session.open(session.path).context()) == 16_000
    assert check(session.path) == []


def test_two_handles_in_one_process_append_one_chain(tmp_path: Path) -> None:
    first = Session.create(tmp_path, tmp_path)
    second = Session.open(first.path)

    def work(session: Session, tag: str) -> None:
        for i in range(200):
            session.append(UserMessage(f"{tag}{i}"))

    workers = [
        threading.Thread(target=work, args=(handle, f"{n}-"))
        for n, handle in enumerate([first, second, first, second])
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert len(assert_one_chain(first.path)) == 800
    assert first.leaf == second.leaf


@pytest.mark.parametrize("nth", [1, 3])
def test_writer_killed_mid_append_leaves_a_loadable_file(tmp_path: Path, nth: int) -> None:
    # The fault point writes half of the nth append's line, then kills the
    # writer: a torn line every time, at a known place.
    session = Session.create(tmp_path, tmp_path)
    session.append(UserMessage("start"))
    env = {**os.environ, "EARSHOT_FAULTS": f"log-write@{nth}"}
    with subprocess.Popen(
        [sys.executable, "-c", KILLED_WRITER, str(session.path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    ) as proc:
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGKILL, err
    assert "earshot-fault: log-write" in err

    survivor = Session.open(session.path)  # loads, with its torn tail
    assert survivor.torn_tail is not None
    leaf = survivor.leaf
    entry = survivor.append(UserMessage("after the kill"))

    data = session.path.read_bytes()
    assert data.endswith(b"\n")
    last = json.loads(data[data.rindex(b"\n", 0, len(data) - 1) + 1 :])
    assert last["id"] == entry.id
    assert entry.parent_id == leaf
    again = Session.open(session.path)
    assert again.torn_tail is None
    assert again.leaf == entry.id
    assert check(session.path) == []


def test_a_second_rewind_while_one_runs_elsewhere_is_refused(tmp_path: Path) -> None:
    session = Session.create(tmp_path, tmp_path)
    session.append(UserMessage("p1"))
    session.append(UserMessage("p2"))
    before = session.path.read_bytes()
    with subprocess.Popen(
        [sys.executable, "-c", REWIND_HOLDER, str(session.path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    ) as proc:
        assert proc.stdin is not None and proc.stdout is not None
        assert proc.stdout.readline() == "locked\n"
        with pytest.raises(RewindInProgress) as caught:
            session.rewind(2)
        assert caught.value.session == session.id
        assert caught.value.lock_path == tmp_path / f"{session.id}.rewind.lock"
        assert session.path.read_bytes() == before
        proc.stdin.close()
        assert proc.wait(timeout=30) == 0
    assert session.rewind(2).text == "p2"


def test_a_second_rewind_from_another_thread_is_refused(tmp_path: Path) -> None:
    session = Session.create(tmp_path, tmp_path)
    session.append(UserMessage("p1"))
    holding = threading.Event()
    release = threading.Event()

    def hold() -> None:
        with session.rewind_lock():
            holding.set()
            release.wait(10)

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert holding.wait(10)
        with pytest.raises(RewindInProgress):
            session.rewind(1)
        with pytest.raises(RewindInProgress):
            Session.open(session.path).rewind(1)  # another handle: the file lock
    finally:
        release.set()
        holder.join()
    assert session.rewind(1).text == "p1"


def test_the_rewind_lock_can_span_a_rewind_and_the_code_undo(tmp_path: Path) -> None:
    session = Session.create(tmp_path, tmp_path)
    session.append(UserMessage("p1"))
    with session.rewind_lock():
        result = session.rewind(1)  # re-entrant for the holder
        with pytest.raises(RewindInProgress):
            Session.open(session.path).rewind(1)
    assert result.text == "p1"
