"""What a scan records inside git work trees: the index beats the ignore rules.

git never applies ignore patterns to paths in its index (numpy tracks
``*.patch`` files its .gitignore ignores); earshot records what git tracks
whatever the rules say, reading the index itself (never git, never writing).
Every test runs real git on a real repository and a real LMDB store.
"""

from __future__ import annotations

import logging
import os
import shutil
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from earshot.cas import gitindex
from earshot.cas.diff import diff_trees
from earshot.cas.digest import Digest
from earshot.cas.entrykey import EXISTENCE_ONLY
from earshot.cas.keep import KeepIgnored
from earshot.cas.project import Project
from earshot.cas.recording import ScanOptions
from earshot.cas.restore import delete_everything
from earshot.cas.scan import RACY_INDEX
from earshot.cas.statcache import load_record
from earshot.cas.tree import Kind

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")

Git = Callable[..., str]
# Entries older than 20 ms are trusted. These tests are about git's view (what
# the index makes recorded): ignored files are not kept here, only their
# existence (tests/cas/test_keep.py is about keeping them).
AGED = ScanOptions(racy_margin_ns=20_000_000, keep=KeepIgnored(enabled=False))


@pytest.fixture
def repo(tmp_path: Path, git: Git) -> Path:
    top = (tmp_path / "repo").resolve()
    top.mkdir()
    git(top, "init", "-q")
    return top


@pytest.fixture
def project(repo: Path, earshot_home: Path) -> Iterator[Project]:
    with Project(repo, options=AGED) as p:
        yield p


def put(top: Path, rel: str, data: str = "x\n") -> Path:
    path = top / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(data)
    return path


def files(project: Project, tree: Digest | None = None) -> set[str]:
    """Every file and link path of ``tree`` (default: a fresh snapshot)."""
    if tree is None:
        tree = project.snapshot().snapshot.tree
    with project.store.reader() as reader:
        return {
            c.path
            for c in diff_trees(reader, None, tree)
            if c.new is not None
            and c.new.kind is not Kind.DIR
            and c.new.reason not in EXISTENCE_ONLY
        }


def settle() -> None:
    time.sleep(0.05)  # past AGED's racy margin: the stat cache trusts what it saw


# -- the rule ------------------------------------------------------------------------------


def test_scan_records_a_tracked_file_that_its_gitignore_ignores(
    repo: Path, project: Project, git: Git
) -> None:
    put(repo, ".gitignore", "*.patch\n")
    put(repo, "tools/fix.patch")
    put(repo, "tools/local.patch")
    git(repo, "add", "-f", "tools/fix.patch")
    assert files(project) == {".gitignore", "tools/fix.patch"}


def test_scan_records_tracked_files_under_an_ignored_directory_and_nothing_else_there(
    repo: Path, project: Project, git: Git
) -> None:
    put(repo, ".gitignore", "build/\n")
    put(repo, "build/keep/config.h")
    put(repo, "build/keep/out.o")
    put(repo, "build/other/out.o")
    git(repo, "add", "-f", "build/keep/config.h")
    settle()
    assert files(project) == {".gitignore", "build/keep/config.h"}
    settle()
    assert files(project) == {".gitignore", "build/keep/config.h"}  # from the stat cache
    put(repo, "build/keep/new.o")
    assert files(project) == {".gitignore", "build/keep/config.h"}
    put(repo, "top.txt")  # the root listed again, its cached names trusted
    assert files(project) == {".gitignore", "build/keep/config.h", "top.txt"}


def test_scan_of_a_subdirectory_root_records_what_the_index_tracks_below_it(
    repo: Path, git: Git, earshot_home: Path
) -> None:
    put(repo, "sub/.gitignore", "*.log\n")
    put(repo, "sub/kept.log")
    put(repo, "sub/junk.log")
    put(repo, "other/kept.log")
    git(repo, "add", "-f", "sub/kept.log", "other/kept.log")
    with Project(repo / "sub", options=AGED) as sub:
        assert files(sub) == {".gitignore", "kept.log"}


def test_a_tracked_ignored_file_untracked_with_rm_cached_stops_being_recorded(
    repo: Path, project: Project, git: Git
) -> None:
    put(repo, ".gitignore", "*.patch\nbuild/\n")
    put(repo, "fix.patch")
    put(repo, "build/config.h")
    git(repo, "add", "-f", "fix.patch", "build/config.h")
    settle()
    assert files(project) == {".gitignore", "fix.patch", "build/config.h"}
    settle()
    assert files(project) == {".gitignore", "fix.patch", "build/config.h"}  # all cached now
    git(repo, "rm", "-q", "--cached", "fix.patch", "build/config.h")
    assert files(project) == {".gitignore"}


def test_an_ignored_file_added_with_add_force_starts_being_recorded(
    repo: Path, project: Project, git: Git
) -> None:
    put(repo, ".gitignore", "*.patch\nbuild/\n")
    put(repo, "fix.patch")
    put(repo, "build/config.h")
    settle()
    assert files(project) == {".gitignore"}
    settle()
    assert files(project) == {".gitignore"}  # directory listings trusted by mtime now
    git(repo, "add", "-f", "fix.patch", "build/config.h")
    assert files(project) == {".gitignore", "fix.patch", "build/config.h"}


def test_scoped_restage_records_a_tracked_ignored_path_and_drops_an_untracked_one(
    repo: Path, project: Project, git: Git
) -> None:
    put(repo, ".gitignore", "*.patch\nbuild/\n")
    put(repo, "a.txt")
    project.snapshot()
    put(repo, "fix.patch")
    put(repo, "junk.patch")
    put(repo, "build/config.h")
    put(repo, "build/out.o")
    git(repo, "add", "-f", "fix.patch", "build/config.h")
    restaged = project.restage(["fix.patch", "junk.patch", "build/config.h", "build/out.o"])
    assert files(project, restaged.snapshot.tree) == {
        ".gitignore",
        "a.txt",
        "fix.patch",
        "build/config.h",
    }
    git(repo, "rm", "-q", "--cached", "fix.patch")
    restaged = project.restage(["fix.patch", "build"])
    assert files(project, restaged.snapshot.tree) == {".gitignore", "a.txt", "build/config.h"}


def test_an_index_written_within_the_racy_margin_is_judged_again_next_time(
    repo: Path, git: Git, earshot_home: Path, loads: list[str]
) -> None:
    put(repo, ".gitignore", "*.patch\n")
    put(repo, "fix.patch")
    git(repo, "add", "-f", "fix.patch")
    margin = ScanOptions(racy_margin_ns=500_000_000, keep=KeepIgnored(enabled=False))
    with Project(repo, options=margin) as p:
        assert files(p) == {".gitignore", "fix.patch"}
        with p.store.reader() as reader:
            record = load_record(reader.view, "")
        assert record is not None and record.index_tag == RACY_INDEX
        time.sleep(0.6)
        assert files(p) == {".gitignore", "fix.patch"}  # judged again: read again
        assert files(p) == {".gitignore", "fix.patch"}  # trusted now
    assert len(loads) == 2


# -- nested repositories ---------------------------------------------------------------------


def test_a_nested_repository_is_recorded_and_judged_by_its_own_rules_and_index(
    repo: Path, project: Project, git: Git
) -> None:
    put(repo, ".gitignore", "*.log\n")
    dep = repo / "vendor" / "dep"
    dep.mkdir(parents=True)
    git(dep, "init", "-q")
    put(dep, ".gitignore", "tmp/\n*.o\n")
    put(dep, "main.c")
    put(dep, "debug.log")  # the outer rules do not reach into another repository
    put(dep, "tmp/scratch")
    put(dep, "lib.o")
    put(dep, "blob.o")
    git(dep, "add", "-f", "blob.o")
    put(dep, ".git/info/exclude", "*.secret\n")
    put(dep, "key.secret")
    put(repo, ".earshotignore", "*.bak\n")  # earshot's own rules reach across
    put(dep, "main.c.bak")
    put(repo, "top.log")
    assert files(project) == {
        ".gitignore",
        ".earshotignore",
        "vendor/dep/.gitignore",
        "vendor/dep/main.c",
        "vendor/dep/debug.log",
        "vendor/dep/blob.o",
    }


def test_restore_force_judges_a_nested_repositorys_extras_by_its_own_rules(
    repo: Path, project: Project, git: Git
) -> None:
    put(repo, ".gitignore", "*.tmp\n")
    dep = repo / "vendor" / "dep"
    dep.mkdir(parents=True)
    git(dep, "init", "-q")
    put(dep, ".gitignore", "*.o\n")
    put(dep, "main.c")
    before = project.snapshot()
    put(dep, "x.tmp")  # the outer *.tmp does not reach into dep: recorded, and extra
    put(dep, "y.o")
    put(repo, "top.tmp")
    project.restore(before.digest, may_delete=delete_everything)
    assert not (dep / "x.tmp").exists()
    assert (dep / "y.o").exists() and (repo / "top.tmp").exists()


# -- reading the index: cost, formats, refusals ------------------------------------------------


@pytest.fixture
def loads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The index files read (parsed) from now on."""
    seen: list[str] = []
    real = gitindex.read_index

    def counting(path: str, digest_size: int = 20) -> gitindex.IndexPaths:
        seen.append(path)
        return real(path, digest_size)

    monkeypatch.setattr(gitindex, "read_index", counting)
    return seen


def test_the_index_is_not_read_when_no_ignore_rule_matches(
    repo: Path, project: Project, git: Git, loads: list[str]
) -> None:
    put(repo, ".gitignore", "*.patch\n")
    put(repo, "a.txt")
    git(repo, "add", "a.txt")
    files(project)
    assert loads == []


def test_an_unchanged_index_is_not_read_again(
    repo: Path, project: Project, git: Git, loads: list[str]
) -> None:
    put(repo, ".gitignore", "*.patch\n")
    put(repo, "fix.patch")
    put(repo, "junk.patch")
    git(repo, "add", "-f", "fix.patch")
    settle()
    files(project)
    assert len(loads) == 1
    put(repo, "new.patch")  # a new ignored name: matched, and the index answers from cache
    settle()
    assert files(project) == {".gitignore", "fix.patch"}
    assert files(project) == {".gitignore", "fix.patch"}
    assert len(loads) == 1


@pytest.mark.parametrize("version", ["2", "3", "4"])
def test_read_index_lists_what_git_ls_files_lists_in_each_index_version(
    repo: Path, git: Git, version: str
) -> None:
    names = ["a.txt", "dir/b.txt", "dir/sub/c.txt", "dir/sub/d e.txt", "z" * 250, "é/ü.txt"]
    for name in names:
        put(repo, name)
    put(repo, "new.txt")
    git(repo, "add", *names)
    git(repo, "add", "-N", "new.txt")  # intent-to-add: an extended flag (version 3+)
    git(repo, "update-index", "--index-version", version)
    listed = git(repo, "-c", "core.quotePath=false", "ls-files", "-z").split("\0")[:-1]
    read = gitindex.read_index(str(repo / ".git" / "index"))
    assert sorted(os.fsdecode(p) for p in read.paths) == sorted(listed)


def test_read_index_of_a_sha256_repository(tmp_path: Path, git: Git) -> None:
    top = tmp_path / "sha256"
    top.mkdir()
    try:
        git(top, "init", "-q", "--object-format=sha256")
    except Exception:
        pytest.skip("this git cannot make a sha256 repository")
    put(top, "a.txt")
    put(top, "d/b.txt")
    git(top, "add", ".")
    read = gitindex.read_index(str(top / ".git" / "index"), digest_size=32)
    assert sorted(read.paths) == [b"a.txt", b"d/b.txt"]


def test_a_split_index_is_refused_with_a_warning_and_tracks_nothing(
    repo: Path, project: Project, git: Git, caplog: pytest.LogCaptureFixture
) -> None:
    put(repo, ".gitignore", "*.patch\n")
    put(repo, "fix.patch")
    git(repo, "add", "-f", "fix.patch")
    git(repo, "update-index", "--split-index")
    caplog.set_level(logging.WARNING, "earshot")
    assert files(project) == {".gitignore"}
    said = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any("split index" in m for m in said), said


def test_a_linked_worktree_uses_its_own_index(repo: Path, git: Git, earshot_home: Path) -> None:
    put(repo, ".gitignore", "*.patch\n")
    put(repo, "a.txt")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "one")
    linked = repo.parent / "linked"
    git(repo, "worktree", "add", "-q", str(linked))
    put(linked, "fix.patch")
    git(linked, "add", "-f", "fix.patch")
    with Project(linked, options=AGED) as p:
        assert files(p) == {".gitignore", "a.txt", "fix.patch"}
