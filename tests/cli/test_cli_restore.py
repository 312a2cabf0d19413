"""`earshot restore`: naming a snapshot, keeping or deleting extras, dry runs, undo, journals."""

from __future__ import annotations

import re
import shutil
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from earshot_cli import Cli

# Once in-process, once through the root's daemon (scoped restages of what it saw).
pytestmark = pytest.mark.both_modes


def _base(cli: Cli) -> str:
    """A small tree with a subdirectory, an executable and a symlink; its snapshot id."""
    cli.write("a.txt", "alpha\n")
    cli.write("b.txt", "beta\n")
    cli.write("d/c.txt", "gamma\n")
    cli.write("bin/run.sh", "#!/bin/sh\necho hi\n", mode=0o755)
    (cli.root / "link").symlink_to("a.txt")
    return cli.snap("-m", "base")


def _mess_up(cli: Cli) -> None:
    """Edit, delete, add a file, add a directory, change a mode."""
    cli.write("a.txt", "alpha, edited\n")
    (cli.root / "b.txt").unlink()
    cli.write("extra.txt", "not in the snapshot\n")
    cli.write("newdir/deep/x.txt", "x\n")
    (cli.root / "bin/run.sh").chmod(0o644)


def test_restore_by_full_id_then_by_8_hex_prefix_brings_files_back(cli: Cli, tree: Any) -> None:
    base = _base(cli)
    wanted = tree(cli.root)
    cli.write("a.txt", "changed\n")
    (cli.root / "d/c.txt").unlink()
    doc = cli.json("restore", base)
    assert doc["id"] == base
    assert doc["dry_run"] is False
    assert sorted(doc["written"]) == ["a.txt", "d/c.txt"]
    assert tree(cli.root) == wanted

    cli.write("a.txt", "changed again\n")
    assert cli.json("restore", base[:8])["id"] == base
    assert tree(cli.root) == wanted

    # A prefix is case-insensitive; restoring the state the root is in does nothing.
    doc = cli.json("restore", base[:10].upper())
    assert doc["id"] == base
    assert doc["written"] == doc["deleted"] == doc["skipped"] == []
    assert tree(cli.root) == wanted


def test_restore_bad_id_exits_1_with_one_line_error(cli: Cli, tree: Any, check_error: Any) -> None:
    base = _base(cli)
    cli.write("a.txt", "changed\n")
    before = tree(cli.root, mtimes=True)
    unknown_full = ("0" if base[0] != "0" else "1") + base[1:]
    unknown_prefix = unknown_full[:8]
    bad = [
        (base[:7], "at least 8"),
        ("not-hex!", "hex"),
        (unknown_prefix, "no snapshot"),
        (unknown_full, "no snapshot"),
    ]
    for i, (text, expected) in enumerate(bad):
        extra = ("--json",) if i % 2 else ()
        line = check_error(cli.run("restore", text, *extra, expect=None))
        assert expected in line, line
    assert tree(cli.root, mtimes=True) == before
    assert len(cli.ids()) == 1  # a bad id records no "before" snapshot


def test_restore_without_force_keeps_extra_files_and_exits_3(cli: Cli, tree: Any) -> None:
    base = _base(cli)
    _mess_up(cli)
    result = cli.run("restore", base, "--json", expect=3)
    doc = result.json()
    skipped = {s["path"] for s in doc["skipped"]}
    assert {"extra.txt", "newdir/deep/x.txt"} <= skipped
    assert all(s["reason"] for s in doc["skipped"])
    assert doc["deleted"] == []
    # Extras kept, everything else restored.
    assert (cli.root / "extra.txt").read_text() == "not in the snapshot\n"
    assert (cli.root / "newdir/deep/x.txt").read_text() == "x\n"
    assert (cli.root / "a.txt").read_text() == "alpha\n"
    assert (cli.root / "b.txt").read_text() == "beta\n"
    assert (cli.root / "bin/run.sh").stat().st_mode & 0o777 == 0o755
    # The same in text: each skipped path listed, the state before named; still exit 3.
    lines = cli.run("restore", base, expect=3).stdout.splitlines()
    assert any(line.split()[:2] == ["skipped", "extra.txt:"] for line in lines), lines
    assert re.search(r"state before is snapshot [0-9a-f]{12}\b", lines[-1]), lines


def test_restore_force_mirrors_the_snapshot_exactly_and_exits_0(cli: Cli, tree: Any) -> None:
    base = _base(cli)
    wanted = tree(cli.root)
    _mess_up(cli)
    doc = cli.json("restore", base, "--force")
    assert doc["skipped"] == []
    assert {"extra.txt", "newdir/deep/x.txt"} <= set(doc["deleted"])
    assert tree(cli.root) == wanted


def test_restore_dry_run_lists_the_plan_and_changes_nothing(cli: Cli, tree: Any) -> None:
    base = _base(cli)
    _mess_up(cli)
    before = tree(cli.root, mtimes=True)

    forced = cli.run("restore", base, "--dry-run", "--force", "--json").json()
    assert forced["dry_run"] is True
    assert {"a.txt", "b.txt"} <= set(forced["written"])
    assert {"extra.txt", "newdir/deep/x.txt"} <= set(forced["deleted"])
    assert forced["skipped"] == []

    kept = cli.run("restore", base, "--dry-run", "--json", expect=3).json()
    assert kept["dry_run"] is True
    assert {"a.txt", "b.txt"} <= set(kept["written"])
    assert kept["deleted"] == []
    assert {"extra.txt", "newdir/deep/x.txt"} <= {s["path"] for s in kept["skipped"]}

    text = cli.run("restore", base, "--dry-run", "--force").stdout
    assert "would write" in text and "would delete" in text

    assert tree(cli.root, mtimes=True) == before


def test_restoring_the_before_id_undoes_the_restore(cli: Cli, tree: Any) -> None:
    base = _base(cli)
    _mess_up(cli)
    messed = tree(cli.root)
    doc = cli.json("restore", base, "--force")
    assert tree(cli.root) != messed
    cli.json("restore", doc["before"], "--force")
    assert tree(cli.root) == messed


def test_interrupted_restore_is_reported_by_readers_and_finished_by_the_next_writer(
    cli: Cli,
) -> None:
    base = _base(cli)
    _mess_up(cli)
    killed = cli.run(
        "restore", base, "--force", expect=None, env=cli.env(EARSHOT_FAULTS="restore-rename@1")
    )
    assert killed.rc == -9 and "earshot-fault: restore-rename" in killed.stderr, str(killed)
    temps = list(cli.root.rglob(".earshot-tmp-*"))
    assert temps  # written and made durable together, renamed in one by one: some wait
    assert len({t.name.rsplit("-", 1)[0] for t in temps}) == 1  # all this restore's

    for args in (("snapshots", "--json"), ("log", "--json")):
        result = cli.run(*args)
        result.json()  # stdout stays exactly one JSON document
        notices = [line for line in result.stderr.splitlines() if "interrupted" in line]
        assert len(notices) == 1, str(result)
        assert notices[0].startswith("earshot: ") and base[:12] in notices[0]
    assert temps[0].exists()  # a reader changes nothing

    result = cli.run("snapshot", "--json")
    assert "finished an interrupted restore" in result.stderr, str(result)
    assert not list(cli.root.rglob(".earshot-tmp-*"))
    assert "interrupted" not in cli.run("snapshots").stderr
    assert cli.json("diff", base, "--stat")["changes"] == []


def test_restore_of_a_100_mib_sparse_file_keeps_its_holes(cli: Cli) -> None:
    path = cli.root / "disk.img"
    size = 100 << 20
    with open(path, "wb") as f:
        f.truncate(size)
        for offset, data in ((0, b"head"), (50 << 20, b"middle"), (size - 4, b"tail")):
            f.seek(offset)
            f.write(data)
    if path.stat().st_blocks * 512 >= 1 << 20:
        pytest.skip("this file system does not keep holes")
    env = cli.env(EARSHOT_MAX_FILE_SIZE="200M")
    snap = cli.json("snapshot", env=env)["id"]
    path.unlink()
    cli.run("restore", snap, env=env)
    st = path.stat()
    assert st.st_size == size
    assert st.st_blocks * 512 < 1 << 20, f"{st.st_blocks * 512} bytes allocated"
    with open(path, "rb") as f:
        assert f.read(4) == b"head"
        f.seek(50 << 20)
        assert f.read(6) == b"middle"
        f.seek(size - 4)
        assert f.read() == b"tail"


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_restore_force_keeps_a_file_the_snapshots_rules_ignore(cli: Cli, git: Any) -> None:
    # git reset --hard then git clean would keep new.env too: the snapshot's
    # rules ignore it, so that state says nothing about it.
    git(cli.root, "init", "-q")
    cli.write(".gitignore", "*.env\n")
    cli.write("a.txt", "a\n")
    s0 = cli.snap()
    cli.write(".gitignore", "")
    cli.write("new.env", "KEY=1\n")
    cli.snap()  # records new.env: nothing ignores it now
    doc = cli.json("restore", s0[:12], "--force", expect=3)
    assert (cli.root / "new.env").read_text() == "KEY=1\n"
    assert (cli.root / ".gitignore").read_text() == "*.env\n"
    assert doc["deleted"] == []
    assert doc["skipped"] == [
        {"path": "new.env", "reason": "ignored by the snapshot's rules; kept"}
    ]


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_restore_force_brings_back_an_ignored_file_the_snapshot_kept(cli: Cli, git: Any) -> None:
    # A small ignored file is kept: the snapshot holds secret.env's content,
    # whatever the rules said then or say now.
    git(cli.root, "init", "-q")
    cli.write(".gitignore", "secret.env\n")
    cli.write("secret.env", "KEY=1\n")
    cli.write("a.txt", "a\n")
    s0 = cli.snap()
    cli.write(".gitignore", "")
    cli.write("secret.env", "KEY=2\n")
    cli.snap()
    doc = cli.json("restore", s0[:12], "--force")
    assert (cli.root / "secret.env").read_text() == "KEY=1\n"
    assert (cli.root / ".gitignore").read_text() == "secret.env\n"
    assert sorted(doc["written"]) == [".gitignore", "secret.env"]
    assert (doc["deleted"], doc["skipped"]) == ([], [])


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
@pytest.mark.parametrize("rule", [".gitignore", ".earshotignore"])
def test_a_restore_over_a_file_ignored_since_records_it_first_so_it_comes_back(
    cli: Cli, git: Any, monkeypatch: pytest.MonkeyPatch, rule: str
) -> None:
    # A .env the rules keep as existence only since the snapshot (ignored and
    # over the limit for ignored files, or excluded): the restore writes the
    # snapshot's .env over one the state before would not have held.
    monkeypatch.setenv("EARSHOT_IGNORED_MAX_FILE", "4")
    git(cli.root, "init", "-q")
    cli.write(".env", "OLD=1\n")
    s0 = cli.snap()
    cli.write(rule, ".env\n")
    cli.write(".env", "NEW=precious\n")
    cli.json("restore", s0, expect=3)
    assert (cli.root / ".env").read_text() == "OLD=1\n"
    before = cli.ids()[0]  # newest first: the state before the restore
    assert len(cli.ids()) == 2
    cli.json("restore", before)
    assert (cli.root / ".env").read_text() == "NEW=precious\n"


def test_a_restore_over_a_cache_ignored_since_leaves_it_and_says_why(cli: Cli) -> None:
    # The snapshot holds node_modules' files; since, it is ignored, a cache:
    # existence only, never read whole for a restore's sake. Left as it is,
    # and said, in one line (it once ended in a traceback).
    cli.write("node_modules/pkg/index.js", "old\n")
    s0 = cli.snap()
    cli.write(".gitignore", "node_modules/\n")
    cli.write("node_modules/pkg/index.js", "new\n")
    doc = cli.json("restore", s0, expect=3)
    assert {
        "path": "node_modules",
        "reason": "not recorded on disk (a regenerable cache); left alone",
    } in doc["skipped"]
    assert (cli.root / "node_modules/pkg/index.js").read_text() == "new\n"


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_restore_force_judges_extras_by_the_snapshots_rules_at_every_level(
    cli: Cli, git: Any
) -> None:
    git(cli.root, "init", "-q")
    cli.write(".git/info/exclude", "*.local\n")  # read as it is on disk
    cli.write(".gitignore", "# nothing\n")
    cli.write("src/.gitignore", "gen/\n")
    cli.write("src/main.c", "int main;\n")
    s0 = cli.snap()
    cli.write(".gitignore", "!*.local\n")
    cli.write("src/.gitignore", "")
    cli.write("src/gen/out.c", "generated\n")
    cli.write("src/gen/deep/more.c", "generated\n")
    cli.write("notes.local", "mine\n")
    cli.write("extra.txt", "not ignored anywhere\n")
    cli.snap()
    doc = cli.json("restore", s0, "--force", expect=3)
    assert sorted(doc["deleted"]) == ["extra.txt"]
    assert {s["path"] for s in doc["skipped"]} == {"notes.local", "src/gen"}
    assert (cli.root / "src/gen/deep/more.c").exists() and (cli.root / "notes.local").exists()
    assert (cli.root / "src/.gitignore").read_text() == "gen/\n"


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_restore_force_deletes_an_extra_file_git_tracks_though_the_snapshots_rules_ignore_it(
    cli: Cli, git: Any
) -> None:
    # flask at 3.0.0 tracks tests/test_apps/.env and .flaskenv, which its
    # .gitignore ignores: git reset --hard and git clean judge them tracked.
    git(cli.root, "init", "-q")
    cli.write(".gitignore", ".flaskenv\n")
    cli.write("a.txt", "a\n")
    s0 = cli.snap()
    cli.write(".flaskenv", "FLASK_APP=x\n")
    git(cli.root, "add", "-f", ".flaskenv")
    doc = cli.json("restore", s0[:12], "--force")
    assert doc["deleted"] == [".flaskenv"] and doc["skipped"] == []
    assert not (cli.root / ".flaskenv").exists()


def test_a_restore_of_more_directories_than_the_descriptor_limit_writes_them_all(
    cli: Cli, tree: Any
) -> None:
    """Each directory's descriptor was kept open for the restore's length: a
    tree of more directories than the process may open (a clone, a restore
    into an emptied root) failed file after file with EMFILE."""
    for i in range(400):
        cli.write(f"d{i % 20}/e{i}/f.txt", f"{i}\n")
    before = tree(cli.root)
    snap = cli.snap()
    for child in cli.root.iterdir():
        shutil.rmtree(child)
    cli.run("restore", snap, prefix=("prlimit", "--nofile=128:128", "--"))
    assert tree(cli.root) == before
