"""Issue: a kill, a full disk or a damaged record never loses a byte.

Each numbered case of the issue is a test here. Crashes happen where the
test says (a fault point named in EARSHOT_FAULTS kills the process there and
says so on stderr), and every test asserts that the crash happened.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from earshot.agent.core.records import TABLES
from earshot.cas.digest import Digest
from earshot.cas.project import Project

EARSHOT = Path(sys.executable).parent / "earshot"
Picture = Callable[[Path], dict[str, tuple[object, ...]]]


def _killed(ran: Any, site: str, sig: int = signal.SIGKILL) -> None:
    """The process died of ``sig`` at the fault point ``site``."""
    assert ran.rc == -sig, str(ran)
    assert f"earshot-fault: {site}" in ran.stderr, str(ran)


def _random_tree(root: Path, dirs: int, files: int, size: int) -> None:
    for d in range(dirs):
        (root / f"dir{d}").mkdir()
        for f in range(files):
            (root / f"dir{d}" / f"f{f}").write_bytes(os.urandom(size))


# -- 1. a kill during a snapshot never poisons a later checkpoint ---------------------


@pytest.mark.slow
@pytest.mark.parametrize("how", ["kill", "term"])
def test_1_a_kill_during_a_snapshot_never_poisons_a_later_checkpoint(
    cli: Any, root: Path, tree: Picture, how: str
) -> None:
    # Over 64 MiB of incompressible content: the snapshot flushes objects early.
    _random_tree(root, 70, 100, 10 * 1024)
    before = tree(root)
    # Killed right after the first early flush committed: objects are in, and
    # nothing naming one still in flight may be.
    faults = cli.env(EARSHOT_FAULTS=f"object-flushed={how}")
    ran = cli.run("snapshot", "-m", "killed", expect=None, env=faults)
    _killed(ran, "object-flushed", signal.SIGKILL if how == "kill" else signal.SIGTERM)
    assert cli.run("fsck").rc == 0
    sid = cli.new_session()
    rm = cli.json("bash", "rm -rf dir*", session=sid)
    assert len(rm["changes"]) == 7000
    assert cli.run("fsck").rc == 0
    cli.run("undo", session=sid)
    assert tree(root) == before


def test_1_fsck_reports_a_stat_cache_record_naming_a_missing_object_and_repair_drops_it(
    cli: Any, root: Path
) -> None:
    (root / "a.txt").write_text("a\n")
    cli.run("snapshot")
    from earshot.cas import schema
    from earshot.cas.statcache import decode_record, store_record

    with Project(root, extra_tables=TABLES) as project, project.store.backend.write() as txn:
        raw = schema.get_dir_record(txn, "")
        assert raw is not None
        record = decode_record(raw)
        assert record is not None
        name, key = next(iter(record.entries.items()))
        record.entries[name] = (*key[:6], b"\x01" * 32, key[7])
        store_record(txn, record)
    bad = cli.run("fsck", expect=1)
    assert "stat cache of /" in bad.stdout and "missing objects" in bad.stdout
    fixed = cli.run("fsck", "--repair")
    assert "dropped 1 stat-cache records" in fixed.stderr
    assert cli.run("fsck").rc == 0


# -- 2. the store's disk fills up in the middle of a batch ---------------------------


@contextlib.contextmanager
def _small_disk(path: Path, megabytes: int, real: bool = True) -> Iterator[bool]:
    """A tmpfs of that size at ``path`` (True), or a plain directory (False) where
    this machine does not let the test mount one, or ``real`` is off."""
    path.mkdir()
    mounted = real and (
        subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={megabytes}m", "tmpfs", str(path)],
            capture_output=True,
            check=False,
        ).returncode
        == 0
    )
    try:
        yield mounted
    finally:
        if mounted:
            subprocess.run(["umount", "-l", str(path)], check=False)


@pytest.mark.parametrize("disk", ["tmpfs", "injected"])
def test_2_a_full_store_disk_mid_batch_is_recorded_later_never_as_nothing(
    cli: Any, root: Path, tmp_path: Path, disk: str
) -> None:
    # A real 20 MiB tmpfs where the machine lets the test mount one; and an
    # ENOSPC injected at the commit of the state after the command (the 3rd of
    # the process: the state before, the intent, the state after).
    with _small_disk(tmp_path / "small", 20, real=disk == "tmpfs") as mounted:
        cli = type(cli)(tmp_path / "small" / "home", root)
        for name in ("keep1", "keep2", "keep3"):
            (root / name).write_text(f"{name}\n")
        sid = cli.new_session()
        cli.run("write", "first.txt", stdin="first\n", session=sid)
        command = "rm keep1 keep2; echo mod > keep3; head -c 30000000 /dev/urandom > big"
        env = cli.env(sid) if mounted else cli.env(sid, EARSHOT_FAULTS="store-commit@3=enospc")
        ran = cli.run("bash", command, expect=1, env=env)
        assert "no space left on the device holding the store at" in ran.stderr, str(ran)
        assert "batch 2 ran but is not recorded yet" in ran.stderr
        assert "Traceback" not in ran.stderr
        # Never "changed nothing": the log shows it as interrupted, undo refuses.
        log = cli.run("log", session=sid)
        assert "interrupted" in log.stderr and "batch 2" in log.stderr, str(log)
        # Still full: in the injected case every commit now fails.
        full = None if mounted else cli.env(sid, EARSHOT_FAULTS="store-commit@1+=enospc")
        refused = cli.run("undo", session=sid, expect=1, env=full)
        assert "batch 2 of this session" in refused.stderr, str(refused)
        assert (root / "first.txt").exists()  # batch 1 was not undone instead
        assert not (root / "keep1").exists()
        if mounted:
            # The way out works on a full disk.
            cli.run("gc", session=None)
        (root / "big").unlink()  # the person frees space (here: the big file goes)
        undo = cli.run("undo", "--json", session=sid)
        assert "recorded interrupted batch 2" in undo.stderr, str(undo)
        assert undo.json()["batches"] == [2]
    assert (root / "keep1").read_text() == "keep1\n"
    assert (root / "keep2").read_text() == "keep2\n"
    assert (root / "keep3").read_text() == "keep3\n"
    assert (root / "first.txt").exists()


# -- 3. a kill during undo ------------------------------------------------------------


@pytest.mark.parametrize("site", ["restore-rename@200", "restore-delete@300", "batch-commit"])
def test_3_a_killed_undo_is_reported_finished_by_the_next_command_and_redo_is_complete(
    cli: Any, root: Path, tree: Picture, site: str
) -> None:
    (root / "d").mkdir()
    for i in range(500):
        (root / "d" / f"f{i}").write_text(f"old {i}\n")
    sid = cli.new_session()
    pristine = tree(root)
    cli.run(
        "bash",
        "rm -rf d && mkdir n && for i in $(seq 751); do echo $i > n/f$i; done",
        session=sid,
    )
    changed = tree(root)
    killed = cli.run("undo", session=sid, expect=None, env=cli.env(sid, EARSHOT_FAULTS=site))
    _killed(killed, site.partition("@")[0])
    if site != "batch-commit":  # cut off halfway through the files
        assert tree(root) != pristine and tree(root) != changed
    # A reader says so and changes nothing.
    log = cli.run("log", session=sid)
    assert "interrupted: undo of batches 1" in log.stderr, str(log)
    # Running undo again finishes that undo: it does not undo one more step.
    again = cli.run("undo", session=sid)
    assert "finished an interrupted undo" in again.stderr, str(again)
    assert "nothing more was done" in again.stdout
    assert tree(root) == pristine
    assert not list(root.rglob(".earshot-tmp-*"))
    cli.run("redo", session=sid)
    assert tree(root) == changed
    assert cli.run("fsck").rc == 0


def test_3_a_finished_undo_also_removes_the_directories_the_first_attempt_emptied(
    cli: Any, root: Path, tree: Picture
) -> None:
    # Each created directory holds one file: the attempt killed after 30
    # deletions emptied 30 directories that the finishing attempt must remove.
    (root / "keep").write_text("k\n")
    sid = cli.new_session()
    pristine = tree(root)
    cli.run(
        "bash", "for i in $(seq 100); do mkdir -p n$i/sub; echo $i > n$i/sub/f; done", session=sid
    )
    killed = cli.run(
        "undo", session=sid, expect=None, env=cli.env(sid, EARSHOT_FAULTS="restore-delete@30")
    )
    _killed(killed, "restore-delete")
    again = cli.run("undo", session=sid)
    assert "finished an interrupted undo: restored 0, deleted 100" in again.stderr, str(again)
    assert tree(root) == pristine
    cli.run("redo", session=sid)
    assert len([p for p in root.rglob("f")]) == 100


# -- 4. a kill during exec -------------------------------------------------------------


def test_4_a_killed_exec_batch_is_recorded_by_the_next_command_and_undone_exactly(
    cli: Any, root: Path, tree: Picture
) -> None:
    import json

    (root / "keep.txt").write_text("keep\n")
    sid = cli.new_session()
    pristine = tree(root)
    calls = [
        {"tool": "write_file", "path": f"out/{i // 100}/f{i}", "content": f"{i}\n"}
        for i in range(2000)
    ]
    calls.insert(1000, {"tool": "bash", "command": "rm keep.txt"})
    killed = cli.run(
        "exec",
        stdin=json.dumps(calls),
        session=sid,
        expect=None,
        env=cli.env(sid, EARSHOT_FAULTS="batch-write@1500"),
    )
    _killed(killed, "batch-write")
    assert not (root / "keep.txt").exists()
    assert len(list((root / "out").rglob("f*"))) == 1500
    log = cli.run("log", session=sid)
    assert "interrupted: batch 1 of session" in log.stderr, str(log)
    cli.run("snapshot")  # any command that changes the store records the batch
    doc = cli.json("log", session=sid)
    (batch,) = doc["batches"]
    assert batch["interrupted"] is True
    assert len(batch["changes"]) == 1501
    assert all(isinstance(c["by"], int) for c in batch["changes"])  # proven by its notes
    cli.run("undo", session=sid)
    assert tree(root) == pristine


def _wait_for(path: Path, timeout: float = 20.0) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError, ValueError):
            text = path.read_text()
            if text.endswith("\n"):
                return text.strip()
        time.sleep(0.01)
    raise AssertionError(f"{path} never appeared")


def _wait_for_sleep(cwd: Path, timeout: float = 20.0) -> None:
    """Until a ``sleep`` runs in ``cwd``: a signal to its group then reaches it.

    Sent earlier, between two of the shell's commands, a SIGINT is caught by
    dash -c and acted on only when the next command ends (sleep 30 ran out).
    """
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for proc in Path("/proc").iterdir():
            with contextlib.suppress(OSError):
                if (proc / "comm").read_text() == "sleep\n" and (proc / "cwd").resolve() == cwd:
                    return
        time.sleep(0.01)
    raise AssertionError(f"no sleep ever ran in {cwd}")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with contextlib.suppress(OSError):
        if Path(f"/proc/{pid}/stat").read_text().split(") ")[1].startswith("Z"):
            return False
    return True


def test_4_a_command_whose_earshot_was_killed_is_stopped_and_its_batch_recorded(
    cli: Any, root: Path, tmp_path: Path
) -> None:
    sid = cli.new_session()
    pids = tmp_path / "pids"
    script = (
        f"echo $$ > {pids}.shell; echo made > made.txt; "
        f"(trap '' HUP; sleep 30; echo late > late.txt) & echo $! > {pids}.child; wait"
    )
    proc = subprocess.Popen(
        [str(EARSHOT), "bash", script],
        cwd=root,
        env=cli.env(sid),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    shell = int(_wait_for(Path(f"{pids}.shell")))
    child = int(_wait_for(Path(f"{pids}.child")))
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    assert proc.returncode == -signal.SIGKILL
    deadline = time.monotonic() + 5
    while _alive(shell) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not _alive(shell)  # the shell died with earshot
    assert _alive(child)  # what it started lives on until the next command
    finished = cli.run("write", "next.txt", stdin="n\n", session=sid)
    assert "recorded interrupted batch 1" in finished.stderr, str(finished)
    assert not _alive(child)
    time.sleep(0.1)
    assert not (root / "late.txt").exists()
    doc = cli.json("log", session=sid)
    first = doc["batches"][0]
    assert first["interrupted"] and [c["path"] for c in first["changes"]] == ["made.txt"]


def _default_signals() -> None:
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_DFL)


def test_4_a_command_that_ignores_sigterm_is_killed_after_a_grace_period(
    cli: Any, root: Path, tmp_path: Path
) -> None:
    sid = cli.new_session()
    ready = tmp_path / "ready"
    script = f"trap '' TERM; echo made > made.txt; echo x > {ready}; sleep 60"
    with subprocess.Popen(
        [str(EARSHOT), "bash", script],
        cwd=root,
        env=cli.env(sid),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        preexec_fn=_default_signals,
    ) as proc:
        _wait_for(ready)
        start = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    assert proc.returncode == 128 + signal.SIGTERM, err
    assert 4 < time.monotonic() - start < 20  # the grace period, then the kill
    (batch,) = cli.json("log", session=sid)["batches"]
    assert [c["path"] for c in batch["changes"]] == ["made.txt"]


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP])
def test_4_a_signal_to_earshot_is_passed_to_the_command_and_the_batch_recorded(
    cli: Any, root: Path, tmp_path: Path, sig: int
) -> None:
    sid = cli.new_session()
    ready = tmp_path / "ready"
    proc = subprocess.Popen(
        [str(EARSHOT), "bash", f"echo made > made.txt; echo x > {ready}; sleep 30"],
        cwd=root,
        env=cli.env(sid),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        # As from a terminal: the signals at their defaults, whatever runs the
        # tests (nohup ignores SIGHUP; a background job ignores SIGINT).
        preexec_fn=_default_signals,
    )
    _wait_for(ready)
    _wait_for_sleep(root.resolve())
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=20)
    assert proc.returncode == 128 + sig, err
    assert b"batch 1 is recorded" in err
    (batch,) = cli.json("log", session=sid)["batches"]
    assert [c["path"] for c in batch["changes"]] == ["made.txt"]
    assert not batch["interrupted"]


@pytest.mark.parametrize(("action", "sig"), [("int", signal.SIGINT), ("term", signal.SIGTERM)])
def test_4_a_signal_the_instant_the_command_starts_is_passed_on_not_lost(
    cli: Any, root: Path, action: str, sig: int
) -> None:
    # The signal arrives right after the fork, before earshot knows the group:
    # it must still reach the command, and earshot must still record the batch
    # (not die of it, or abort with the command running on).
    sid = cli.new_session()
    env = cli.env(sid, EARSHOT_FAULTS=f"command-spawned={action}")
    ran = cli.run("bash", "sleep 30", env=env, expect=None, timeout=20)
    assert "earshot-fault: command-spawned" in ran.stderr
    assert ran.rc == 128 + sig, str(ran)
    assert "Aborted" not in ran.stderr and "batch 1 is recorded" in ran.stderr, str(ran)
    (batch,) = cli.json("log", session=sid)["batches"]
    assert batch["calls"][0]["command"] == "sleep 30" and not batch["interrupted"]


# -- 5. damaged agent records ------------------------------------------------------------


def _flip_everywhere(data_mdb: Path, old: bytes, new: bytes) -> int:
    raw = data_mdb.read_bytes()
    count = raw.count(old)
    data_mdb.write_bytes(raw.replace(old, new))
    return count


def test_5_a_ledger_path_flipped_on_disk_is_refused_not_written_elsewhere(
    cli: Any, root: Path
) -> None:
    (root / "src").mkdir()
    (root / "src/f1.txt").write_text("f1 old\n")
    (root / "src/f2.txt").write_text("f2 mine\n")
    sid = cli.new_session()
    cli.run("write", "src/f1.txt", stdin="f1 new\n", session=sid)
    data = cli.store_dir() / "data.mdb"
    assert _flip_everywhere(data, b'"path":"src/f1.txt"', b'"path":"src/f2.txt"') >= 1
    for args in (("undo",), ("log",)):
        ran = cli.run(*args, session=sid, expect=1)
        assert "batch 1 of session" in ran.stderr and "is damaged" in ran.stderr, str(ran)
        assert "Traceback" not in ran.stderr and len(ran.stderr.strip().splitlines()) == 1
    fsck = cli.run("fsck", expect=1)
    assert "batch 1 of session" in fsck.stdout and "damaged" in fsck.stdout
    assert (root / "src/f2.txt").read_text() == "f2 mine\n"
    assert (root / "src/f1.txt").read_text() == "f1 new\n"


@pytest.mark.parametrize("seed", range(5))
def test_5_random_flips_in_a_record_give_one_line_never_a_traceback(
    cli: Any, root: Path, seed: int
) -> None:
    import random

    (root / "a.txt").write_text("a\n")
    sid = cli.new_session()
    cli.run("bash", "echo changed > a.txt; echo new > b.txt", session=sid)
    data = cli.store_dir() / "data.mdb"
    raw = bytearray(data.read_bytes())
    marker = b'"ledger":['
    spots = [i for i in range(len(raw)) if raw.startswith(marker, i)]
    assert spots
    rng = random.Random(seed)
    for spot in spots:
        for _ in range(4):
            at = spot + rng.randrange(-40, 200)
            raw[at] ^= 1 << rng.randrange(8)
    data.write_bytes(bytes(raw))
    for args in (("log",), ("undo",), ("fsck",)):
        ran = cli.run(*args, session=sid, expect=None)
        assert ran.rc == 1, str(ran)
        assert "Traceback" not in ran.stderr, str(ran)
    assert (root / "a.txt").read_text() == "changed\n"


def test_5_a_damaged_session_record_is_one_line_for_log_and_undo_and_listed_by_fsck(
    cli: Any, root: Path, check_error: Any
) -> None:
    (root / "a.txt").write_text("a\n")
    sid = cli.new_session()
    cli.run("bash", "echo changed > a.txt", session=sid)
    data = cli.store_dir() / "data.mdb"
    # The session's record holds its next batch number: 2 becomes 9, still valid JSON.
    assert _flip_everywhere(data, b'"next_seq":2', b'"next_seq":9') >= 1
    for args in (("log",), ("undo",)):
        line = check_error(cli.run(*args, session=sid, expect=1))
        assert f"session {sid} is damaged" in line
    fsck = cli.run("fsck", expect=1)
    assert f"session {sid} is damaged" in fsck.stdout, str(fsck)
    assert "Traceback" not in fsck.stderr
    assert (root / "a.txt").read_text() == "changed\n"


# -- 6. a torn session tail never drops a batch from a rewind ------------------------


def test_6_a_torn_batch_link_still_leaves_the_batch_in_rewind(cli: Any, root: Path) -> None:
    sid = cli.new_session()
    cli.run("prompt", "make things", session=sid)
    cli.run("write", "one.txt", stdin="1\n", session=sid)
    cli.run("write", "two.txt", stdin="2\n", session=sid)
    log = next((cli.home / "sessions").rglob(f"{sid}.jsonl"))
    data = log.read_bytes()
    last = data.rindex(b"\n", 0, len(data) - 1)
    assert b'"batchLink"' in data[last:] or b"batch" in data[last:]
    log.write_bytes(data[: last + 1 + (len(data) - last) // 2])  # batch 2's link, torn
    dry = cli.json("rewind", "1", "--code", "--dry-run", session=sid)
    assert dry["batches"] == [1, 2], dry
    cli.run("rewind", "1", "--code", session=sid)
    assert not (root / "one.txt").exists() and not (root / "two.txt").exists()


def test_4_an_interrupted_batch_never_has_undo_delete_what_no_note_proves_a_call_made(
    cli: Any, root: Path
) -> None:
    # Killed after the command ran, before its changes were recorded: the
    # next command records them, but only notes can tie a creation to a
    # call, and the person may have made files since the kill.
    (root / "old.txt").write_text("old\n")
    sid = cli.new_session()
    cli.run("write", "first.txt", stdin="first\n", session=sid)
    killed = cli.run(
        "bash",
        "echo x > made.txt; rm old.txt",
        session=sid,
        expect=None,
        env=cli.env(sid, EARSHOT_FAULTS="batch-command"),
    )
    _killed(killed, "batch-command")
    (root / "mine.txt").write_text("the person's\n")  # after the kill
    undo = cli.run("undo", "--json", session=sid, expect=3)
    assert "recorded interrupted batch 2" in undo.stderr
    doc = undo.json()
    assert doc["restored"] == ["old.txt"]
    assert sorted(k["path"] for k in doc["kept"]) == ["made.txt", "mine.txt"]
    assert (root / "mine.txt").exists() and (root / "made.txt").exists()
    assert (root / "old.txt").read_text() == "old\n"
    # What undo keeps as unproven stays kept: the batch counts as undone, and
    # the next undo goes one step further back.
    again = cli.run("undo", "--json", session=sid).json()
    assert again["batches"] == [1] and not (root / "first.txt").exists()


def test_5_a_damaged_intent_is_reported_listed_by_fsck_and_set_aside_by_repair(
    cli: Any, root: Path
) -> None:
    from earshot.cas import schema

    (root / "a.txt").write_text("a\n")
    sid = cli.new_session()
    ran = cli.run(
        "bash",
        "echo b > b.txt",
        session=sid,
        expect=None,
        env=cli.env(sid, EARSHOT_FAULTS="batch-command"),
    )
    _killed(ran, "batch-command")
    with Project(root, extra_tables=TABLES) as project, project.store.backend.write() as txn:
        ((ident, key, value),) = list(schema.intent_records(txn))
        txn.put(schema.INTENTS, key, bytes(value[:-3]) + b"xyz")  # still JSON-shaped, not sealed
    log = cli.run("log", session=sid)
    assert f"intent {ident} is damaged" in log.stderr and "fsck --repair" in log.stderr
    fsck = cli.run("fsck", expect=1)
    assert f"intent {ident} is damaged" in fsck.stdout, str(fsck)
    refused = cli.run("undo", session=sid, expect=1)
    assert "undo and redo wait" in refused.stderr
    assert cli.run("bash", "echo c > c.txt", session=sid).rc == 0  # other work goes on
    repaired = cli.run("fsck", "--repair")
    assert "set 1 damaged intents aside" in repaired.stderr
    assert list((cli.store_dir() / "intents").glob(f"damaged-{ident}"))
    assert cli.run("fsck").rc == 0
    cli.run("undo", session=sid)  # the batch after it; b.txt stays: no record made it
    assert not (root / "c.txt").exists() and (root / "b.txt").read_text() == "b\n"


def _tree_digests(project: Project, snapshot: str) -> set[bytes]:
    with project.store.reader() as reader:
        stack = [reader.read_snapshot(Digest(bytes.fromhex(snapshot))).tree]
        out: set[bytes] = set()
        while stack:
            digest = stack.pop()
            out.add(digest)
            stack += [
                e.digest for e in reader.read_tree(digest) if e.digest and e.kind.name == "DIR"
            ]
    return out


def _damage(project: Project, digest: Digest) -> None:
    """Flip one bit of the stored object ``digest`` on disk."""
    from earshot.cas import schema

    with project.store.backend.write() as txn:
        loc = schema.get_location(txn, digest)
        assert loc is not None
        data = bytearray(txn.get(schema.PACKS, schema.pack_key(loc.pack)) or b"")
        data[loc.offset + min(3, loc.stored - 1)] ^= 1
        schema.put_pack(txn, loc.pack, bytes(data))


def _damaged_tree_undo(
    cli: Any, root: Path, tree: Picture, nth: int | None
) -> tuple[int, bool, int]:
    """A batch, then the ``nth`` tree only its state before has damaged on disk, then undo.

    Returns the undo's exit code, whether the tree is back as it was, and how
    many trees there were to damage."""

    for d in ("a", "a/b", "c"):
        (root / d).mkdir(exist_ok=True)
        for i in range(3):
            (root / d / f"f{i}").write_text(f"{d}{i}\n")
    sid = cli.new_session()
    pristine = tree(root)
    cli.run("bash", "echo new > a/b/f1; rm c/f0; echo x > a/g", session=sid)
    changed = tree(root)
    (batch,) = cli.json("log", session=sid)["batches"]
    with Project(root, home=cli.home, extra_tables=TABLES) as project:
        only_before = sorted(
            _tree_digests(project, batch["before"]) - _tree_digests(project, batch["after"])
        )
        if nth is not None:
            _damage(project, Digest(only_before[nth]))
    undo = cli.run("undo", session=sid, expect=None)
    now = tree(root)
    assert now in (pristine, changed), "an undo left the tree half done"
    if undo.rc != 0:
        assert now == changed and "is corrupt" in undo.stderr, str(undo)
    return undo.rc, now == pristine, len(only_before)


def test_5_a_damaged_tree_never_leaves_an_undo_half_done_and_a_rebuilt_one_is_made_whole(
    cli: Any, root: Path, tree: Picture, tmp_path: Path
) -> None:
    # Undo rebuilds the trees of the state before the batch. Where it must
    # read a damaged one first, it stops before touching anything; where it
    # only rebuilds one, it stores a sound copy rather than name the damaged.
    *_, count = _damaged_tree_undo(cli, root, tree, None)
    outcomes = []
    for nth in range(count):
        home, where = tmp_path / f"home{nth}", tmp_path / f"root{nth}"
        where.mkdir()
        outcomes.append(_damaged_tree_undo(type(cli)(home, where), where, tree, nth)[:2])
        if outcomes[-1][0] == 0:
            assert type(cli)(home, where).run("fsck").rc == 0  # the sound copy is indexed
    assert (0, True) in outcomes  # rebuilt whole, at least once


def test_4_a_write_the_person_changed_after_the_kill_is_not_taken_as_the_calls(
    cli: Any, root: Path
) -> None:
    # A write's note proves the call made a file only while the file still
    # holds the content noted: the person's edit after the kill is theirs,
    # and undo keeps it (and the file) rather than delete it as the call's.
    import json

    sid = cli.new_session()
    calls = [{"tool": "write_file", "path": f"out/f{i}", "content": f"{i}\n"} for i in range(20)]
    killed = cli.run(
        "exec",
        stdin=json.dumps(calls),
        session=sid,
        expect=None,
        env=cli.env(sid, EARSHOT_FAULTS="batch-write@10"),
    )
    _killed(killed, "batch-write")
    written = sorted(p.name for p in (root / "out").iterdir())
    assert "f3" in written
    (root / "out" / "f3").write_text("the person's edit\n")  # after the kill
    undo = cli.run("undo", "--json", session=sid, expect=3)
    assert "recorded interrupted batch 1" in undo.stderr, str(undo)
    assert sorted(k["path"] for k in undo.json()["kept"]) == ["out", "out/f3"]  # out: not empty
    assert (root / "out" / "f3").read_text() == "the person's edit\n"
    assert sorted(p.name for p in (root / "out").iterdir()) == ["f3"]  # the rest: the call's


def test_5_a_damaged_blob_stops_an_undo_before_it_touches_the_tree(
    cli: Any, root: Path, tree: Picture
) -> None:
    # The undo reads every object it will write before its first change: one
    # damaged blob among many leaves the tree exactly as the batch left it.
    for d in ("a", "m", "z"):
        (root / d).mkdir()
        for i in range(4):
            (root / d / f"f{i}").write_text(f"{d}{i}: the content before\n")
    sid = cli.new_session()
    cli.run("bash", "for f in a/f1 a/f2 m/f1 z/f1 z/f2; do echo new > $f; done", session=sid)
    changed = tree(root)
    (batch,) = cli.json("log", session=sid)["batches"]
    (middle,) = [c for c in batch["changes"] if c["path"] == "m/f1"]
    with Project(root, home=cli.home, extra_tables=TABLES) as project:
        _damage(project, Digest(bytes.fromhex(middle["before"])))
    undo = cli.run("undo", session=sid, expect=None)
    assert undo.rc != 0 and "is corrupt" in undo.stderr, str(undo)
    assert tree(root) == changed, "the undo left the tree half done"
    # Stopped before its intent: nothing is left for the next command to finish.
    with Project(root, home=cli.home, extra_tables=TABLES) as project:
        assert list(project.intents.pending()) == [], "the undo began before it read its objects"
