"""Which root a directory means (``cas/rootfind``): the nearest mark up, as git finds its top."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from earshot.cas.paths import checkpoints_dir
from earshot.cas.rootfind import RootTooWide, find_root


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A home directory of its own, so the real one never counts."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    return home


def test_a_git_work_tree_s_top_is_found_from_a_folder_below_it(home: Path) -> None:
    (home / "proj" / ".git").mkdir(parents=True)
    (home / "proj" / "cli" / "deep").mkdir(parents=True)
    found = find_root(str(home / "proj" / "cli" / "deep"), home / "data")
    assert (found.root, found.why) == (str(home / "proj"), "git")


def test_the_nearest_mark_wins_a_nested_repository_or_a_git_file(home: Path) -> None:
    (home / "proj" / ".git").mkdir(parents=True)
    (home / "proj" / "vendor" / "lib").mkdir(parents=True)
    (home / "proj" / "vendor" / "lib" / ".git").write_text("gitdir: ../../.git/modules/lib\n")
    found = find_root(str(home / "proj" / "vendor" / "lib"), home / "data")
    assert (found.root, found.why) == (str(home / "proj" / "vendor" / "lib"), "git")


def test_an_earshotignore_settings_or_a_store_marks_a_root_without_git(home: Path) -> None:
    (home / "a" / "sub").mkdir(parents=True)
    (home / "a" / ".earshotignore").write_text("*.log\n")
    assert find_root(str(home / "a" / "sub"), home / "data").why == "earshotignore"
    (home / "s" / "sub").mkdir(parents=True)
    (home / "s" / ".earshot.toml").write_text("max_file_size = 10\n")
    found = find_root(str(home / "s" / "sub"), home / "data")
    assert (found.root, found.why) == (str(home / "s"), "settings")
    (home / "b" / "sub").mkdir(parents=True)
    store = checkpoints_dir(home / "b", home / "data")
    store.mkdir(parents=True)
    (store / "data.mdb").write_bytes(b"")
    found = find_root(str(home / "b" / "sub"), home / "data")
    assert (found.root, found.why) == (str(home / "b"), "store")


def test_with_no_mark_up_to_the_top_the_directory_itself(home: Path) -> None:
    (home / "plain" / "sub").mkdir(parents=True)
    found = find_root(str(home / "plain" / "sub"), home / "data")
    assert (found.root, found.why) == (str(home / "plain" / "sub"), "here")


def test_a_home_that_is_a_git_work_tree_is_passed_over(home: Path) -> None:
    (home / ".git").mkdir()  # dotfiles
    (home / "notes" / "sub").mkdir(parents=True)
    found = find_root(str(home / "notes" / "sub"), home / "data")
    assert (found.root, found.why) == (str(home / "notes" / "sub"), "here")


def test_the_home_directory_the_root_and_a_file_system_s_top_are_refused(home: Path) -> None:
    (home / ".git").mkdir()
    with pytest.raises(RootTooWide, match=r"your home directory.*give --root"):
        find_root(str(home), home / "data")
    with pytest.raises(RootTooWide, match="the file system's root"):
        find_root("/", home / "data")
    with pytest.raises(RootTooWide, match="the top of a file system"):
        find_root("/proc", home / "data")


def test_a_symlinked_directory_is_found_by_its_real_path(home: Path) -> None:
    (home / "proj" / ".git").mkdir(parents=True)
    (home / "proj" / "src").mkdir()
    os.symlink(home / "proj" / "src", home / "link")
    assert find_root(str(home / "link"), home / "data").root == str(home / "proj")
