"""What git ignores is still the user's: undo of batches that touch ignored paths.

Each case is one a person met on a real repository: an agent deleting an
ignored ``.env`` or local database, a batch that edits ``.gitignore`` or
checks out an older commit whose rules differ, a moved directory holding
ignored content, a directory replaced by a file or a link. Every test
compares whole trees (content, modes, links) before and after, through the
real ``earshot`` script, in-process and through the watch daemon.
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

pytestmark = pytest.mark.both_modes

if TYPE_CHECKING:
    from earshot_cli import Cli

needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


def listing(tree: Any, root: Path) -> dict[str, Any]:
    """The whole tree but .git: what undo must bring back exactly."""
    return {k: v for k, v in tree(root).items() if k != ".git" and not k.startswith(".git/")}


def test_an_ignored_file_a_script_deletes_is_kept_and_undone(cli: Cli, tree: Any) -> None:
    # No rm to read targets from: the .env must have been kept already.
    cli.write(".gitignore", ".env\n")
    cli.write(".env", "API_KEY=secret\n")
    before = listing(tree, cli.root)
    cli.run("bash", "python3 -c 'import os; os.remove(\".env\")'")
    cli.run("undo")
    assert listing(tree, cli.root) == before


def test_an_agents_rm_of_ignored_files_is_undone_byte_exact(cli: Cli, tree: Any) -> None:
    cli.write(".gitignore", ".env\ndata/\n")
    cli.write(".env", "API_KEY=secret\n")
    cli.write("data/local.db", b"SQLite format 3\x00" + bytes(range(256)) * 40)
    cli.write("data/notes/today.md", "remember\n")
    cli.write("app.py", "print(1)\n")
    before = listing(tree, cli.root)
    cli.run("bash", "rm -f .env; rm -rf data; echo x > app.py")
    batch = cli.json("log")["batches"][-1]
    gone = {c["path"] for c in batch["changes"] if c["after_kind"] is None}
    assert {".env", "data/local.db", "data/notes/today.md"} <= gone
    cli.run("undo")
    assert listing(tree, cli.root) == before


def test_an_edit_of_gitignore_that_shows_an_ignored_file_does_not_make_undo_delete_it(
    cli: Cli, tree: Any
) -> None:
    cli.write(".gitignore", "secret.env\n*.log\n")
    cli.write("secret.env", "TOKEN=1\n")
    cli.write("a.txt", "a\n")
    before = listing(tree, cli.root)
    cli.run("bash", "printf '*.log\\n' > .gitignore")
    cli.run("undo")
    assert listing(tree, cli.root) == before


def test_an_ignored_file_too_large_to_keep_is_never_created_by_a_batch_that_shows_it(
    cli: Cli, tree: Any
) -> None:
    # Over the limit for ignored files: kept as existence only. A batch that
    # un-ignores it finds it existed before, so undo leaves it in place.
    cli.write(".gitignore", "weights.bin\n")
    cli.write("weights.bin", b"w" * 300)
    before = listing(tree, cli.root)
    env = cli.env(EARSHOT_IGNORED_MAX_FILE="100")
    cli.run("bash", "printf '' > .gitignore", env=env)
    undo = cli.json("undo", env=env)
    assert listing(tree, cli.root) == before
    assert undo["deleted"] == [] and undo["conflicts"] == []


@needs_git
def test_undo_of_a_checkout_of_an_older_commit_keeps_the_files_its_rules_did_not_ignore(
    cli: Cli, tree: Any, git: Any
) -> None:
    # The shape of numpy at v2.4.0 against main: the newer .gitignore ignores
    # an agent's files that the older one does not mention.
    root = cli.root
    git(root, "init", "-q")
    cli.write(".gitignore", "build/\n")
    cli.write("setup.py", "version = 1\n")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "old")
    git(root, "tag", "v1")
    cli.write(".gitignore", "build/\nAGENTS.md\nCLAUDE.md\n.claude/\n.aider*\n")
    cli.write("setup.py", "version = 2\n")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "new")
    for rel in ("AGENTS.md", "CLAUDE.md", ".claude/settings.json", ".aider.chat.history.md"):
        cli.write(rel, f"{rel}: the person's own\n")
    before = listing(tree, root)
    cli.run("bash", "git checkout -q v1")
    assert (root / "setup.py").read_text() == "version = 1\n"
    undo = cli.json("undo")
    assert undo["deleted"] == [] and undo["conflicts"] == []
    assert listing(tree, root) == before


def test_a_moved_directory_with_ignored_content_is_moved_back_by_undo(cli: Cli, tree: Any) -> None:
    # data/cache is a cache (its tag): existence only, found again by its inode.
    cli.write(".gitignore", "/data/cache/\n/data2/cache/\n")
    cli.write("data/a.csv", "1,2\n")
    cli.write("data/cache/CACHEDIR.TAG", "Signature: 8a477f597d28d172789f06886806bc55\n")
    cli.write("data/cache/model.bin", b"m" * 5000)
    before = listing(tree, cli.root)
    cli.run("bash", "mv data data2")
    moved = listing(tree, cli.root)
    cli.run("undo")
    assert listing(tree, cli.root) == before
    cli.run("redo")
    assert listing(tree, cli.root) == moved


@pytest.mark.slow
def test_a_moved_directory_holding_a_70_mib_ignored_file_is_moved_back_without_a_copy(
    cli: Cli, tree: Any
) -> None:
    cli.write(".gitignore", "*.bin\n")
    big = cli.root / "models" / "weights.bin"
    big.parent.mkdir()
    with open(big, "wb") as out:
        for _ in range(70):
            out.write(os.urandom(1 << 20))
    cli.write("models/README", "weights\n")
    ino = big.stat().st_ino
    before = listing(tree, cli.root)
    cli.run("bash", "mv models models2")
    cli.run("undo")
    assert listing(tree, cli.root) == before
    assert big.stat().st_ino == ino  # renamed back, not copied
    stats = cli.json("stats")
    assert stats["content_bytes"] < 1 << 20  # the 70 MiB were never stored


@pytest.mark.parametrize(
    "replace",
    ["rm -rf d && echo file > d", "rm -rf d && ln -s target d", "rm -rf d && mkdir d"],
)
def test_a_directory_replaced_by_a_file_or_link_is_undone_and_redone_exactly(
    cli: Cli, tree: Any, replace: str
) -> None:
    cli.write("d/x.txt", "x\n")
    cli.write("d/sub/y.txt", "y\n")
    cli.write("earlier.txt", "1\n")
    cli.run("bash", "echo 2 > earlier.txt")  # an earlier batch, to undo after
    before = listing(tree, cli.root)
    cli.run("bash", replace)
    after = listing(tree, cli.root)
    undo = cli.json("undo")
    assert undo["conflicts"] == [] and undo["kept"] == []
    assert listing(tree, cli.root) == before
    cli.run("redo")
    assert listing(tree, cli.root) == after
    cli.run("undo")
    assert listing(tree, cli.root) == before
    cli.run("undo")  # the earlier batch: not blocked by the replacement
    assert (cli.root / "earlier.txt").read_text() == "1\n"


def test_a_file_replaced_by_a_directory_is_undone_and_redone_exactly(cli: Cli, tree: Any) -> None:
    cli.write("f", "a file\n")
    before = listing(tree, cli.root)
    cli.run("bash", "rm f && mkdir -p f/inner && echo z > f/inner/z.txt")
    after = listing(tree, cli.root)
    cli.run("undo")
    assert listing(tree, cli.root) == before
    cli.run("redo")
    assert listing(tree, cli.root) == after


def test_an_undo_that_keeps_a_directory_it_cannot_empty_marks_the_batch_done(
    cli: Cli,
) -> None:
    cli.write("first.txt", "1\n")
    cli.run("bash", "echo one > first.txt")
    cli.run("bash", "mkdir made && echo agent > a.txt")
    (cli.root / "made" / "mine.txt").write_text("the person's\n")  # not the batch's
    undo = cli.json("undo", expect=3)  # done, with a path kept
    assert undo["deleted"] == ["a.txt"]
    assert undo["kept"] == [{"path": "made", "reason": "directory not empty; kept"}]
    log = cli.json("log")["batches"]
    assert log[1]["undone"] is True  # done: no retry would remove made/
    cli.run("undo")  # goes on to the batch before it
    assert (cli.root / "first.txt").read_text() == "1\n"
    assert (cli.root / "made" / "mine.txt").read_text() == "the person's\n"


def test_what_undo_cannot_take_back_is_said_on_stderr_in_log_and_in_json(cli: Cli) -> None:
    cli.write(".gitignore", ".env\nvendor/\n")
    cli.write(".earshotignore", "*.key\n")
    cli.write(".env", "K=" + "v" * 200 + "\n")  # over the limit set below: existence only
    cli.write("vendor/CACHEDIR.TAG", "Signature: 8a477f597d28d172789f06886806bc55\n")
    cli.write("id.key", "private\n")
    # No budget to read what rm names first: .env stays existence only.
    env = cli.env(EARSHOT_IGNORED_MAX_FILE="100", EARSHOT_TARGET_BUDGET="0")
    ran = cli.run("bash", "rm -rf .env vendor id.key", env=env)
    said = [line for line in ran.stderr.splitlines() if "not covered" in line]
    assert said == [
        "earshot: not covered by undo: .env (ignored, deleted)",
        "earshot: not covered by undo: id.key (excluded by .earshotignore, deleted)",
        "earshot: not covered by undo: vendor/ (a regenerable cache, deleted)",
    ]
    log = cli.run("log", env=env).stdout.splitlines()[-1]
    assert "3 paths not covered by undo" in log
    batch = cli.json("log", env=env)["batches"][-1]
    assert batch["uncovered"] == [
        {"path": ".env", "reason": "ignored", "change": "deleted"},
        {"path": "id.key", "reason": "excluded by .earshotignore", "change": "deleted"},
        {"path": "vendor", "reason": "a regenerable cache", "change": "deleted"},
    ]


def test_rm_of_a_directory_kept_as_existence_is_recorded_first_and_undone_exactly(
    cli: Cli, tree: Any
) -> None:
    # data/ is over every limit: too many files for the budget of an ignored
    # directory, one file over the size limit. rm names it: it is read first.
    env = cli.env(
        EARSHOT_IGNORED_DIR_FILES="3", EARSHOT_IGNORED_MAX_FILE="1K", EARSHOT_MAX_FILE_SIZE="2M"
    )
    cli.write(".gitignore", "data/\n")
    for i in range(8):
        cli.write(f"data/part{i}.csv", f"{i},x\n" * 300)
    cli.write("data/raw/big.bin", os.urandom(3 << 20))
    cli.run("snapshot", env=env)  # data/ is existence only now
    before = listing(tree, cli.root)
    ran = cli.run("bash", "rm -rf data", env=env)
    assert "not covered" not in ran.stderr, ran.stderr
    cli.run("undo", env=env)
    assert listing(tree, cli.root) == before


def test_what_the_target_budget_cannot_take_is_said(cli: Cli, tree: Any) -> None:
    env = cli.env(EARSHOT_IGNORED_MAX_FILE="1K", EARSHOT_TARGET_BUDGET="3K")
    cli.write(".gitignore", "*.dat\n")
    for i in range(4):
        cli.write(f"d/{i}.dat", "z" * 2000)  # 2 KB each: one fits the 3 KB budget
    ran = cli.run("bash", "rm -rf d", env=env)
    said = [line for line in ran.stderr.splitlines() if "not covered" in line]
    assert len(said) == 3, ran.stderr
    undo = cli.json("undo", env=env, expect=3)
    assert len(undo["restored"]) == 1


def test_a_batch_that_shows_a_directory_kept_as_existence_does_not_make_undo_delete_it(
    cli: Cli, tree: Any
) -> None:
    # big/ is over the budget for an ignored directory: each entry's existence
    # only. The batch un-ignores it, so its files are recorded after it: they
    # were there before, the very same files.
    env = cli.env(EARSHOT_IGNORED_DIR_FILES="2")
    cli.write(".gitignore", "big/\n")
    for i in range(4):
        cli.write(f"big/{i}.txt", f"{i}\n")
    before = listing(tree, cli.root)
    cli.run("bash", "printf '' > .gitignore", env=env)
    undo = cli.json("undo", env=env)  # big/ was listed: each file is as it was
    assert (undo["deleted"], undo["conflicts"], undo["kept"]) == ([], [], [])
    assert listing(tree, cli.root) == before


def test_a_batch_that_shows_a_cache_kept_as_one_entry_does_not_make_undo_delete_it(
    cli: Cli, tree: Any
) -> None:
    # An ignored node_modules is a regenerable cache: the directory's existence
    # only, nothing of what is in it. Un-ignored by the batch, its files are
    # recorded after it, "inside an unrecorded directory" before: not created.
    cli.write(".gitignore", "node_modules/\n")
    cli.write("node_modules/pkg/index.js", "module.exports = 1\n")
    cli.write("node_modules/pkg/package.json", "{}\n")
    before = listing(tree, cli.root)
    cli.run("bash", "printf '' > .gitignore")
    undo = cli.json("undo", expect=3)  # whether the batch made them is not known: kept
    assert (undo["deleted"], undo["conflicts"]) == ([], [])
    assert sorted(k["path"] for k in undo["kept"]) == [
        "node_modules/pkg/index.js",
        "node_modules/pkg/package.json",
    ]
    assert listing(tree, cli.root) == before


def test_a_write_into_a_cache_or_an_excluded_path_is_undone(cli: Cli, tree: Any) -> None:
    # What a write names is recorded whatever the rules say, before and after.
    cli.write(".gitignore", "node_modules/\n")
    cli.write(".earshotignore", "*.secret\n")
    cli.write("node_modules/pkg/index.js", "old\n")
    cli.write("app.secret", "old secret\n")
    before = listing(tree, cli.root)
    cli.run("write", "node_modules/pkg/index.js", stdin="patched\n")
    cli.run("write", "app.secret", stdin="new secret\n")
    cli.run("undo", "2")
    assert listing(tree, cli.root) == before


# -- found by attacking it: listed directories, moves to recorded names, budgets -----------

SMALL_BUDGET = {"EARSHOT_IGNORED_DIR_FILES": "3", "EARSHOT_IGNORED_MAX_FILE": "1K"}


def test_a_file_moved_out_of_a_directory_over_the_budget_is_moved_back(cli: Cli, tree: Any) -> None:
    env = cli.env(**SMALL_BUDGET)
    cli.write(".gitignore", "data/\n")
    for i in range(6):
        cli.write(f"data/f{i}", f"row {i}\n")
    cli.run("snapshot", env=env)
    before = listing(tree, cli.root)
    cli.run("bash", "mv data/f1 results.csv", env=env)
    cli.run("undo", env=env)
    assert listing(tree, cli.root) == before


@pytest.mark.parametrize(
    ("setup", "command"),
    [
        ("model.bin", "mv model.bin model.safetensors"),
        ("big/f0", "mv big big2"),
        ("app/node_modules/pkg/index.js", "mv app/node_modules app/nm"),
    ],
)
def test_what_is_not_held_moved_to_a_recorded_name_is_moved_back_not_deleted(
    cli: Cli, tree: Any, setup: str, command: str
) -> None:
    env = cli.env(**SMALL_BUDGET)
    cli.write(".gitignore", "*.bin\nbig/\nnode_modules/\n")
    cli.write(setup, b"x" * 3000)
    for i in range(1, 6):
        cli.write(f"big/f{i}", f"{i}\n")
    cli.run("snapshot", env=env)
    before = listing(tree, cli.root)
    inode = (cli.root / setup).stat().st_ino
    ran = cli.run("bash", command, env=env)
    assert "not covered" not in ran.stderr, ran.stderr  # a move: undo takes it back
    after = listing(tree, cli.root)
    cli.run("undo", env=env)
    assert listing(tree, cli.root) == before
    if "node_modules" in setup:  # not held where it went either: renamed back
        assert (cli.root / setup).stat().st_ino == inode
    cli.run("redo", env=env)
    assert listing(tree, cli.root) == after


def test_a_write_over_a_file_not_held_is_said(cli: Cli) -> None:
    env = cli.env(**SMALL_BUDGET)
    cli.write(".gitignore", "*.db\n")
    cli.write("app.db", b"d" * 5000)
    ran = cli.run("bash", 'echo "{}" > app.db', env=env)
    assert "earshot: not covered by undo: app.db (ignored, changed)" in ran.stderr


def test_a_deletion_inside_a_directory_over_the_budget_is_seen_and_said(cli: Cli) -> None:
    env = cli.env(**SMALL_BUDGET)
    cli.write(".gitignore", "data/\n")
    for i in range(6):
        cli.write(f"data/sub/f{i}", f"row {i}\n")
    cli.run("snapshot", env=env)
    ran = cli.run("bash", "python3 -c 'import os; os.unlink(\"data/sub/f4\")'", env=env)
    assert "earshot: not covered by undo: data/sub/f4 (ignored, deleted)" in ran.stderr


def test_rm_inside_a_directory_over_the_budget_is_undone_without_force(cli: Cli, tree: Any) -> None:
    env = cli.env(**SMALL_BUDGET)
    cli.write(".gitignore", "big/\n")
    for d in range(3):
        for i in range(4):
            cli.write(f"big/d{d}/f{i}", f"{d}.{i}\n")
    (cli.root / "big" / "d2" / "empty").mkdir()
    cli.run("snapshot", env=env)
    before = listing(tree, cli.root)
    cli.run("bash", "rm -rf big/d0 big/d1/f3", env=env)
    after = listing(tree, cli.root)
    undo = cli.json("undo", env=env)
    assert undo["conflicts"] == []
    assert listing(tree, cli.root) == before
    cli.run("redo", env=env)
    assert listing(tree, cli.root) == after
    cli.run("bash", "rm -rf big", env=env)
    cli.run("undo", env=env)
    assert listing(tree, cli.root) == after
    cli.run("redo", env=env)
    assert not (cli.root / "big").exists()


def test_the_target_budget_holds_for_small_files_too(cli: Cli) -> None:
    env = cli.env(EARSHOT_IGNORED_DIR_FILES="3", EARSHOT_TARGET_BUDGET="5K")
    cli.write(".gitignore", "data/\n")
    for i in range(10):
        cli.write(f"data/f{i}", b"z" * 2000)
    cli.run("snapshot", env=env)
    ran = cli.run("bash", "rm -rf data", env=env)
    said = [line for line in ran.stderr.splitlines() if "not covered" in line]
    assert len(said) == 8, ran.stderr  # two fit the 5 KB budget


def test_a_glob_that_matches_nothing_reads_nothing_first(cli: Cli) -> None:
    env = cli.env(**SMALL_BUDGET)
    cli.write(".gitignore", "*.bin\n")
    for i in range(3):
        cli.write(f"data{i}.bin", os.urandom(200_000))
    cli.run("snapshot", env=env)
    ran = cli.run("bash", "rm -f *.tmp", env=env)
    assert "not covered" not in ran.stderr
    assert cli.json("stats")["content_bytes"] < 100_000  # no .bin was read


def test_an_undo_that_cannot_bring_back_one_half_of_a_move_keeps_the_other(
    cli: Cli, tree: Any
) -> None:
    cli.write("src/a.py", "committed\n")
    cli.write("src/b.py", "uncommitted work\n")
    cli.run("bash", "mv src src2")
    cli.write("src", "the person's note\n")  # in the way of src/ coming back
    undo = cli.json("undo", expect=3)
    assert sorted(undo["conflicts"]) == ["src/a.py", "src/b.py"]
    assert (cli.root / "src2" / "b.py").read_text() == "uncommitted work\n"


@pytest.mark.parametrize("read_first", [True, False], ids=["cache-read-first", "cache-not-held"])
def test_a_new_directory_given_a_freed_inode_is_not_taken_for_the_old_one(
    cli: Cli, read_first: bool
) -> None:
    # ext4 hands a freed inode to the next directory made: its mtime tells.
    # With no budget to read it before the rm, .cache is existence only; else
    # this small cache is read first and comes back.
    env = cli.env() if read_first else cli.env(EARSHOT_TARGET_BUDGET="0")
    cli.write(".gitignore", ".cache/\ncache2/\n")
    for attempt in range(3):
        cli.write(f".cache/v{attempt}", "old\n")
        cli.run("bash", "true", env=env)
        cli.run("bash", "rm -rf .cache && mkdir cache2 && echo new > cache2/x", env=env)
        undo = cli.json("undo", expect=None, env=env)
        # cache2 is the batch's: it goes; .cache is never cache2 moved back.
        assert undo["moved"] == [], undo
        assert not (cli.root / "cache2").exists()
        if not read_first:
            assert not (cli.root / ".cache").exists()
            continue
        assert sorted(p.name for p in (cli.root / ".cache").iterdir()) == [
            f"v{i}" for i in range(attempt + 1)
        ]


# -- found by attacking it again: moves then changes, undo N, moves onto held names ----------


def aged(cli: Cli, *paths: str) -> None:
    """Files as a person's are: written well before the batch that follows."""
    past = time.time_ns() - 10 * 1_000_000_000
    for path in paths:
        os.utime(cli.root / path, ns=(past, past))


@pytest.mark.parametrize("undo", [["undo", "2"], ["undo", "undo"]], ids=["undo-2", "one-by-one"])
def test_a_file_not_held_moved_to_a_held_name_then_changed_is_undone(
    cli: Cli, tree: Any, undo: list[str]
) -> None:
    env = cli.env(**SMALL_BUDGET)
    cli.write(".gitignore", "*.bin\n")
    cli.write("model.bin", os.urandom(5000))
    aged(cli, "model.bin")
    cli.run("snapshot", env=env)
    before = listing(tree, cli.root)
    cli.run("bash", "mv model.bin new.txt", env=env)
    cli.run("bash", "echo more >> new.txt", env=env)
    for args in ([undo[0], undo[1]],) if undo[1] == "2" else (["undo"], ["undo"]):
        cli.run(*args, env=env)
    assert listing(tree, cli.root) == before


def test_a_file_not_held_moved_to_a_held_name_and_touched_is_undone(cli: Cli, tree: Any) -> None:
    env = cli.env(**SMALL_BUDGET)
    cli.write(".gitignore", "*.bin\n")
    cli.write("model.bin", os.urandom(5000))
    aged(cli, "model.bin")
    cli.run("snapshot", env=env)
    before = listing(tree, cli.root)
    cli.run("bash", "mv model.bin new.txt", env=env)
    os.utime(cli.root / "new.txt")  # a person's touch, outside any batch
    cli.run("undo", env=env)
    assert listing(tree, cli.root) == before


def test_a_file_not_held_moved_and_changed_in_one_batch_is_never_deleted(cli: Cli) -> None:
    # Its content before was never held, and its identity changed with the
    # write: nothing proves what it was. The new name holds its only copy.
    env = cli.env(**SMALL_BUDGET)
    cli.write(".gitignore", "*.bin\n")
    data = os.urandom(5000)
    cli.write("model.bin", data)
    cli.run("snapshot", env=env)
    cli.run("bash", "mv model.bin new.txt && echo more >> new.txt", env=env)
    undo = cli.json("undo", env=env, expect=3)
    assert (cli.root / "new.txt").read_bytes() == data + b"more\n"
    kept = dict((k["path"], k["reason"]) for k in undo["kept"])
    assert "holds the inode model.bin had" in kept["new.txt"], kept


def test_a_directory_over_the_budget_moved_away_and_back_with_an_rm_is_undone(
    cli: Cli, tree: Any
) -> None:
    env = cli.env(**SMALL_BUDGET)
    cli.write(".gitignore", "data/\n")
    for i in range(5):
        cli.write(f"data/f{i}", f"row {i}\n")
    cli.write("data/s.txt", "s\n")
    aged(cli, *(f"data/f{i}" for i in range(5)), "data/s.txt")
    cli.run("snapshot", env=env)
    before = listing(tree, cli.root)
    cli.run("bash", "mv data data2", env=env)
    ran = cli.run("bash", "mv data2 data && rm data/s.txt", env=env)
    assert "not covered" not in ran.stderr, ran.stderr  # held since the first move
    cli.run("undo", "2", env=env)
    assert listing(tree, cli.root) == before


@needs_git
@pytest.mark.parametrize("how", ["gitignore", "checkout"])
def test_a_file_the_rules_showed_then_a_later_batch_deleted_comes_back_with_undo_n(
    cli: Cli, tree: Any, git: Any, how: str
) -> None:
    env = cli.env(**SMALL_BUDGET)
    if how == "checkout":
        cli.write("a.txt", "a\n")
        git(cli.root, "init", "-q")
        git(cli.root, "add", "-A")
        git(cli.root, "commit", "-qm", "v1")
        git(cli.root, "tag", "v1")
        cli.write(".gitignore", "*.bin\n")
        git(cli.root, "add", "-A")
        git(cli.root, "commit", "-qm", "v2")
        show, hide = "git checkout -q v1", "git checkout -q -"
    else:
        cli.write(".gitignore", "*.bin\n")
        show, hide = "printf '' > .gitignore", "printf '*.bin\\n' > .gitignore"
    cli.write("model.bin", os.urandom(5000))
    aged(cli, "model.bin")
    cli.run("snapshot", env=env)
    before = listing(tree, cli.root)
    cli.run("bash", show, env=env)
    cli.run("bash", "rm -f model.bin", env=env)
    cli.run("bash", hide, env=env)
    cli.run("undo", "3", env=env)
    assert listing(tree, cli.root) == before


@pytest.mark.parametrize("size", ["held", "over the size limit"])
def test_a_file_not_held_moved_onto_a_held_name_comes_back_and_so_does_that_name(
    cli: Cli, tree: Any, size: str
) -> None:
    env = cli.env(**SMALL_BUDGET, EARSHOT_MAX_FILE_SIZE="4K")
    cli.write(".gitignore", "*.bin\n")
    cli.write("user.txt", "mine\n")
    cli.write("d.bin", os.urandom(3000 if size == "held" else 6000))
    aged(cli, "d.bin")
    cli.run("snapshot", env=env)
    before = listing(tree, cli.root)
    cli.run("bash", "mv d.bin user.txt", env=env)
    cli.run("undo", env=env)
    assert listing(tree, cli.root) == before


def test_a_file_left_over_the_size_limit_then_edited_by_hand_is_a_conflict(cli: Cli) -> None:
    # Undo records what it overwrites whatever its size: held now, not then.
    # Only the very file the batch left (its identity) may be overwritten.
    env = cli.env(EARSHOT_MAX_FILE_SIZE="4K")
    cli.write("out.log", "small\n")
    cli.run("snapshot", env=env)
    cli.run("bash", "head -c 6000 /dev/zero > out.log", env=env)
    untouched = cli.json("undo", "--dry-run", env=env)
    assert untouched["restored"] == ["out.log"] and untouched["conflicts"] == []
    (cli.root / "out.log").write_text("typed by hand\n")
    undo = cli.json("undo", env=env, expect=3)
    assert undo["conflicts"] == ["out.log"]
    assert (cli.root / "out.log").read_text() == "typed by hand\n"


def test_a_file_shown_by_the_rules_and_changed_in_one_batch_is_said_not_covered(
    cli: Cli,
) -> None:
    # Held after the batch, but changed by it: its content before is not known.
    env = cli.env(**SMALL_BUDGET)
    cli.write(".gitignore", "*.bin\n")
    cli.write("model.bin", os.urandom(5000))
    aged(cli, "model.bin")
    cli.run("snapshot", env=env)
    ran = cli.run("bash", "printf '' > .gitignore && echo more >> model.bin", env=env)
    assert "not covered by undo: model.bin" in ran.stderr, ran.stderr
    changes = {c["path"] for c in cli.json("log", env=env)["batches"][-1]["changes"]}
    assert "model.bin" in changes


@pytest.mark.no_watcher  # the budget is the same either way; once is enough for 12,000 files
def test_rm_of_more_than_ten_thousand_files_not_held_is_undone_within_the_budget(
    cli: Cli, tree: Any
) -> None:
    env = cli.env(**SMALL_BUDGET)
    cli.write(".gitignore", "out/\n")
    out = cli.root / "out"
    out.mkdir()
    for i in range(12_000):
        (out / f"f{i}").write_bytes(b"%d\n" % i)
    cli.run("snapshot", env=env)
    before = listing(tree, cli.root)
    ran = cli.run("bash", "rm -rf out", env=env)
    assert "not covered" not in ran.stderr, ran.stderr[:500]
    cli.run("undo", env=env)
    assert listing(tree, cli.root) == before


@pytest.mark.parametrize(
    "command", ["rm -rf $PWD/out", 'rm -rf "${PWD}/out"', "rm -rf $(pwd)/out", "rm -rf link/*"]
)
def test_a_delete_named_through_pwd_or_an_in_root_link_is_recorded_first(
    cli: Cli, tree: Any, command: str
) -> None:
    env = cli.env(**SMALL_BUDGET)
    cli.write(".gitignore", "out/\n")
    for i in range(6):
        cli.write(f"out/f{i}", f"{i}\n")
    (cli.root / "link").symlink_to("out")
    cli.run("snapshot", env=env)
    before = listing(tree, cli.root)
    ran = cli.run("bash", command, env=env)
    assert "not covered" not in ran.stderr, ran.stderr
    cli.run("undo", env=env)
    assert listing(tree, cli.root) == before


def test_a_directory_that_falls_within_the_budget_between_batches_is_kept_again(
    cli: Cli, tree: Any
) -> None:
    # Over the budget (1,000 files by default, as the daemon has it): each
    # entry's existence only. A person deletes five of its files; within the
    # budget now, its content is kept, with the daemon as by a walk, and a
    # script's delete of it (no rm to read targets from) is undone whole.
    cli.write(".gitignore", "out/\n")
    out = cli.root / "out"
    out.mkdir()
    for i in range(1003):
        (out / f"f{i}").write_bytes(b"%d\n" % i)
    cli.run("snapshot")
    cli.run("bash", "true")
    for i in range(5):
        (out / f"f{i}").unlink()
    before = listing(tree, cli.root)
    ran = cli.run("bash", "python3 -c 'import shutil; shutil.rmtree(\"out\")'")
    assert "not covered" not in ran.stderr, ran.stderr[:300]
    cli.run("undo")
    assert listing(tree, cli.root) == before


@pytest.mark.no_watcher  # a daemon with other limits is not trusted: each call walks
def test_limits_raised_between_calls_are_applied_at_the_next_walk(cli: Cli, tree: Any) -> None:
    cli.write(".gitignore", "out/\n")
    for i in range(5):
        cli.write(f"out/f{i}", f"{i}\n")
    cli.run("snapshot", env=cli.env(EARSHOT_IGNORED_DIR_FILES="3"))  # listed: existence
    env = cli.env(EARSHOT_IGNORED_DIR_FILES="10")  # within the budget now: kept
    cli.run("snapshot", env=env)
    before = listing(tree, cli.root)
    ran = cli.run("bash", "python3 -c 'import shutil; shutil.rmtree(\"out\")'", env=env)
    assert "not covered" not in ran.stderr, ran.stderr
    cli.run("undo", env=env)
    assert listing(tree, cli.root) == before


def test_a_file_moved_out_of_a_cache_is_kept_by_undo(cli: Cli, tree: Any) -> None:
    # A cache is one entry: what leaves it is never seen leaving. The file at
    # its new name is older than the batch and nothing undo writes back holds
    # it: it may be the only copy, so undo keeps it and says why.
    cli.write(".gitignore", "node_modules/\n")
    cli.write("node_modules/pkg/index.js", "module.exports = 42\n")
    aged(cli, "node_modules/pkg/index.js")
    cli.write("a.txt", "a\n")
    aged(cli, "a.txt")
    cli.run("snapshot")
    cli.run("bash", "mv node_modules/pkg/index.js idx.js && mv a.txt b.txt")
    undo = cli.json("undo", expect=3)
    assert (cli.root / "idx.js").read_text() == "module.exports = 42\n"
    kept = {k["path"]: k["reason"] for k in undo["kept"]}
    assert "may have come from where earshot does not look" in kept["idx.js"], kept
    # A move within what is held is undone as ever: its content comes back.
    assert (cli.root / "a.txt").read_text() == "a\n" and not (cli.root / "b.txt").exists()


ELF_OBJECT = b"\x7fELF\x02\x01\x01\x00" + bytes(range(256)) * 4


@needs_git
def test_git_clean_fdx_in_a_small_project_is_undone_with_its_build_output(
    cli: Cli, tree: Any, git: Any
) -> None:
    # Regenerable output is existence only until a command is about to delete
    # it; then a small cache directory is read whole and build output file by
    # file, and the undo of `git clean -fdx` gives the person back everything.
    root = cli.root
    cli.write(".gitignore", "dist/\n*.o\n__pycache__/\n.env\n")
    cli.write("src/main.c", "int main(void) { return 0; }\n")
    cli.write("src/mod.py", "X = 1\n")
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "init")
    cli.write("dist/bundle.js", "console.log(1)\n" * 500)
    cli.write("dist/assets/logo.svg", "<svg/>\n")
    cli.write("src/main.o", ELF_OBJECT)
    cli.write("src/__pycache__/mod.cpython-311.pyc", b"\xa7\r\r\n" + bytes(64))
    cli.write(".env", "API_KEY=secret\n")
    cli.run("snapshot")  # the output is existence only now: a cache, build output
    before = listing(tree, cli.root)
    ran = cli.run("bash", "git clean -fdxq")
    assert not (cli.root / "dist").exists() and not (cli.root / "src/main.o").exists()
    assert "not covered" not in ran.stderr, ran.stderr
    undo = cli.json("undo")
    assert (undo["kept"], undo["conflicts"]) == ([], [])
    assert listing(tree, cli.root) == before


def test_a_cache_too_large_to_read_whole_is_left_whole_and_said(cli: Cli, tree: Any) -> None:
    # node_modules holds more files than the budget for regenerable output:
    # none of it is read (half a node_modules back is worth less than none),
    # and the batch says so; the small dist/ beside it comes back.
    env = cli.env(EARSHOT_IGNORED_DIR_FILES="4")
    cli.write(".gitignore", "node_modules/\ndist/\n")
    for i in range(6):
        cli.write(f"node_modules/pkg{i}/index.js", f"module.exports = {i}\n")
    cli.write("dist/app.js", "app\n")
    cli.run("snapshot", env=env)
    ran = cli.run("bash", "rm -rf node_modules dist", env=env)
    said = [line for line in ran.stderr.splitlines() if "not covered" in line]
    assert said == ["earshot: not covered by undo: node_modules/ (a regenerable cache, deleted)"]
    undo = cli.json("undo", env=env, expect=3)  # done, node_modules kept as it is
    assert undo["restored"] == ["dist/app.js"]
    assert [k["path"] for k in undo["kept"]] == ["node_modules"]
    assert not (cli.root / "node_modules").exists()
    assert (cli.root / "dist/app.js").read_text() == "app\n"


def test_build_output_past_its_budget_stays_existence_only_and_is_said(cli: Cli) -> None:
    # Two object files fit the budget for regenerable output, two do not:
    # each one that does not is named, and the two read come back exactly.
    env = cli.env(EARSHOT_IGNORED_DIR_FILES="2")
    cli.write(".gitignore", "*.o\n")
    for i in range(4):
        cli.write(f"obj/{i}.o", ELF_OBJECT + bytes([i]))
    cli.run("snapshot", env=env)
    ran = cli.run("bash", "rm -rf obj", env=env)
    said = [line for line in ran.stderr.splitlines() if "not covered" in line]
    assert len(said) == 2 and all("(a build output, deleted)" in line for line in said), said
    undo = cli.json("undo", env=env, expect=3)
    restored = sorted(undo["restored"])
    assert len(restored) == 2
    for path in restored:
        i = int(path.split("/")[1][0])
        assert (cli.root / path).read_bytes() == ELF_OBJECT + bytes([i])


def test_caches_read_whole_take_from_one_budget_for_regenerable_output(cli: Cli) -> None:
    # Each of two caches fits the budget alone (3 files of 4), not both: the
    # one read first comes back whole, the other is left whole and said.
    env = cli.env(EARSHOT_IGNORED_DIR_FILES="4")
    cli.write(".gitignore", "dist/\ncoverage/\n")
    for name in ("dist", "coverage"):
        for i in range(3):
            cli.write(f"{name}/{i}.txt", f"{name} {i}\n")
    cli.run("snapshot", env=env)
    ran = cli.run("bash", "rm -rf dist coverage", env=env)
    said = [line for line in ran.stderr.splitlines() if "not covered" in line]
    assert len(said) == 1 and "/ (a regenerable cache, deleted)" in said[0], said
    undo = cli.json("undo", env=env, expect=3)
    assert len(undo["restored"]) == 3 and len(undo["kept"]) == 1
    back = {path.split("/")[0] for path in undo["restored"]}
    assert back | {undo["kept"][0]["path"]} == {"dist", "coverage"}


def test_an_agents_write_of_ignored_build_output_is_undone(cli: Cli, tree: Any) -> None:
    # What a write names is recorded whatever the rules say: an ignored .pyc
    # or object file the agent writes is held, never judged build output.
    cli.write(".gitignore", "*.pyc\n*.o\n")
    cli.run("write", "mod.pyc", stdin="first\n")
    cli.run("write", "lib.o", stdin="\x7fELF first\n")
    before = listing(tree, cli.root)
    cli.run("write", "mod.pyc", stdin="second\n")
    cli.run("write", "lib.o", stdin="\x7fELF second\n")
    cli.run("undo", "2")
    assert listing(tree, cli.root) == before
