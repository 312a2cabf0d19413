"""The promises 1-7 of docs/ARCHITECTURE.md, each as named tests, mostly through the real CLI.

Every command runs the installed ``earshot`` script in a subprocess with its
own EARSHOT_HOME; each one is a new process, as an agent's tool calls are.
Library-level tests (``lib``) are used where the CLI cannot reach: a
long-lived engine, a failing transaction.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sys
from pathlib import Path
from typing import Any

import pytest

from earshot.agent.core.calls import Bash, WriteFile
from earshot.agent.core.engine import Engine
from earshot.agent.core.records import TABLES, get_session
from earshot.agent.core.sessions import create_session
from earshot.agent.core.undo import NothingToUndo, undo
from earshot.cas.digest import Digest, blob_digest
from earshot.cas.project import Project

# Each test runs in-process and through the watch daemon (tests/conftest.py).
pytestmark = pytest.mark.both_modes

EARSHOT = Path(sys.executable).parent / "earshot"

# -- promise 1: the user's repository is never touched ------------------------------


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_promise1_user_git_repository_is_never_touched(
    cli: Any, root: Path, git: Any, dir_digest: Any
) -> None:
    git(root, "init", "-q")
    (root / "tracked.txt").write_text("tracked\n")
    (root / "README").write_text("readme\n")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "first")
    (root / "tracked.txt").write_text("stashed change\n")
    git(root, "stash", "-q")  # a stash
    (root / "README").write_text("staged change\n")
    git(root, "add", "README")  # an index change
    (root / "untracked.txt").write_text("untracked\n")
    git_before = dir_digest(root / ".git")
    status_before = git(root, "status", "--porcelain")
    stash_before = git(root, "stash", "list")
    assert status_before and stash_before

    snap = cli.json("snapshot")["id"]
    cli.run("write", "new.txt", stdin="new\n")
    cli.run("bash", "rm tracked.txt")
    cli.run("undo")
    cli.run("undo")
    cli.run("redo")
    cli.run("undo")
    (root / "README").write_text("hand change\n")
    cli.run("restore", snap)

    assert dir_digest(root / ".git") == git_before
    assert git(root, "status", "--porcelain") == status_before
    assert git(root, "stash", "list") == stash_before
    assert (root / "README").read_text() == "staged change\n"
    assert not (root / "new.txt").exists()


def test_works_without_git(cli: Any, root: Path, tmp_path: Path) -> None:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    try:
        for tool in ("sh", "python3", "rm", "cat"):
            found = shutil.which(tool)
            if found is None:
                pytest.skip(f"no {tool} to link")
            (bindir / tool).symlink_to(found)
    except OSError as exc:  # pragma: no cover - platform without symlinks
        pytest.skip(f"cannot build a git-less PATH: {exc}")
    assert shutil.which("git", path=str(bindir)) is None
    env = cli.env(PATH=str(bindir), SHELL=str(bindir / "sh"))
    cli.run("write", "a.txt", stdin="a\n", env=env)
    cli.run("bash", "cat a.txt && rm a.txt", env=env)
    assert not (root / "a.txt").exists()
    cli.run("undo", env=env)
    assert (root / "a.txt").read_text() == "a\n"
    cli.run("undo", env=env)
    assert not (root / "a.txt").exists()


# -- promise 2: undo deletes only ledger-verified creations --------------------------


def test_undo_deletes_only_ledger_verified_creations(cli: Any, root: Path) -> None:
    sid = cli.new_session()
    cli.run("bash", "touch x.txt", session=sid)  # created by a call
    (root / "x.txt").write_text("edited by hand\n")
    hand = cli.run("undo", "--json", session=sid, expect=3).json()
    assert hand["deleted"] == [] and hand["conflicts"] == ["x.txt"]
    assert (root / "x.txt").read_text() == "edited by hand\n"

    (root / "user.txt").write_text("made by the user between batches\n")
    cli.run("bash", "touch y.txt", session=sid)
    made = cli.json("undo", session=sid)
    assert made["deleted"] == ["y.txt"]  # created by a call, left unchanged: deleted
    assert made["conflicts"] == []
    assert not (root / "y.txt").exists()
    assert (root / "user.txt").read_text() == "made by the user between batches\n"
    assert (root / "x.txt").read_text() == "edited by hand\n"


def test_undo_never_deletes_a_file_the_user_created_before_the_batch(cli: Any, root: Path) -> None:
    sid = cli.new_session()
    cli.run("write", "a.txt", stdin="a\n", session=sid)
    (root / "user.txt").write_text("mine\n")
    # The user's file is there before the command; the command rewrites nothing of it.
    cli.run("bash", "touch b.txt && cat user.txt", session=sid)
    doc = cli.json("undo", "2", session=sid)
    assert sorted(doc["deleted"]) == ["a.txt", "b.txt"]
    assert (root / "user.txt").read_text() == "mine\n"


def test_a_long_lived_engine_never_deletes_a_file_the_user_created_between_batches(
    lib: Any,
) -> None:
    engine = lib.engine(budget_ns=10**12)
    engine.run_batch([WriteFile("a.txt", b"a\n")])
    (lib.root / "user.txt").write_text("mine\n")  # the user, between two batches
    engine.run_batch([Bash("touch made.txt")])
    undo(engine)
    assert (lib.root / "user.txt").read_text() == "mine\n"


@pytest.mark.parametrize(
    "make",
    [
        ("write", "new/deep/f.txt"),  # earshot's write_file makes the parents
        ("bash", "mkdir -p new/deep && echo x > new/deep/f.txt"),
    ],
)
def test_undo_removes_the_directories_its_batches_made_for_a_file_they_moved_away(
    cli: Any, root: Path, make: tuple[str, str]
) -> None:
    sid = cli.new_session()
    if make[0] == "write":
        cli.run("write", make[1], stdin="x\n", session=sid)
    else:
        cli.run("bash", make[1], session=sid)
    cli.run("bash", "mv new/deep/f.txt moved.txt", session=sid)
    doc = cli.json("undo", "2", session=sid)
    assert doc["deleted"] == ["moved.txt"]
    assert sorted(doc["removed_dirs"]) == ["new", "new/deep"]
    assert sorted(p.name for p in root.iterdir() if p.name != ".git") == []


def test_undo_keeps_a_directory_its_batches_made_that_now_holds_the_persons_file(
    cli: Any, root: Path
) -> None:
    sid = cli.new_session()
    cli.run("write", "new/f.txt", stdin="x\n", session=sid)
    cli.run("bash", "mv new/f.txt moved.txt", session=sid)
    (root / "new" / "mine.txt").write_text("the person's\n")
    doc = cli.run("undo", "2", "--json", session=sid, expect=3).json()  # 3: a path kept
    assert doc["deleted"] == ["moved.txt"] and doc["removed_dirs"] == []
    assert doc["kept"] == [{"path": "new", "reason": "directory not empty; kept"}]
    assert (root / "new" / "mine.txt").read_text() == "the person's\n"


# -- promise 3: undo overwrites only unchanged paths --------------------------------


def test_undo_overwrites_only_unchanged_paths(cli: Any, root: Path) -> None:
    for name in ("p.txt", "q.txt", "other.txt"):
        (root / name).write_text("v0\n")
    batch = [
        {"tool": "write_file", "path": "p.txt", "content": "v1\n"},
        {"tool": "write_file", "path": "q.txt", "content": "v1\n"},
    ]
    cli.run("exec", stdin=json.dumps(batch))
    (root / "q.txt").write_text("hand\n")
    (root / "other.txt").write_text("user's own change\n")  # no batch names it
    (root / "loose.txt").write_text("user's new file\n")
    doc = cli.run("undo", "--json", expect=3).json()
    assert doc["restored"] == ["p.txt"]
    assert doc["conflicts"] == ["q.txt"]
    assert doc["deleted"] == []
    assert (root / "p.txt").read_text() == "v0\n"
    assert (root / "q.txt").read_text() == "hand\n"
    assert (root / "other.txt").read_text() == "user's own change\n"
    assert (root / "loose.txt").read_text() == "user's new file\n"


def test_hand_edit_is_a_conflict_and_undo_leaves_it(cli: Any, root: Path) -> None:
    (root / "f").write_text("before\n")
    cli.run("write", "f", stdin="agent\n")
    (root / "f").write_text("hand\n")
    ran = cli.run("undo", expect=3)
    assert "conflict f" in ran.stdout
    assert (root / "f").read_text() == "hand\n"


def test_hand_edit_is_conflict_and_force_overwrites_then_redo_restores_hand_edit(
    cli: Any, root: Path
) -> None:
    (root / "f").write_text("before\n")
    cli.run("write", "f", stdin="agent\n")
    (root / "f").write_text("hand\n")
    cli.run("undo", expect=3)
    assert (root / "f").read_text() == "hand\n"
    cli.run("undo", "--force")
    assert (root / "f").read_text() == "before\n"
    cli.run("redo")
    assert (root / "f").read_text() == "hand\n"


def test_force_overwrites_a_hand_edit_and_redo_brings_the_hand_edit_back(
    cli: Any, root: Path
) -> None:
    (root / "f").write_text("before\n")
    cli.run("write", "f", stdin="agent\n")
    (root / "f").write_text("hand\n")
    doc = cli.json("undo", "--force")
    assert doc["restored"] == ["f"] and doc["conflicts"] == []
    assert (root / "f").read_text() == "before\n"
    cli.run("redo")
    assert (root / "f").read_text() == "hand\n"


def test_force_never_deletes_a_created_file_that_was_edited_by_hand(cli: Any, root: Path) -> None:
    cli.run("write", "new.txt", stdin="agent\n")
    (root / "new.txt").write_text("hand\n")
    doc = cli.run("undo", "--force", "--json", expect=3).json()
    assert doc["deleted"] == [] and doc["conflicts"] == ["new.txt"]
    assert (root / "new.txt").read_text() == "hand\n"


# -- promise 4: undo records first; undo N counts real steps -------------------------


def test_undo_records_state_first_so_redo_restores(cli: Any, root: Path) -> None:
    cli.run("write", "a.txt", stdin="v1\n")
    cli.run("write", "a.txt", stdin="v2\n")
    undone = cli.json("undo")
    assert (root / "a.txt").read_text() == "v1\n"
    log = cli.json("log")["batches"]
    record = log[-1]
    assert record["seq"] == undone["record"] == 3
    assert record["kind"] == "undo" and record["self_created"] is True
    assert record["targets"] == [2]
    assert [(c["path"], c["before"], c["after"]) for c in record["changes"]] == [
        ("a.txt", blob_digest(b"v2\n").hex(), blob_digest(b"v1\n").hex())
    ]
    assert log[1]["undone"] is True and log[1]["undone_by"] == 3
    cli.run("redo")
    assert (root / "a.txt").read_text() == "v2\n"
    assert cli.json("log")["batches"][1]["undone"] is False
    cli.run("undo")  # the redone batch is undoable again
    assert (root / "a.txt").read_text() == "v1\n"


def test_undo_2_skips_batches_that_changed_nothing_and_self_created_batches(
    cli: Any, root: Path, file_tree: Any
) -> None:
    cli.run("write", "z.txt", stdin="z\n")  # 1
    cli.run("write", "a.txt", stdin="a\n")  # 2
    cli.run("write", "b.txt", stdin="b\n")  # 3
    cli.run("bash", "true")  # 4: changed nothing
    cli.run("write", "c.txt", stdin="c\n")  # 5
    first = cli.json("undo")  # 6: reverts 5
    assert first["batches"] == [5] and first["deleted"] == ["c.txt"]
    second = cli.json("undo", "2")  # 7: steps over 6 (undo) and 4 (nothing): 3 and 2
    assert second["batches"] == [3, 2]
    assert sorted(second["deleted"]) == ["a.txt", "b.txt"]
    assert file_tree(root) == {"z.txt": b"z\n"}
    log = {b["seq"]: b for b in cli.json("log")["batches"]}
    assert log[7]["targets"] == [2, 3]
    assert log[4]["changes"] == [] and log[4]["undone"] is False
    cli.run("redo")  # replays 7
    assert file_tree(root) == {"z.txt": b"z\n", "a.txt": b"a\n", "b.txt": b"b\n"}
    cli.run("redo")  # replays 6
    assert file_tree(root) == {"z.txt": b"z\n", "a.txt": b"a\n", "b.txt": b"b\n", "c.txt": b"c\n"}


# -- promise 5: undo is scoped to its session --------------------------------------


def _unique_prefix(mine: str, other: str) -> str:
    for i, (x, y) in enumerate(zip(mine, other, strict=True)):
        if x != y:
            return mine[: i + 1]
    raise AssertionError("two sessions with one id")


def test_undo_is_scoped_to_its_session(cli: Any, root: Path) -> None:
    a, b = cli.new_session(), cli.new_session()
    cli.run("write", "a1.txt", stdin="a1\n", session=a)
    cli.run("write", "b1.txt", stdin="b1\n", session=b)
    cli.run("write", "a2.txt", stdin="a2\n", session=a)
    assert cli.json("undo", session=b)["deleted"] == ["b1.txt"]
    assert (root / "a1.txt").exists() and (root / "a2.txt").exists()
    assert cli.json("undo", session=a)["deleted"] == ["a2.txt"]
    by_prefix = cli.json("undo", "--session", _unique_prefix(a, b))
    assert by_prefix["deleted"] == ["a1.txt"]
    assert sorted(p.name for p in root.iterdir()) == []
    refused = cli.run("undo", session=b, expect=1)
    assert "nothing to undo" in refused.stderr
    log_b = cli.json("log", "--session", _unique_prefix(b, a))
    assert log_b["session"] == b
    assert [c["calls"][0]["tool"] for c in log_b["batches"]] == ["write_file", "undo"]


def test_batches_of_one_session_are_invisible_to_another(lib: Any, cli: Any) -> None:
    engine = lib.engine()
    engine.run_batch([WriteFile("mine.txt", b"mine\n")])
    other = create_session(lib.project).id
    with pytest.raises(NothingToUndo):
        undo(Engine(lib.project, other))
    cli.run("undo", session=other, expect=1)
    assert (lib.root / "mine.txt").read_text() == "mine\n"
    assert lib.batches(other) == []


def test_a_plain_snapshot_belongs_to_no_session(cli: Any, root: Path) -> None:
    (root / "a.txt").write_text("a\n")
    cli.json("snapshot")
    (root / "a.txt").write_text("changed by hand\n")
    refused = cli.run("undo", session=cli.new_session(), expect=1)
    assert "nothing to undo" in refused.stderr
    assert (root / "a.txt").read_text() == "changed by hand\n"


# -- promise 6: never outside the root, never through a link ------------------------


def _swap_for_link(root: Path, name: str, outside: Path) -> None:
    """The user replaces directory ``name`` by a link to ``outside`` (a copy of it)."""
    shutil.copytree(root / name, outside)
    shutil.rmtree(root / name)
    (root / name).symlink_to(outside)


def test_undo_never_writes_through_a_symlinked_directory(
    cli: Any, root: Path, tmp_path: Path, tree: Any
) -> None:
    (root / "d").mkdir()
    (root / "d/f").write_text("v0\n")
    cli.run("write", "d/f", stdin="v1\n")
    outside = tmp_path / "outside"
    _swap_for_link(root, "d", outside)  # outside/f holds exactly what the batch left
    before = tree(outside)
    doc = cli.run("undo", "--json", expect=3).json()
    assert doc["restored"] == [] and doc["conflicts"] == ["d/f"]
    assert tree(outside) == before
    assert (root / "d").is_symlink()


def test_undo_force_never_replaces_a_symlinked_parent_that_no_ledger_names(
    cli: Any, root: Path, tmp_path: Path, tree: Any
) -> None:
    (root / "d").mkdir()
    (root / "d/f").write_text("v0\n")
    cli.run("write", "d/f", stdin="v1\n")
    outside = tmp_path / "outside"
    _swap_for_link(root, "d", outside)
    before = tree(outside)
    cli.run("undo", "--force", expect=None)
    assert tree(outside) == before  # nothing is written outside
    assert (root / "d").is_symlink()  # the user's link, in no ledger, stays a link


def test_undo_reports_a_created_path_it_cannot_reach_behind_a_symlink(
    cli: Any, root: Path, tmp_path: Path, tree: Any
) -> None:
    (root / "d").mkdir()
    cli.run("write", "d/g", stdin="new\n")
    outside = tmp_path / "outside"
    _swap_for_link(root, "d", outside)
    before = tree(outside)
    doc = cli.run("undo", "--json", expect=None).json()
    assert tree(outside) == before
    reported = doc["conflicts"] + [k["path"] for k in doc["kept"]]
    assert "d/g" in reported


def test_write_outside_the_root_or_through_a_link_fails_and_writes_nothing(
    cli: Any, root: Path, tmp_path: Path, tree: Any
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (root / "link").symlink_to(outside)
    for target in ("../x", "link/x", str(outside / "y")):
        ran = cli.run("write", target, stdin="evil\n", expect=1)
        assert ran.stderr.startswith("earshot: "), str(ran)
    assert tree(outside) == {}
    assert not (tmp_path / "x").exists()
    assert (root / "link").is_symlink()


def test_undo_replaces_a_hard_linked_file_instead_of_writing_through_it(
    cli: Any, root: Path, tmp_path: Path
) -> None:
    (root / "h.txt").write_text("v0\n")
    cli.run("write", "h.txt", stdin="v1\n")
    outside = tmp_path / "h-outside"
    os.link(root / "h.txt", outside)  # same inode, same content as the batch left
    cli.run("undo")
    assert (root / "h.txt").read_text() == "v0\n"
    assert outside.read_text() == "v1\n"


def test_undo_restores_a_deleted_symlink_as_a_link(cli: Any, root: Path) -> None:
    (root / "target.txt").write_text("t\n")
    (root / "ln").symlink_to("target.txt")
    cli.run("bash", "rm ln")
    assert not os.path.lexists(root / "ln")
    cli.run("undo")
    assert (root / "ln").is_symlink() and os.readlink(root / "ln") == "target.txt"


# -- promise 7: crash safety ----------------------------------------------------------


def _assert_store_consistent(cli: Any, lib_home: Path, root: Path) -> list[dict[str, Any]]:
    fsck = cli.json("fsck")
    assert fsck["ok"] is True, fsck
    batches: list[dict[str, Any]] = cli.json("log")["batches"]
    with Project(root, home=lib_home, extra_tables=TABLES) as project, project.store.reader() as r:
        for batch in batches:
            for snap in (batch["before"], batch["after"]):
                if snap is not None:
                    r.read_tree(r.read_snapshot(Digest(bytes.fromhex(snap))).tree)
            for change in batch["changes"]:
                if change["after"] is not None:
                    assert r.has(Digest(bytes.fromhex(change["after"])))
    return batches


def test_store_is_consistent_after_batches(cli: Any, root: Path, home: Path) -> None:
    cli.run("write", "a.txt", stdin="a\n")
    cli.run("bash", "rm a.txt")
    batches = _assert_store_consistent(cli, home, root)
    assert [b["seq"] for b in batches] == [1, 2]


@pytest.mark.slow
@pytest.mark.parametrize("site", ["write-rename", "batch-write", "batch-commit"])
def test_kill_9_during_a_large_write_leaves_the_store_consistent_and_no_half_batch(
    cli: Any, root: Path, home: Path, site: str
) -> None:
    data = os.urandom(30 * 1024 * 1024)
    sid = cli.new_session()
    cli.run("write", "small.txt", stdin="small\n", session=sid)
    killed = cli.run(
        "write",
        "big.bin",
        stdin=data,
        session=sid,
        expect=None,
        env=cli.env(sid, EARSHOT_FAULTS=site),
    )
    # The kill happened where it was asked for, and nothing was half-written.
    assert killed.rc == -signal.SIGKILL and f"earshot-fault: {site}" in killed.stderr, killed
    target = root / "big.bin"
    assert target.exists() == (site != "write-rename")
    if target.exists():
        assert target.read_bytes() == data
    # The next command removes the temp file, records the batch, and works on.
    cli.run("write", "after.txt", stdin="after\n", session=sid)
    assert not [n for n in os.listdir(root) if n.startswith(".earshot-tmp-")]
    batches = _assert_store_consistent(cli, home, root)
    assert [b["seq"] for b in batches] == [1, 2, 3]
    assert batches[0]["changes"][0]["path"] == "small.txt"
    assert batches[1]["interrupted"] is True  # every site is before its commit
    assert [c["path"] for c in batches[1]["changes"]] == (["big.bin"] if target.exists() else [])
    cli.run("undo", session=sid)
    assert not (root / "after.txt").exists()
    if target.exists():  # the write is proven by its note: undo deletes what it made
        cli.run("undo", session=sid)
        assert not target.exists()


def test_the_batch_record_and_the_session_record_commit_together(
    lib: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = lib.engine()
    engine.run_batch([WriteFile("a.txt", b"a\n")])
    import earshot.agent.core.commit as commit

    real = commit.put_session
    calls: list[int] = []

    def crash_at_the_commit(*args: Any) -> None:
        calls.append(1)
        if len(calls) == 1:  # the intent's transaction: let it commit
            real(*args)
            return
        raise RuntimeError("power cut inside the commit transaction")

    with monkeypatch.context() as patch:
        patch.setattr(commit, "put_session", crash_at_the_commit)
        with pytest.raises(RuntimeError):
            engine.run_batch([WriteFile("b.txt", b"b\n")])
    assert len(calls) == 2  # the crash came inside the commit, after the batch record
    assert [b.seq for b in lib.batches()] == [1]  # no half batch: its record went too
    with lib.project.store.backend.read() as view:
        record = get_session(view, lib.session)
    # The intent reserved number 2 and stays: the batch is not lost, only not recorded yet.
    assert record is not None and record.next_seq == 3
    (pending,) = lib.project.intents.pending()
    assert pending.doc["seq"] == 2
    assert lib.project.fsck().ok
    from earshot.agent.core.recovery import finish_all

    finished, unfinished = finish_all(lib.project)
    assert len(finished) == 1 and unfinished == []
    batches = lib.batches()
    assert [b.seq for b in batches] == [1, 2] and batches[1].interrupted
    assert [c.path for c in batches[1].ledger] == ["b.txt"]
    fresh = lib.engine()
    out = fresh.run_batch([WriteFile("c.txt", b"c\n")])
    assert out.batch.seq == 3
