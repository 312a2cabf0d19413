"""`earshot snapshot` and `restore` while the root's daemon watches: scoped, and exact.

The state they record is the watch mark's tree plus what the daemon saw
since; each test checks it against what a full walk records (a daemon-less
snapshot of the same tree is then "reused": the same tree).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from earshot_cli import EARSHOT, Cli

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="inotify")


def _walked(cli: Cli) -> dict[str, object]:
    """A snapshot by a full walk, with no daemon asked."""
    cli.run("watch", "--stop", expect=None)
    doc: dict[str, object] = cli.json("snapshot")
    assert doc["vouched"] is False
    return doc


def _tree(top: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(top)): p.read_bytes()
        for p in sorted(top.rglob("*"))
        if p.is_file() and not p.is_symlink()
    }


def test_a_snapshot_reads_only_what_the_daemon_saw_and_records_what_a_walk_would(
    cli: Cli,
) -> None:
    for i in range(30):
        cli.write(f"d{i % 3}/f{i}.txt", f"{i}\n")
    cli.run("watch")
    first = cli.json("snapshot")
    assert first["vouched"] is False  # no mark yet: a walk, which leaves one
    cli.write("d0/f0.txt", "edited\n")
    (cli.root / "d1" / "f1.txt").unlink()
    cli.write("new/deep/g.txt", "new\n")
    doc = cli.json("snapshot")
    assert doc["vouched"] is True and doc["files_read"] == 2, doc
    assert doc["files"] == 30
    again = cli.json("snapshot")
    assert again["vouched"] is True and again["reused"] is True
    walked = _walked(cli)
    assert walked["reused"] is True and walked["id"] == doc["id"]  # the very same tree


def test_a_restore_records_the_state_before_from_the_daemon_and_vouches_after_it(
    cli: Cli,
) -> None:
    for i in range(20):
        cli.write(f"src/f{i}.txt", f"{i}\n")
    cli.run("watch")
    target = cli.json("snapshot")["id"]
    wanted = _tree(cli.root)
    cli.write("src/f3.txt", "changed\n")
    (cli.root / "src" / "f4.txt").unlink()
    cli.write("extra.txt", "extra\n")
    restored = cli.json("restore", target, "--force")
    assert sorted(restored["written"]) == ["src/f3.txt", "src/f4.txt"]
    assert restored["deleted"] == ["extra.txt"]
    assert _tree(cli.root) == wanted
    before = restored["before"]
    cli.run("restore", before, "--force")  # the state before holds the edits
    assert (cli.root / "src" / "f3.txt").read_text() == "changed\n"
    assert not (cli.root / "src" / "f4.txt").exists()
    assert (cli.root / "extra.txt").read_text() == "extra\n"
    cli.write("after.txt", "a change made after the restore\n")
    doc = cli.json("snapshot")  # the restore left a mark: vouched, and complete
    assert doc["vouched"] is True and doc["files_read"] == 1, doc
    walked = _walked(cli)
    assert walked["reused"] is True and walked["id"] == doc["id"]


def test_after_the_daemon_restarts_a_snapshot_walks_and_misses_nothing(cli: Cli) -> None:
    cli.write("a.txt", "a\n")
    cli.run("watch")
    cli.run("snapshot")
    cli.run("watch", "--stop")
    cli.write("a.txt", "edited while nothing watched\n")  # no daemon saw this
    cli.run("watch")
    doc = cli.json("snapshot")
    assert doc["vouched"] is False and doc["reused"] is False, doc
    cli.run("watch", "--stop")
    assert cli.json("snapshot")["reused"] is True


def test_a_file_system_mounted_under_the_root_after_the_daemon_started_is_recorded(
    cli: Cli, tmp_path: Path
) -> None:
    # inotify on a directory does not see into what is mounted over it later:
    # the daemon must stop vouching when the mount table changes under the root.
    (cli.root / "t").mkdir()
    cli.write("a.txt", "a\n")
    env = cli.env()
    script = (
        f"{EARSHOT} watch && {EARSHOT} snapshot >/dev/null && "
        "mount -t tmpfs tmpfs t && echo hidden > t/f && echo mounted && "
        f"{EARSHOT} snapshot --json && "
        # Unmounted: t is the directory below again, and what is made there counts.
        "umount t && sleep 0.2 && echo under > t/g && echo unmounted && "
        f"{EARSHOT} snapshot --json && echo under2 > t/h && echo again && "
        f"{EARSHOT} snapshot --json; {EARSHOT} watch --stop >/dev/null"
    )
    ran = subprocess.run(
        ["unshare", "-m", "sh", "-c", script],
        cwd=cli.root,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert "again\n" in ran.stdout, ran.stdout + ran.stderr
    _, mounted, unmounted, again = re.split(
        r"^(?:mounted|unmounted|again)$", ran.stdout, flags=re.M
    )
    assert json.loads(mounted)["files"] == 2  # a.txt and t/f
    assert json.loads(unmounted)["files"] == 2  # a.txt and t/g: t/f went with the tmpfs
    doc = json.loads(again)
    assert doc["files"] == 3 and doc["vouched"] is True, doc  # watched again below t
    assert sorted(p.name for p in (cli.root / "t").iterdir()) == ["g", "h"]


def _past_the_racy_margin(path: Path) -> None:
    """Wait until ``path`` last changed (its ctime) longer ago than the stat cache's
    2-second racy margin: from then on a walk takes it from the cache's fast path."""
    while time.time_ns() - os.lstat(path).st_ctime_ns < 2_500_000_000:
        time.sleep(0.1)


@pytest.mark.parametrize("age", ["new", "past-the-racy-margin"])
def test_a_write_through_a_hard_link_from_outside_the_root_is_recorded(
    cli: Cli, tmp_path: Path, age: str
) -> None:
    # inotify reports the write on the directory it went through, outside the
    # root: the files with other links are re-read whenever the daemon is asked.
    cli.write("src/f.txt", "one\n")
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    os.link(cli.root / "src" / "f.txt", outside / "link.txt")
    if age != "new":
        # An old file comes from the stat cache's fast path on a second walk,
        # which must still count its links.
        _past_the_racy_margin(cli.root / "src" / "f.txt")
        _walked(cli)  # the first walk: the file is read, and cached as not racy
        _walked(cli)  # the second: from the cache's fast path
    cli.run("watch")
    sid = cli.new_session()
    cli.run("bash", "true", session=sid)  # a walk: it counts the linked files
    cli.run("bash", f"echo agent >> {outside / 'link.txt'}", session=sid)
    last = cli.json("log", session=sid)["batches"][-1]
    assert [c["path"] for c in last["changes"]] == ["src/f.txt"], last
    cli.run("undo", session=sid)
    assert (cli.root / "src" / "f.txt").read_text() == "one\n"
    with open(outside / "link.txt", "a") as f:
        f.write("by hand\n")
    doc = cli.json("snapshot")
    assert doc["vouched"] is True and doc["files_read"] >= 1, doc
    walked = _walked(cli)
    assert walked["reused"] is True and walked["id"] == doc["id"]


def _stopped(pid: int) -> bool:
    with open(f"/proc/{pid}/stat", "rb") as f:
        return f.read().rsplit(b")", 1)[1].split()[0] == b"T"


def test_a_file_changed_during_the_walk_that_leaves_a_mark_is_read_again_after_it(
    cli: Cli,
) -> None:
    # The daemon's token is taken before a full walk: a file changed after the
    # walk read it (here: the walk done, its snapshot not yet committed) is
    # reported after that token, so the next answer reads it again.
    cli.write("d/f.txt", "before\n")
    for i in range(20):
        cli.write(f"d/g{i}.txt", f"{i}\n")
    cli.run("watch")
    sid = cli.new_session()
    # A command with a fault plan runs in its own process, the daemon its tracker.
    proc = subprocess.Popen(
        [str(EARSHOT), "bash", "true"],
        cwd=cli.root,
        env=cli.env(sid, EARSHOT_FAULTS="full-walk-done=stop"),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stderr is not None
    said, pid = [], None
    for line in proc.stderr:
        said.append(line.decode())
        if b"earshot-fault: full-walk-done (stopped: pid " in line:
            pid = int(line.rsplit(b" ", 1)[1].rstrip(b")\n"))
            break
    assert pid is not None, "".join(said)
    while not _stopped(pid):  # the SIGSTOP follows the line at once
        os.sched_yield()
    cli.write("d/f.txt", "written while the walk ended\n")
    os.kill(pid, signal.SIGCONT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, out.decode() + "".join(said) + err.decode()
    doc = cli.json("snapshot")
    assert doc["vouched"] is True, doc
    walked = _walked(cli)
    assert walked["reused"] is True and walked["id"] == doc["id"]  # the edit in both


def test_a_write_through_a_shared_mmap_is_seen_by_the_daemon(cli: Cli) -> None:
    # A write through a mapping gives no IN_MODIFY; closing the descriptor it
    # was mapped from (opened for writing) gives IN_CLOSE_WRITE.
    cli.write("data.bin", b"old content\n")
    cli.run("watch")
    sid = cli.new_session()
    cli.run("bash", "true", session=sid)
    script = (
        "import mmap\n"
        "with open('data.bin', 'r+b') as f:\n"
        "    m = mmap.mmap(f.fileno(), 0)\n"
        "    m[0:3] = b'NEW'\n"
        "    m.flush()\n"
        "    m.close()\n"
    )
    subprocess.run([sys.executable, "-c", script], cwd=cli.root, check=True)
    cli.run("bash", "rm data.bin", session=sid)  # the state before holds the mmap'd bytes
    cli.run("undo", session=sid)
    assert (cli.root / "data.bin").read_bytes() == b"NEW content\n"


#: Maps data.bin shared and writable, closes the descriptor (its last event),
#: says "mapped", then writes through the mapping each time a line comes in.
_MAPPER = """
import mmap, sys
with open('data.bin', 'r+b') as f:
    m = mmap.mmap(f.fileno(), 0)
print('mapped', flush=True)
for line in sys.stdin:
    m[0:3] = line.encode()[:3]
    print('wrote', flush=True)
"""


def test_a_write_through_a_mapping_that_outlives_its_descriptor_is_seen_by_the_daemon(
    cli: Cli,
) -> None:
    # No event at all: the descriptor was closed before the write. The files
    # a live process maps shared and writable are read again at every ask.
    cli.write("data.bin", b"old content\n")
    cli.run("watch")
    with subprocess.Popen(
        [sys.executable, "-c", _MAPPER],
        cwd=cli.root,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    ) as mapper:
        try:
            assert mapper.stdout is not None and mapper.stdin is not None
            assert mapper.stdout.readline() == "mapped\n"
            cli.json("snapshot")  # the mark: the descriptor's close is behind it
            sid = cli.new_session()
            cli.run("bash", "true", session=sid)
            mapper.stdin.write("NEW\n")
            mapper.stdin.flush()
            assert mapper.stdout.readline() == "wrote\n"
            cli.run("bash", "echo other > other.txt", session=sid)
            last = cli.json("log", session=sid)["outside"]
            assert [c["path"] for c in last[0]["changes"]] == ["data.bin"], last
            cli.run("bash", "rm data.bin", session=sid)  # the state before holds the new bytes
            cli.run("undo", session=sid)
            assert (cli.root / "data.bin").read_bytes() == b"NEW content\n"
        finally:
            mapper.kill()


def test_an_edit_of_the_repositorys_info_exclude_is_a_change_of_the_roots_rules(
    cli: Cli,
) -> None:
    subprocess.run(["git", "init", "-q", str(cli.root)], check=True)
    cli.write("a.txt", "keep\n")
    cli.write("dist/notes.txt", "precious\n")
    exclude = cli.root / ".git" / "info" / "exclude"
    exclude.write_text("dist/\n")
    cli.run("watch")
    first = cli.json("snapshot")
    assert first["files"] == 1  # dist/ excluded: a build output directory, not kept
    exclude.write_text("")  # no longer excluded: a walk records it
    doc = cli.json("snapshot")
    assert doc["files"] == 2, doc
    walked = _walked(cli)
    assert walked["reused"] is True and walked["id"] == doc["id"]


def test_an_ignored_file_is_kept_in_a_vouched_snapshot_as_a_walk_keeps_it(
    cli: Cli,
) -> None:
    cli.write(".gitignore", ".env\n")
    cli.write("a.txt", "a\n")
    cli.run("watch")
    sid = cli.new_session()
    cli.run("write", ".env", stdin="AGENT=1\n", session=sid)  # recorded for undo
    (cli.root / ".env").write_text("HAND=2\n")  # ignored, and kept: the daemon sees it
    doc = cli.json("snapshot")
    assert doc["vouched"] is True, doc
    walked = _walked(cli)
    assert walked["reused"] is True and walked["id"] == doc["id"]
    (cli.root / ".env").write_text("HAND=3\n")
    cli.run("restore", doc["id"], "--force")  # the snapshot holds .env as it was
    assert (cli.root / ".env").read_text() == "HAND=2\n"


def test_git_add_force_of_a_file_the_scan_does_not_keep_is_seen_by_the_daemon(
    cli: Cli,
) -> None:
    # A file in a cache directory: kept as existence only until git tracks it.
    subprocess.run(["git", "init", "-q", str(cli.root)], check=True)
    cli.write(".gitignore", "node_modules/\n")
    cli.write("node_modules/pkg/patched.js", "v1\n")
    cli.write("a.txt", "a\n")
    cli.run("watch")
    cli.json("snapshot")
    subprocess.run(
        ["git", "-C", str(cli.root), "add", "-f", "node_modules/pkg/patched.js"], check=True
    )
    doc = cli.json("snapshot")
    assert doc["vouched"] is True and doc["files"] == 3, doc
    sid = cli.new_session()
    cli.run("bash", "echo v2 > node_modules/pkg/patched.js", session=sid)
    cli.run("undo", session=sid)
    assert (cli.root / "node_modules/pkg/patched.js").read_text() == "v1\n"
    walked = _walked(cli)
    assert walked["files"] == 3


def test_a_hand_edit_of_a_kept_ignored_file_is_seen_by_the_daemon(cli: Cli) -> None:
    cli.write(".gitignore", ".env\nlocal/\n")
    cli.write(".env", "A=1\n")
    cli.write("local/db.json", "{}\n")
    cli.run("watch")
    cli.json("snapshot")
    cli.write(".env", "A=2\n")
    cli.write("local/db.json", '{"k": 1}\n')
    doc = cli.json("snapshot")
    assert doc["vouched"] is True and doc["reused"] is False, doc
    walked = _walked(cli)
    assert walked["reused"] is True and walked["id"] == doc["id"]


def test_a_daemon_watching_by_other_limits_for_ignored_files_is_not_trusted(cli: Cli) -> None:
    cli.write(".gitignore", "data/\n")
    cli.write("data/a.txt", "a\n")
    cli.run("watch")
    cli.json("snapshot")
    doc = cli.json("snapshot", env=cli.env(EARSHOT_KEEP_IGNORED="0"))
    assert doc["vouched"] is False, doc
