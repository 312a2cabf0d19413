"""Tests for earshot.cas.ignore: git's gitignore(5) semantics, chains, fingerprints."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyfakefs.fake_filesystem import FakeFilesystem
from pyfakefs.helpers import reset_ids, set_uid

from earshot.cas import ignore
from earshot.cas.ignore import IgnoreRules

ROOT = "/repo"


def write(fs: FakeFilesystem, rel: str, data: str | bytes) -> None:
    fs.create_file(f"{ROOT}/{rel}", contents=data)


def ignored(rel: str, is_dir: bool = False) -> bool:
    """What the scanner would ask for rel, with the rules of its own directory."""
    return IgnoreRules.for_path(ROOT, rel).is_ignored(rel, is_dir)


@pytest.fixture
def repo(fs: FakeFilesystem) -> FakeFilesystem:
    fs.create_dir(f"{ROOT}/.git/info")
    return fs


# --- one pattern file ---------------------------------------------------------


def test_comments_and_blank_lines_match_nothing(repo: FakeFilesystem) -> None:
    write(repo, ".gitignore", "# a.txt\n\n   \n#\n")
    assert not ignored("a.txt")
    assert not ignored("# a.txt")
    assert not ignored("#")


def test_escaped_hash_matches_a_literal_hash(repo: FakeFilesystem) -> None:
    write(repo, ".gitignore", "\\#notes\n")
    assert ignored("#notes")
    assert not ignored("notes")


def test_escaped_bang_matches_a_literal_bang(repo: FakeFilesystem) -> None:
    write(repo, ".gitignore", "\\!important\n")
    assert ignored("!important")
    assert not ignored("important")


def test_unescaped_trailing_spaces_are_stripped(repo: FakeFilesystem) -> None:
    write(repo, ".gitignore", "a.txt   \n")
    assert ignored("a.txt")
    assert not ignored("a.txt ")


def test_backslash_escaped_trailing_space_is_kept(repo: FakeFilesystem) -> None:
    write(repo, ".gitignore", "a\\ \nb\\  \n")
    assert ignored("a ")
    assert not ignored("a")
    assert ignored("b ")
    assert not ignored("b  ")


def test_crlf_line_endings_are_understood(repo: FakeFilesystem) -> None:
    write(repo, ".gitignore", b"a.txt\r\nb.txt\r\n")
    assert ignored("a.txt")
    assert ignored("b.txt")


def test_utf8_bom_is_skipped(repo: FakeFilesystem) -> None:
    write(repo, ".gitignore", b"\xef\xbb\xbfa.txt\n")
    assert ignored("a.txt")


def test_negation_reincludes_a_matched_file(repo: FakeFilesystem) -> None:
    write(repo, ".gitignore", "*.log\n!keep.log\n")
    assert ignored("debug.log")
    assert not ignored("keep.log")


def test_last_matching_pattern_wins(repo: FakeFilesystem) -> None:
    write(repo, ".gitignore", "!keep.log\n*.log\n")
    assert ignored("keep.log")


def test_pattern_without_slash_matches_at_any_depth(repo: FakeFilesystem) -> None:
    write(repo, ".gitignore", "__pycache__\n")
    assert ignored("__pycache__", is_dir=True)
    assert ignored("a/b/__pycache__", is_dir=True)
    assert ignored("a/__pycache__")


def test_leading_slash_anchors_to_the_gitignore_directory(repo: FakeFilesystem) -> None:
    write(repo, ".gitignore", "/build\n")
    assert ignored("build", is_dir=True)
    assert not ignored("src/build", is_dir=True)


def test_middle_slash_anchors_to_the_gitignore_directory(repo: FakeFilesystem) -> None:
    write(repo, ".gitignore", "docs/_build\n")
    assert ignored("docs/_build", is_dir=True)
    assert not ignored("x/docs/_build", is_dir=True)


def test_trailing_slash_matches_directories_only(repo: FakeFilesystem) -> None:
    write(repo, ".gitignore", "out/\n")
    assert ignored("out", is_dir=True)
    assert ignored("a/out", is_dir=True)
    assert not ignored("out")


def test_negated_trailing_slash_reincludes_directories_only(repo: FakeFilesystem) -> None:
    write(repo, ".gitignore", "cache*\n!cache*/\n")
    assert not ignored("cache1", is_dir=True)
    assert ignored("cache1")


def test_star_does_not_cross_a_slash(repo: FakeFilesystem) -> None:
    write(repo, ".gitignore", "src/*.o\n")
    assert ignored("src/a.o")
    assert not ignored("src/sub/a.o")


def test_question_mark_matches_one_character(repo: FakeFilesystem) -> None:
    write(repo, ".gitignore", "a?.txt\n")
    assert ignored("ab.txt")
    assert not ignored("a.txt")
    assert not ignored("abc.txt")


def test_bracket_expressions_and_their_negation(repo: FakeFilesystem) -> None:
    write(repo, ".gitignore", "file[0-9].txt\nlog[!a-c]\n")
    assert ignored("file3.txt")
    assert not ignored("filex.txt")
    assert ignored("logd")
    assert not ignored("loga")


def test_leading_double_star_matches_in_every_directory(repo: FakeFilesystem) -> None:
    write(repo, ".gitignore", "**/foo/bar\n")
    assert ignored("foo/bar")
    assert ignored("x/y/foo/bar")
    assert not ignored("foo/x/bar")


def test_trailing_double_star_matches_inside_but_not_the_directory(
    repo: FakeFilesystem,
) -> None:
    write(repo, ".gitignore", "abc/**\n")
    assert not ignored("abc", is_dir=True)
    assert ignored("abc/x")
    assert ignored("abc/x/y", is_dir=True)


def test_middle_double_star_matches_zero_or_more_directories(repo: FakeFilesystem) -> None:
    write(repo, ".gitignore", "a/**/b\n")
    assert ignored("a/b")
    assert ignored("a/x/b")
    assert ignored("a/x/y/b")
    assert not ignored("a/x/c")


def test_double_star_inside_a_segment_is_a_plain_star(repo: FakeFilesystem) -> None:
    write(repo, ".gitignore", "x/a**z\n")
    assert ignored("x/abcz")
    assert not ignored("x/a/b/z")


def test_escaped_slash_is_a_separator(repo: FakeFilesystem) -> None:
    write(repo, ".gitignore", "a\\/b\n")
    assert ignored("a/b")


def test_malformed_patterns_match_nothing(repo: FakeFilesystem) -> None:
    write(repo, ".gitignore", "trailing\\\n[z-a]\n!\n/\n[unclosed\nkept.txt\n")
    assert not ignored("trailing")
    assert not ignored("z")
    assert not ignored("[unclosed")
    assert ignored("kept.txt")  # a bad pattern drops itself, not its file's others


# --- the chain ------------------------------------------------------------------


def test_deeper_gitignore_negation_overrides_root_pattern(repo: FakeFilesystem) -> None:
    write(repo, ".gitignore", "*.log\n")
    write(repo, "src/.gitignore", "!keep.log\n")
    assert not ignored("src/keep.log")
    assert ignored("keep.log")


def test_deeper_gitignore_pattern_overrides_root_negation(repo: FakeFilesystem) -> None:
    write(repo, ".gitignore", "!*.log\n")
    write(repo, "src/.gitignore", "*.log\n")
    assert ignored("src/a.log")


def test_anchored_pattern_in_nested_gitignore_is_relative_to_it(repo: FakeFilesystem) -> None:
    write(repo, "src/.gitignore", "/gen\nsub/out\n")
    assert ignored("src/gen", is_dir=True)
    assert ignored("src/sub/out")
    assert not ignored("gen", is_dir=True)
    assert not ignored("src/x/gen", is_dir=True)


def test_info_exclude_is_read_when_dot_git_is_a_directory(repo: FakeFilesystem) -> None:
    write(repo, ".git/info/exclude", "secret\n")
    assert ignored("secret")


def test_info_exclude_of_a_gitfile_is_read_from_the_repository_it_names(
    fs: FakeFilesystem,
) -> None:
    # A linked worktree: .git names its git dir, whose commondir names the repository.
    write(fs, ".git", "gitdir: /main/.git/worktrees/wt\n")
    fs.create_file("/main/.git/worktrees/wt/commondir", contents="../..\n")
    fs.create_file("/main/.git/info/exclude", contents="secret\n")
    assert ignored("secret")


def test_info_exclude_has_the_lowest_priority(repo: FakeFilesystem) -> None:
    write(repo, ".git/info/exclude", "!a.txt\nb.txt\n")
    write(repo, ".gitignore", "a.txt\n!b.txt\n")
    assert ignored("a.txt")
    assert not ignored("b.txt")


def test_earshotignore_overrides_gitignore_at_the_same_level(repo: FakeFilesystem) -> None:
    write(repo, ".gitignore", "!*.bin\n.env\n")
    write(repo, ".earshotignore", "*.bin\n!.env\n")
    assert ignored("a.bin")
    assert not ignored(".env")


def test_deeper_gitignore_overrides_shallower_earshotignore(repo: FakeFilesystem) -> None:
    write(repo, ".earshotignore", "*.bin\n")
    write(repo, "src/.gitignore", "!*.bin\n")
    assert not ignored("src/a.bin")


def test_earshotignore_without_gitignore_is_read(repo: FakeFilesystem) -> None:
    write(repo, "src/.earshotignore", "big.dat\n")
    assert ignored("src/big.dat")


def test_no_ignore_files_ignore_nothing(fs: FakeFilesystem) -> None:
    fs.create_dir(ROOT)
    assert not ignored("a.txt")
    assert not ignored("src", is_dir=True)


# --- descend and for_path ---------------------------------------------------------


def test_descend_returns_self_without_io_when_listing_has_no_ignore_file(
    repo: FakeFilesystem, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(repo, "src/.gitignore", "a.py\n")  # present, but not in the listing given
    rules = IgnoreRules.for_root(ROOT)
    reads: list[str] = []
    monkeypatch.setattr(ignore, "_read", lambda path, follow: reads.append(path))
    assert rules.descend("src", f"{ROOT}/src", ["a.py", "b"]) is rules
    assert reads == []


def test_descend_returns_self_when_directory_has_no_ignore_file(repo: FakeFilesystem) -> None:
    repo.create_dir(f"{ROOT}/src")
    rules = IgnoreRules.for_root(ROOT)
    assert rules.descend("src", f"{ROOT}/src") is rules


def test_descend_reads_an_ignore_file_named_in_the_listing(repo: FakeFilesystem) -> None:
    write(repo, "src/.gitignore", "a.py\n")
    rules = IgnoreRules.for_root(ROOT).descend("src", f"{ROOT}/src", [".gitignore", "a.py"])
    assert rules.is_ignored("src/a.py", False)


def test_descend_leaves_the_parent_rules_unchanged(repo: FakeFilesystem) -> None:
    write(repo, "src/.gitignore", "a.py\n")
    parent = IgnoreRules.for_root(ROOT)
    before = parent.fingerprint
    parent.descend("src", f"{ROOT}/src")
    assert not parent.is_ignored("a.py", False)
    assert parent.fingerprint == before


def test_for_path_reads_only_the_ancestors_of_the_path(repo: FakeFilesystem) -> None:
    write(repo, "a/.gitignore", "x\n")
    write(repo, "a/b/.gitignore", "!x\n")
    write(repo, "a/c/.gitignore", "y\n")
    rules = IgnoreRules.for_path(ROOT, "a/b/x")
    walked = IgnoreRules.for_root(ROOT).descend("a", f"{ROOT}/a").descend("a/b", f"{ROOT}/a/b")
    assert rules.fingerprint == walked.fingerprint
    assert not rules.is_ignored("a/b/x", False)
    assert not rules.is_ignored("a/b/y", False)


def test_for_path_below_an_ignored_directory_ignores_everything(repo: FakeFilesystem) -> None:
    write(repo, ".gitignore", "build/\n")
    write(repo, "build/x/.gitignore", "!keep\n")  # cannot re-include below an excluded dir
    rules = IgnoreRules.for_path(ROOT, "build/x/keep")
    assert rules.is_ignored("build/x/keep", False)
    assert not IgnoreRules.for_path(ROOT, "src/keep").is_ignored("src/keep", False)


def test_for_path_of_a_top_level_entry_is_the_root_rules(repo: FakeFilesystem) -> None:
    write(repo, ".gitignore", "x\n")
    rules = IgnoreRules.for_path(ROOT, "x")
    assert rules.fingerprint == IgnoreRules.for_root(ROOT).fingerprint
    assert rules.is_ignored("x", False)


# --- files that are odd ------------------------------------------------------------


def test_unreadable_gitignore_counts_as_empty(repo: FakeFilesystem) -> None:
    write(repo, ".gitignore", "a.txt\n")
    os.chmod(f"{ROOT}/.gitignore", 0)
    assert IgnoreRules.for_root(ROOT).is_ignored("a.txt", False)  # root reads anything
    set_uid(1000)
    try:
        with pytest.raises(PermissionError), open(f"{ROOT}/.gitignore", "rb"):
            pass
        rules = IgnoreRules.for_root(ROOT)
    finally:
        reset_ids()
    assert not rules.is_ignored("a.txt", False)


def test_gitignore_that_is_a_directory_counts_as_absent(repo: FakeFilesystem) -> None:
    repo.create_dir(f"{ROOT}/.gitignore")
    rules = IgnoreRules.for_root(ROOT)
    assert rules.descend("src", f"{ROOT}/src", [".gitignore"]) is rules


def test_symlinked_gitignore_is_not_followed(repo: FakeFilesystem) -> None:
    write(repo, "shared", "a.txt\n")
    repo.create_symlink(f"{ROOT}/.gitignore", f"{ROOT}/shared")
    assert not ignored("a.txt")


def test_non_utf8_gitignore_matches_the_same_bytes_in_names(repo: FakeFilesystem) -> None:
    write(repo, ".gitignore", b"caf\xe9\n\xff*\n")
    assert ignored(os.fsdecode(b"caf\xe9"))
    assert ignored(os.fsdecode(b"\xffanything"))
    assert not ignored("café")


def test_undecodable_names_are_matched_without_crashing(repo: FakeFilesystem) -> None:
    write(repo, ".gitignore", "*.tmp\nd?r/\n")
    assert ignored(os.fsdecode(b"\x80\xfe.tmp"))
    assert ignored(os.fsdecode(b"d\xffr"), is_dir=True)
    assert not ignored(os.fsdecode(b"sub/\x80/a.txt"))


def test_question_mark_matches_one_byte_as_in_git(repo: FakeFilesystem) -> None:
    write(repo, ".gitignore", "?\n??.txt\n")
    assert not ignored("é")  # two bytes in UTF-8
    assert ignored("é.txt")


def test_lone_surrogate_that_os_never_gives_does_not_crash(repo: FakeFilesystem) -> None:
    write(repo, ".gitignore", "*\n")
    assert IgnoreRules.for_root(ROOT).is_ignored("\ud800", False)


# --- fingerprint ---------------------------------------------------------------------


def test_fingerprint_is_equal_for_equal_chains(repo: FakeFilesystem) -> None:
    write(repo, ".gitignore", "*.log\n")
    write(repo, "src/.gitignore", "x\n")
    first = IgnoreRules.for_path(ROOT, "src/a").fingerprint
    assert len(first) >= 16
    assert IgnoreRules.for_path(ROOT, "src/a").fingerprint == first


def test_fingerprint_changes_when_a_nested_gitignore_changes(repo: FakeFilesystem) -> None:
    write(repo, ".gitignore", "*.log\n")
    write(repo, "src/.gitignore", "x\n")
    before = IgnoreRules.for_path(ROOT, "src/a").fingerprint
    root_before = IgnoreRules.for_root(ROOT).fingerprint
    with open(f"{ROOT}/src/.gitignore", "w") as f:
        f.write("y\n")
    assert IgnoreRules.for_path(ROOT, "src/a").fingerprint != before
    assert IgnoreRules.for_root(ROOT).fingerprint == root_before


def test_fingerprint_changes_when_info_exclude_changes(repo: FakeFilesystem) -> None:
    before = IgnoreRules.for_root(ROOT).fingerprint
    write(repo, ".git/info/exclude", "x\n")
    assert IgnoreRules.for_root(ROOT).fingerprint != before


def test_fingerprint_changes_when_an_earshotignore_appears(repo: FakeFilesystem) -> None:
    write(repo, "src/.gitignore", "x\n")
    before = IgnoreRules.for_path(ROOT, "src/a").fingerprint
    write(repo, "src/.earshotignore", "y\n")
    assert IgnoreRules.for_path(ROOT, "src/a").fingerprint != before


def test_fingerprint_tells_the_same_file_at_two_levels_apart(repo: FakeFilesystem) -> None:
    write(repo, "a/.gitignore", "/x\n")
    write(repo, "b/.gitignore", "/x\n")
    a = IgnoreRules.for_path(ROOT, "a/f").fingerprint
    assert a != IgnoreRules.for_path(ROOT, "b/f").fingerprint


# --- against git itself ----------------------------------------------------------------

# Pattern pieces git and earshot agree on; git's "/a**" prefix quirk and brackets
# that span a "/" are documented omissions, so their pieces are left out.
ATOMS = ["a", "b", "ab", "*", "?", "**", "[ab]", "[!a]", "*.log", "a*", ".c", "\\!y", "\\*"]
NAMES = ["a", "b", "ab", ".c", "b.log", "!y", "é"]

patterns = st.builds(
    lambda neg, lead, segs, trail: ("!" if neg else "") + lead + "/".join(segs) + trail,
    st.booleans(),
    st.sampled_from(["", "", "/"]),
    st.lists(st.sampled_from(ATOMS), min_size=1, max_size=3),
    st.sampled_from(["", "", "/"]),
)
pattern_files = st.lists(patterns, min_size=1, max_size=5).map("\n".join)
trees = st.lists(
    st.lists(st.sampled_from(NAMES), min_size=1, max_size=3).map("/".join),
    min_size=1,
    max_size=8,
)


@pytest.fixture(scope="module")
def git() -> Iterator[str]:
    exe = shutil.which("git")
    if exe is None:
        pytest.skip("git is not installed")
    yield exe


def scanner_view(root: str, rel: str, is_dir: bool) -> bool:
    """Ignored as the scanner sees it: any ignored ancestor hides the path."""
    parts = rel.split("/")
    for i in range(1, len(parts) + 1):
        rules = IgnoreRules.for_path(root, "/".join(parts[:i]))
        if rules.is_ignored("/".join(parts[:i]), is_dir or i < len(parts)):
            return True
    return False


@settings(max_examples=50, deadline=None)
@given(root_rules=pattern_files, nested_rules=pattern_files, exclude=pattern_files, paths=trees)
def test_is_ignored_agrees_with_git_check_ignore(
    git: str, root_rules: str, nested_rules: str, exclude: str, paths: list[str]
) -> None:
    files = set(paths)
    dirs = {p.rsplit("/", i)[0] for p in files for i in range(1, p.count("/") + 1)}
    files -= dirs
    env = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
    with tempfile.TemporaryDirectory() as root:
        subprocess.run([git, "init", "-q", root], check=True, env=env, capture_output=True)
        for d in dirs:
            os.makedirs(os.path.join(root, d), exist_ok=True)
        for name in files:
            open(os.path.join(root, name), "w").close()
        with open(os.path.join(root, ".git", "info", "exclude"), "w") as f:
            f.write(exclude + "\n")
        with open(os.path.join(root, ".gitignore"), "w") as f:
            f.write(root_rules + "\n")
        if dirs:
            with open(os.path.join(root, min(dirs), ".gitignore"), "w") as f:
                f.write(nested_rules + "\n")
        everything = sorted(files | dirs)
        out = subprocess.run(
            [git, "-C", root, "check-ignore", "--stdin", "-z"],
            input="\0".join(everything).encode() + b"\0",
            capture_output=True,
            env=env,
        )
        assert out.returncode in (0, 1), out.stderr
        by_git = {os.fsdecode(p) for p in out.stdout.split(b"\0") if p}
        for rel in everything:
            assert scanner_view(root, rel, rel in dirs) == (rel in by_git), rel
