"""Power cuts: the explorer's seeded sample, and the model it stands on.

The full run (thousands of crash states) is ``python tests/powercut.py``;
see its docstring, and tests/crash_states.py for what a power cut may keep.
"""

from __future__ import annotations

import random
import subprocess
from pathlib import Path

import pytest
from crash_harness import picture
from crash_states import Persistence, materialize
from fs_trace import Tree, record
from powercut import POWER_OPERATIONS, explore


class _Place:
    """A live directory and the copy of it taken before a traced command."""

    def __init__(self, tmp: Path) -> None:
        self.live, self.base = tmp / "live", tmp / "base"
        self.live.mkdir()

    def to_base(self, path: str) -> str | None:
        live = str(self.live)
        return str(self.base) + path[len(live) :] if path.startswith(live) else None

    def from_base(self, path: str) -> str | None:
        base = str(self.base)
        return str(self.live) + path[len(base) :] if path.startswith(base) else None

    def run(self, script: str, tmp: Path) -> list:
        subprocess.run(["cp", "-a", str(self.live), str(self.base)], check=True)
        proc, ops = record(
            ["python3", "-c", script], [str(self.live)], self.to_base, self.from_base,
            tmp / "trace", cwd=self.live,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        return ops

    def lay(self, model: Persistence, state) -> dict:  # type: ignore[no-untyped-def]
        tree = model.build(state, Tree(self.to_base, self.from_base))
        materialize(tree, [(self.base, self.live)], self.to_base)
        return picture(self.live)


# A file written aside, fsynced, renamed in, its directory fsynced; then a
# log appended to without any fsync.
_SAFE_THEN_LOOSE = """
import os
fd = os.open("new.tmp", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
os.write(fd, b"x" * 2000)
os.fsync(fd)
os.close(fd)
os.rename("new.tmp", "new")
d = os.open(".", os.O_RDONLY | os.O_DIRECTORY)
os.fsync(d)
os.close(d)
with open("log", "ab") as f:
    f.write(b"appended\\n")
os.mkdir("sub")
os.rename("log", "sub/log")
"""


def test_the_whole_trace_replayed_gives_the_state_the_command_left(tmp_path: Path) -> None:
    place = _Place(tmp_path)
    (place.live / "log").write_bytes(b"old\n")
    ops = place.run(_SAFE_THEN_LOOSE, tmp_path)
    real = picture(place.live)
    model = Persistence(ops)
    kill = next(s for s in model.states(len(ops), random.Random(1)) if s.variant == "kill")
    assert place.lay(model, kill) == real
    assert real["sub/log"][2] == b"old\nappended\n"


def test_a_power_cut_keeps_what_was_synced_and_may_lose_the_rest(tmp_path: Path) -> None:
    place = _Place(tmp_path)
    (place.live / "log").write_bytes(b"old\n")
    ops = place.run(_SAFE_THEN_LOOSE, tmp_path)
    model = Persistence(ops)
    end = len(ops)
    states = {s.variant: s for s in model.states(end, random.Random(1))}
    lost = place.lay(model, states["unsynced lost"])
    # Synced and its directory synced: there whatever else is lost.
    assert lost["new"][2] == b"x" * 2000
    # Neither the append nor the later names were made durable.
    assert lost["log"][2] == b"old\n" and "sub" not in lost
    names_only = place.lay(model, states["names kept, unsynced bytes lost"])
    assert names_only["sub/log"][2] == b"old\n"
    torn = place.lay(model, states["a torn write"]) if "a torn write" in states else None
    assert torn is None  # the one long write was synced: nothing to tear
    # Before the directory's fsync no name is durable (names="strict"); on
    # ext4 the file's fsync commits its creation, with the bytes fsynced.
    cut = next(i for i, op in enumerate(ops) if op.kind == "dirsync")
    early = {s.variant: s for s in model.states(cut, random.Random(1))}
    strict = place.lay(model, early["unsynced lost"])
    assert "new" not in strict and "new.tmp" not in strict
    ext4 = Persistence(ops, names="ext4")
    early = {s.variant: s for s in ext4.states(cut, random.Random(1))}
    journalled = place.lay(ext4, early["unsynced lost"])
    assert "new" not in journalled and journalled["new.tmp"][2] == b"x" * 2000


def test_an_unsynced_write_can_be_torn_at_a_sector(tmp_path: Path) -> None:
    place = _Place(tmp_path)
    ops = place.run('open("big", "wb").write(bytes(range(256)) * 20)', tmp_path)
    model = Persistence(ops)
    states = {s.variant: s for s in model.states(len(ops), random.Random(2))}
    torn = place.lay(model, states["a torn write"])
    size = len(torn["big"][2])
    assert 0 < size < 5120 and size % 512 == 0


@pytest.mark.slow
def test_power_cuts_in_every_operation_lose_nothing(tmp_path: Path) -> None:
    report = explore(states=len(POWER_OPERATIONS), seed=7, files=100, work=tmp_path, per_run=1)
    assert report.violations == []
    assert set(report.by_operation) == set(POWER_OPERATIONS)
    assert report.states == len(POWER_OPERATIONS)


#: The states a missing sync shows in: at each barrier, what was not made
#: durable lost, with all, none, a third or half of the names made since.
_HARSHEST = (
    "unsynced lost",
    "names kept, unsynced bytes lost",
    "half the unsynced names lost",
    "a third of the unsynced names kept",
)


_VARIANTS = {
    # A missing sync shows where the names kept end between a temp file's
    # creation and its rename: the half and third cuts may both end after a
    # rename, so the random mixes' cuts (one at each barrier) are checked too.
    "exec": (_HARSHEST[0], *_HARSHEST[2:], "a random mix"),
    # A file's truncation kept and the bytes written after it lost: only a
    # mix of kept and lost writes shows it.
    "bash": (*_HARSHEST, "a random mix"),
}


@pytest.mark.parametrize(
    "operation",
    [
        # LMDB's own: a commit is durable when it returns (sync and metasync on).
        "snapshot",
        # The directory's fsync after a session file is renamed in.
        "fork",
        # Restored files made durable before they are renamed in, and all
        # of it before the undo's end is committed.
        "undo",
        # A batch's written files made durable before the batch records them
        # (600 of them: its renames cut part-way is the state that shows it).
        "exec",
        # An agent's command made durable before its batch is recorded: it
        # rewrites a file with the bytes it held, which the batch records no
        # change for and no undo looks at.
        "bash",
        # An agent's batch, recorded through its hooks.
        "hook",
    ],
)
def test_power_cuts_at_each_barrier_of_an_operation_lose_nothing(
    tmp_path: Path, operation: str
) -> None:
    report = explore(
        states=100,
        seed=3,
        files=20,
        work=tmp_path,
        operations=(operation,),
        per_run=100,
        variants=_VARIANTS.get(operation, _HARSHEST),
        barriers_only=True,
        runs=1,
    )
    assert report.violations == []
    assert report.states >= 4
