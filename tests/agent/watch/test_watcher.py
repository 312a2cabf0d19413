"""The in-process watcher, on a real inotify instance and real files.

What it must get right: every change reported (renames by both names, a new
directory by itself), reads reporting nothing, ignored trees not watched at
all, and every way of losing events (overflow, the watch limit, a root that
goes away) answered with None so the policy's full restage misses nothing.
"""

from __future__ import annotations

import ctypes
import errno
import logging
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from watchdog.observers import inotify_c

from earshot.agent.core.calls import Bash
from earshot.agent.watch.watcher import Watcher
from earshot.cas.paths import checkpoints_dir

pytestmark = [
    pytest.mark.watcher,
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="inotify"),
]

QUEUE_LIMIT = Path("/proc/sys/fs/inotify/max_queued_events")


@pytest.fixture
def data_dir(tmp_path: Path, root: Path) -> Path:
    return checkpoints_dir(root, tmp_path / "home")


@pytest.fixture
def watcher(root: Path, data_dir: Path) -> Iterator[Watcher]:
    w = Watcher(root, data_dir).start()
    try:
        yield w
    finally:
        w.stop()


def sh(root: Path, script: str) -> None:
    subprocess.run(["/bin/sh", "-c", script], cwd=root, check=True)


def kernel_watches(w: Watcher) -> int:
    """Watches the kernel holds for this watcher's inotify instance."""
    fd = w._fd._inotify_fd  # type: ignore[union-attr]
    with open(f"/proc/self/fdinfo/{fd}") as f:
        return sum(1 for line in f if line.startswith("inotify wd:"))


def test_creates_edits_deletes_and_renames_are_all_reported(root: Path, data_dir: Path) -> None:
    (root / "keep.txt").write_text("a\n")
    (root / "old.txt").write_text("b\n")
    (root / "gone.txt").write_text("c\n")
    with Watcher(root, data_dir) as w:
        t = w.token()
        sh(root, "echo more >> keep.txt; mv old.txt new.txt; rm gone.txt; echo n > made.txt")
        sh(root, "chmod +x keep.txt")
        assert w.changed_since(t) == {"keep.txt", "old.txt", "new.txt", "gone.txt", "made.txt"}


def test_mkdir_p_reports_the_new_directory_and_watches_inside_it(
    root: Path, data_dir: Path
) -> None:
    with Watcher(root, data_dir) as w:
        t = w.token()
        sh(root, "mkdir -p a/b/c && echo x > a/b/c/f.txt && echo y > a/top.txt")
        seen = w.changed_since(t)
        assert seen is not None and "a" in seen  # the scoped restage scans "a" whole
        assert all(p == "a" or p.startswith("a/") for p in seen)
        t = w.token()
        (root / "a/b/c/f.txt").write_text("edited\n")
        (root / "a/b/c/d").mkdir()
        assert w.changed_since(t) == {"a/b/c/f.txt", "a/b/c/d"}


def test_a_tree_copied_or_moved_in_is_watched_all_the_way_down(
    root: Path, data_dir: Path, tmp_path: Path
) -> None:
    source = tmp_path / "source"
    for i in range(4):
        (source / f"a{i}/b/c").mkdir(parents=True)
        (source / f"a{i}/b/c/f.txt").write_text("x\n")
    outside = tmp_path / "outside"
    shutil.copytree(source, outside)
    with Watcher(root, data_dir) as w:
        t = w.token()
        shutil.copytree(source, root / "copied")
        os.rename(outside, root / "moved")
        seen = w.changed_since(t)
        assert seen is not None and {"copied", "moved"} <= seen
        assert kernel_watches(w) == 1 + 1 + 2 * (1 + 4 * 3)  # cookies, root, two trees
        t = w.token()
        (root / "copied/a3/b/c/f.txt").write_text("y\n")
        (root / "moved/a0/b/c/new.txt").write_text("z\n")
        assert w.changed_since(t) == {"copied/a3/b/c/f.txt", "moved/a0/b/c/new.txt"}


def test_a_directory_renamed_inside_the_root_is_watched_under_its_new_name(
    root: Path, data_dir: Path
) -> None:
    (root / "src/pkg").mkdir(parents=True)
    with Watcher(root, data_dir) as w:
        t = w.token()
        (root / "src").rename(root / "lib")
        assert w.changed_since(t) == {"src", "lib"}
        t = w.token()
        (root / "lib/pkg/m.py").write_text("x\n")
        assert w.changed_since(t) == {"lib/pkg/m.py"}


def test_a_directory_moved_out_is_reported_and_no_longer_watched(
    root: Path, data_dir: Path, tmp_path: Path
) -> None:
    (root / "d/e").mkdir(parents=True)
    with Watcher(root, data_dir) as w:
        before = kernel_watches(w)
        t = w.token()
        shutil.move(root / "d", tmp_path / "outside")
        assert w.changed_since(t) == {"d"}
        t = w.token()
        (tmp_path / "outside/e/x").write_text("not ours\n")
        assert w.changed_since(t) == set()
        assert kernel_watches(w) == before - 2


def test_reading_files_reports_nothing_and_queues_no_event(root: Path, data_dir: Path) -> None:
    for i in range(200):
        (root / f"f{i}.txt").write_text(f"{i}\n")
    with Watcher(root, data_dir) as w:
        t = w.token()
        events = w.status()["events"]
        sh(root, "cat *.txt >/dev/null; ls -lR >/dev/null")
        sh(root, "find . -type f -exec head -c1 {} + >/dev/null")
        assert w.changed_since(t) == set()
        assert w.status()["events"] == events  # not even delivered: the mask leaves reads out


def test_caches_and_git_are_never_watched_and_ignored_names_are_reported(
    root: Path, data_dir: Path
) -> None:
    (root / ".gitignore").write_text("node_modules/\ndist/\n*.log\n")
    for i in range(40):
        (root / f"node_modules/pkg{i}/lib").mkdir(parents=True)
        (root / f".git/objects/{i:02x}").mkdir(parents=True)
    (root / "dist/x").mkdir(parents=True)
    (root / "src/app").mkdir(parents=True)
    with Watcher(root, data_dir) as w:
        # root, src, src/app, the cookie directory, .git (for its index, never
        # its content), and the listings of node_modules and dist alone (their
        # identity is recorded): nothing below them.
        assert kernel_watches(w) == 7
        assert w.status()["watches"] == 7
        t = w.token()
        sh(root, "echo 1 > node_modules/pkg1/lib/i.js; echo 2 > .git/objects/01/obj")
        sh(root, "echo 3 > x.log")
        sh(root, "mkdir node_modules/new; mkdir -p src/.git/refs; echo 4 > src/app/m.py")
        # x.log is ignored, but a scan records that it exists (and keeps it);
        # node_modules' own listing changed: its identity (mtime) did.
        assert w.changed_since(t) == {"src/app/m.py", "x.log", "node_modules"}
        assert kernel_watches(w) == 7


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_paths_the_git_index_tracks_are_watched_and_reported_though_ignored(
    root: Path, data_dir: Path, git: Any
) -> None:
    git(root, "init", "-q")
    (root / ".gitignore").write_text("build/\n*.patch\n")
    for rel in ("build/keep/config.h", "build/other/out.o", "fix.patch", "junk.patch"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text("x\n")
    git(root, "add", "-f", "build/keep/config.h", "fix.patch")
    with Watcher(root, data_dir) as w:
        # root, build, build/keep, cookies, .git (for the index), .git/info
        # (for info/exclude), and build/other's own listing: nothing below it
        assert kernel_watches(w) == 7
        t = w.token()
        sh(root, "echo 1 >> build/keep/config.h; echo 2 >> fix.patch")
        sh(root, "echo 3 >> build/other/out.o; echo 4 >> junk.patch")
        # build/ is a build output directory: only what the index tracks there
        # is walked. junk.patch is ignored and kept.
        assert w.changed_since(t) == {"build/keep/config.h", "fix.patch", "junk.patch"}
        git(root, "add", "-f", "junk.patch")  # the index changes, the tree does not
        t = w.token()
        sh(root, "echo 5 >> junk.patch")
        assert w.changed_since(t) == {"junk.patch"}


def test_an_ignore_file_edit_re_decides_what_is_watched(root: Path, data_dir: Path) -> None:
    (root / "sub/build/out").mkdir(parents=True)
    (root / "sub/.gitignore").write_text("build/\n")
    with Watcher(root, data_dir) as w:
        assert kernel_watches(w) == 4  # root, sub, cookies, sub/build's own listing
        t = w.token()
        (root / "sub/.gitignore").write_text("")
        seen = w.changed_since(t)
        assert seen is not None and {"sub", "sub/.gitignore"} <= seen
        assert kernel_watches(w) == 5  # sub/build and sub/build/out now watched
        t = w.token()
        (root / "sub/build/out/o.bin").write_bytes(b"1")
        assert w.changed_since(t) == {"sub/build/out/o.bin"}


def test_the_root_ignore_file_changing_is_a_gap(root: Path, data_dir: Path) -> None:
    with Watcher(root, data_dir) as w:
        t = w.token()
        (root / ".gitignore").write_text("*.tmp\n")
        assert w.changed_since(t) is None
        t = w.token()
        (root / "a.tmp").write_text("ignored now, and kept\n")
        (root / "a.txt").write_text("seen\n")
        assert w.changed_since(t) == {"a.tmp", "a.txt"}


def test_earshot_data_inside_the_root_is_not_watched(root: Path) -> None:
    home = root / ".earshot-home"
    store = checkpoints_dir(root, home)
    with Watcher(root, store) as w:
        t = w.token()
        (store / "data.mdb").write_bytes(b"x")
        (home / "sessions").mkdir()
        (root / ".earshot-tmp-18ed3cd7ae72c48f-5ac8d7f4-1").write_text("restore temp file\n")
        assert w.changed_since(t) == set()
        assert kernel_watches(w) == 2  # root and cookies


def test_every_change_of_an_exited_command_is_in_the_answer(root: Path, data_dir: Path) -> None:
    with Watcher(root, data_dir) as w:
        for i in range(30):
            t = w.token()
            sh(root, f"mkdir -p d{i % 3} && echo {i} > d{i % 3}/f{i}")
            seen = w.changed_since(t)
            assert seen is not None and bool({f"d{i % 3}/f{i}", f"d{i % 3}"} & seen)
        settle = w.status()["settle_ms"]
        assert settle["count"] >= 60 and settle["median"] < 50


def test_tokens_that_are_not_this_watchers_are_gaps(root: Path, data_dir: Path) -> None:
    with Watcher(root, data_dir) as first:
        old = first.token()
    with Watcher(root, data_dir) as w:
        assert w.changed_since(old) is None
        assert w.explain(old) == ("the token is older than this watcher", False)
        for bad in (None, "1", True, w.token() + 10**6):
            assert w.changed_since(bad) is None
        assert w.changed_since(w.token()) == set()


def test_too_many_changes_expire_old_tokens(root: Path, data_dir: Path) -> None:
    with Watcher(root, data_dir, max_tracked=10) as w:
        t = w.token()
        for i in range(11):
            (root / f"f{i}").write_text("x")
        assert w.changed_since(t) is None
        t = w.token()
        (root / "f0").write_text("y")
        assert w.changed_since(t) == {"f0"}


def test_the_root_going_away_stops_the_watcher_vouching(root: Path, data_dir: Path) -> None:
    with Watcher(root, data_dir) as w:
        t = w.token()
        shutil.rmtree(root)
        assert w.changed_since(t) is None
        assert w.changed_since(w.token()) is None
        assert "root" in (w.status()["degraded"] or "")


# -- losing events: overflow and the watch limit --------------------------------


def test_a_real_queue_overflow_is_detected_as_a_gap(root: Path, data_dir: Path) -> None:
    try:
        saved = QUEUE_LIMIT.read_text()
        QUEUE_LIMIT.write_text("16\n")
    except OSError:
        pytest.skip("cannot lower fs.inotify.max_queued_events here")
    try:
        w = Watcher(root, data_dir).start()  # the queue size is read when the instance is made
    finally:
        QUEUE_LIMIT.write_text(saved)
    try:
        t = w.token()
        # Hold the consumer back, so the kernel queue really fills: the watcher,
        # and watchdog's reader (from 7.1.1 a thread of its own drains the kernel
        # queue into an unbounded one, whatever the consumer does; it takes this
        # lock before each read).
        assert w._fd is not None
        with w._lock, w._fd._lock:
            for i in range(200):
                (root / f"f{i}").write_text("x")
        assert w.changed_since(t) is None
        status = w.status()
        assert status["overflows"] >= 1 and "overflowed" in status["gaps"][0]["reason"]
        t = w.token()  # after the gap, the watcher vouches again
        (root / "after").write_text("y")
        assert w.changed_since(t) == {"after"}
    finally:
        w.stop()


def lose_events(w: Watcher, monkeypatch: pytest.MonkeyPatch) -> dict[str, bool]:
    """Make the watcher drop tree events while ``on`` is set, then report the overflow.

    This is what the kernel does on IN_Q_OVERFLOW: events are gone, and the
    only sign is the overflow event that watchdog hands to on_queue_overflow.
    """
    state = {"on": False, "told": False}
    real = w._handle

    def handle(event: Any) -> None:
        if state["on"] and w._cookie is not None and event.wd != w._cookie[0]:
            if not state["told"]:
                state["told"] = True
                w.on_queue_overflow()
            return
        real(event)

    monkeypatch.setattr(w, "_handle", handle)
    return state


def test_after_an_overflow_the_full_restage_misses_nothing(
    lib: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    root: Path = lib.root
    (root / "existing.txt").write_text("old\n")
    with Watcher(root, lib.project.store_dir) as w:
        engine = lib.engine(tracker=w, budget_ns=10**12)
        engine.run_batch([Bash("echo first > first.txt")])
        spy = lib.spy(monkeypatch)
        lossy = lose_events(w, monkeypatch)
        lossy["on"] = True
        script = "mkdir -p gen/a && for i in 1 2 3 4 5; do echo $i > gen/a/f$i; done; "
        out = engine.run_batch([Bash(script + "echo new >> existing.txt")])
        lossy["on"] = False
        assert lossy["told"]
        assert spy.kinds()[-1] == "full"  # the gap made the policy restage everything
        assert {c.path for c in out.batch.ledger} == {
            *(f"gen/a/f{i}" for i in range(1, 6)),
            "existing.txt",
        }
        assert all(c.by == 0 for c in out.batch.ledger)


def test_a_watchers_changes_are_attributed_to_the_call_on_a_tree_over_budget(
    lib: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    root: Path = lib.root
    for i in range(5):
        (root / f"edit{i}.py").write_text(f"{i}\n")
    (root / "gen.py").write_text(
        "import os\n"
        "for d in range(3):\n"
        "    for s in range(10):\n"
        "        os.makedirs(f'new/d{d}/s{s}')\n"
        "        for f in range(10):\n"
        "            open(f'new/d{d}/s{s}/f{f}', 'w').write(str(f))\n"
        "for i in range(5):\n"
        "    open(f'edit{i}.py', 'a').write('more')\n"
    )
    with Watcher(root, lib.project.store_dir) as w:
        engine = lib.engine(tracker=w, budget_ns=0)  # no full restage after a command
        engine.run_batch([Bash("true")])
        spy = lib.spy(monkeypatch)
        gen = f"{sys.executable} gen.py"
        out = engine.run_batch([Bash(gen)])
        assert "full" not in spy.kinds()
        paths = {c.path for c in out.batch.ledger}
        assert len(paths) == 305 and {f"edit{i}.py" for i in range(5)} <= paths
        assert all(c.by == 0 for c in out.batch.ledger) and not out.batch.folded


def test_the_watch_limit_makes_the_watcher_give_up_and_say_so_once(
    root: Path, data_dir: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    for i in range(10):
        (root / f"d{i}").mkdir()
    real = inotify_c.inotify_add_watch
    budget = {"left": 4}  # the cookie directory, the root, then two more

    def limited(fd: int, path: bytes, mask: int) -> int:
        if budget["left"] == 0:
            ctypes.set_errno(errno.ENOSPC)
            return -1
        budget["left"] -= 1
        return int(real(fd, path, mask))

    monkeypatch.setattr(inotify_c, "inotify_add_watch", limited)
    caplog.set_level(logging.WARNING, "earshot.watch")
    with Watcher(root, data_dir) as w:
        t = w.token()
        (root / "d0/x").write_text("x")
        assert w.changed_since(t) is None
        assert w.changed_since(w.token()) is None  # for good, not once
        status = w.status()
        assert "watch limit" in status["degraded"] and not status["healthy"]
        assert status["watched_dirs"] == 0  # it let its watches go for others
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "inotify watch limit reached" in warnings[0]


def test_the_watch_limit_hit_by_a_new_directory_is_a_gap_too(
    root: Path, data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with Watcher(root, data_dir) as w:
        t = w.token()

        def full(fd: int, path: bytes, mask: int) -> int:
            ctypes.set_errno(errno.ENOSPC)
            return -1

        monkeypatch.setattr(inotify_c, "inotify_add_watch", full)
        (root / "newdir").mkdir()
        assert w.changed_since(t) is None
        assert "watch limit" in (w.status()["degraded"] or "")


def test_an_unsupported_filesystem_is_refused_up_front(
    root: Path, data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("earshot.agent.watch.watcher.filesystem_type", lambda path: "nfs4")
    with Watcher(root, data_dir) as w:
        assert w.changed_since(w.token()) is None
        assert "unsupported filesystem (nfs4)" in (w.status()["degraded"] or "")


def test_a_vanished_cookie_directory_is_watched_again(root: Path, data_dir: Path) -> None:
    with Watcher(root, data_dir) as w:
        shutil.rmtree(w.cookie_dir)
        w.token()  # the deletion's IN_IGNORED is handled by the time this returns
        t = w.token()
        (root / "a").write_text("x")
        assert w.changed_since(t) == {"a"}
        assert os.path.isdir(w.cookie_dir)


def test_a_watcher_that_cannot_watch_the_mount_table_stops_vouching(
    root: Path, data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Mounts would come and go under the root unseen: every answer is a gap.
    from earshot.agent.watch import mounts

    monkeypatch.setattr(mounts, "MOUNTINFO", str(root / "no-such-mountinfo"))
    w = Watcher(root, data_dir).start()
    try:
        token = w.token()
        (root / "x").write_text("x")
        assert w.changed_since(token) is None
        assert "mount table" in str(w.status()["degraded"])
    finally:
        w.stop()


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_a_path_the_index_starts_or_stops_tracking_is_reported_and_watched(
    root: Path, data_dir: Path, git: Any
) -> None:
    git(root, "init", "-q")
    (root / ".gitignore").write_text("node_modules/\n")
    (root / "node_modules" / "pkg").mkdir(parents=True)
    (root / "node_modules" / "pkg" / "patched.js").write_text("v1\n")
    with Watcher(root, data_dir) as w:
        t = w.token()
        git(root, "status", "--porcelain")  # may rewrite the index: the same paths
        assert w.changed_since(t) == set()
        git(root, "add", "-f", "node_modules/pkg/patched.js")
        seen = w.changed_since(t)
        assert seen is not None and "node_modules/pkg/patched.js" in seen
        t = w.token()  # the cache is walked now, for what git tracks in it
        (root / "node_modules" / "pkg" / "patched.js").write_text("v2\n")
        assert w.changed_since(t) == {"node_modules/pkg/patched.js"}
        t = w.token()
        git(root, "rm", "-q", "-f", "--cached", "node_modules/pkg/patched.js")
        assert w.changed_since(t) == {"node_modules/pkg/patched.js"}
        t = w.token()
        (root / "node_modules" / "pkg" / "patched.js").write_text("v3\n")
        assert w.changed_since(t) == set()  # not tracked, in a cache: not watched


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_a_nested_repositorys_info_exclude_is_a_change_of_its_rules(
    root: Path, data_dir: Path, git: Any
) -> None:
    dep = root / "vendor" / "dep"
    dep.mkdir(parents=True)
    git(dep, "init", "-q")
    (dep / "data").mkdir()
    (dep / "data" / "notes.txt").write_text("n\n")
    with Watcher(root, data_dir) as w:
        t = w.token()
        (dep / ".git" / "info" / "exclude").write_text("data/\n")
        seen = w.changed_since(t)
        assert seen is not None and "vendor/dep" in seen
