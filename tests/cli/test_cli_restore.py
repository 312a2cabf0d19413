"""`earshot restore`: naming a snapshot, keeping or deleting extras, dry runs, undo, journals."""

from __future__ import annotations

import re
import shutil
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from conftest import Earshot


def _base(es: Earshot) -> str:
    """A small tree with a subdirectory, an executable and a symlink; its snapshot id."""
    es.write("a.txt", "alpha\n")
    es.write("b.txt", "beta\n")
    es.write("d/c.txt", "gamma\n")
    es.write("bin/run.sh", "#!/bin/sh\necho hi\n", mode=0o755)
    (es.root / "link").symlink_to("a.txt")
    return es.snap("-m", "base")


def _mess_up(es: Earshot) -> None:
    """Edit, delete, add a file, add a directory, change a mode."""
    es.write("a.txt", "alpha, edited\n")
    (es.root / "b.txt").unlink()
    es.write("extra.txt", "not in the snapshot\n")
    es.write("newdir/deep/x.txt", "x\n")
    (es.root / "bin/run.sh").chmod(0o644)


def test_restore_by_full_id_then_by_8_hex_prefix_brings_files_back(
    es: Earshot, list_tree: Any
) -> None:
    base = _base(es)
    wanted = list_tree(es.root)
    es.write("a.txt", "changed\n")
    (es.root / "d/c.txt").unlink()
    doc = es.json("restore", base)
    assert doc["id"] == base
    assert doc["dry_run"] is False
    assert sorted(doc["written"]) == ["a.txt", "d/c.txt"]
    assert list_tree(es.root) == wanted

    es.write("a.txt", "changed again\n")
    assert es.json("restore", base[:8])["id"] == base
    assert list_tree(es.root) == wanted

    # A prefix is case-insensitive; restoring the state the root is in does nothing.
    doc = es.json("restore", base[:10].upper())
    assert doc["id"] == base
    assert doc["written"] == doc["deleted"] == doc["skipped"] == []
    assert list_tree(es.root) == wanted


def test_restore_bad_id_exits_1_with_one_line_and_empty_stdout(
    es: Earshot, list_tree: Any, check_error: Any
) -> None:
    base = _base(es)
    es.write("a.txt", "changed\n")
    before = list_tree(es.root, mtimes=True)
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
        line = check_error(es.run("restore", text, *extra, expect=None))
        assert expected in line, line
    assert list_tree(es.root, mtimes=True) == before
    assert len(es.ids()) == 1  # a bad id records no "before" snapshot


def test_restore_without_force_keeps_extra_files_and_exits_3(es: Earshot, list_tree: Any) -> None:
    base = _base(es)
    _mess_up(es)
    result = es.run("restore", base, "--json", expect=3)
    doc = result.json()
    skipped = {s["path"] for s in doc["skipped"]}
    assert {"extra.txt", "newdir/deep/x.txt"} <= skipped
    assert all(s["reason"] for s in doc["skipped"])
    assert doc["deleted"] == []
    # Extras kept, everything else restored.
    assert (es.root / "extra.txt").read_text() == "not in the snapshot\n"
    assert (es.root / "newdir/deep/x.txt").read_text() == "x\n"
    assert (es.root / "a.txt").read_text() == "alpha\n"
    assert (es.root / "b.txt").read_text() == "beta\n"
    assert (es.root / "bin/run.sh").stat().st_mode & 0o777 == 0o755
    # The same in text: each skipped path listed, the state before named; still exit 3.
    lines = es.run("restore", base, expect=3).stdout.splitlines()
    assert any(line.split()[:2] == ["skipped", "extra.txt:"] for line in lines), lines
    assert re.search(r"state before is snapshot [0-9a-f]{12}\b", lines[-1]), lines


def test_restore_force_mirrors_the_snapshot_exactly_and_exits_0(
    es: Earshot, list_tree: Any
) -> None:
    base = _base(es)
    wanted = list_tree(es.root)
    _mess_up(es)
    doc = es.json("restore", base, "--force")
    assert doc["skipped"] == []
    assert {"extra.txt", "newdir/deep/x.txt"} <= set(doc["deleted"])
    assert list_tree(es.root) == wanted


def test_restore_dry_run_lists_the_plan_and_changes_nothing(es: Earshot, list_tree: Any) -> None:
    base = _base(es)
    _mess_up(es)
    before = list_tree(es.root, mtimes=True)

    forced = es.run("restore", base, "--dry-run", "--force", "--json").json()
    assert forced["dry_run"] is True
    assert {"a.txt", "b.txt"} <= set(forced["written"])
    assert {"extra.txt", "newdir/deep/x.txt"} <= set(forced["deleted"])
    assert forced["skipped"] == []

    kept = es.run("restore", base, "--dry-run", "--json", expect=3).json()
    assert kept["dry_run"] is True
    assert {"a.txt", "b.txt"} <= set(kept["written"])
    assert kept["deleted"] == []
    assert {"extra.txt", "newdir/deep/x.txt"} <= {s["path"] for s in kept["skipped"]}

    text = es.run("restore", base, "--dry-run", "--force").stdout
    assert "would write" in text and "would delete" in text

    assert list_tree(es.root, mtimes=True) == before


def test_restoring_the_before_id_undoes_the_restore(es: Earshot, list_tree: Any) -> None:
    base = _base(es)
    _mess_up(es)
    messed = list_tree(es.root)
    doc = es.json("restore", base, "--force")
    assert list_tree(es.root) != messed
    es.json("restore", doc["before"], "--force")
    assert list_tree(es.root) == messed


def test_interrupted_restore_is_reported_by_readers_and_finished_by_the_next_writer(
    es: Earshot,
) -> None:
    base = _base(es)
    _mess_up(es)
    killed = es.run(
        "restore", base, "--force", expect=None, env=es.env(EARSHOT_FAULTS="restore-rename@1")
    )
    assert killed.rc == -9 and "earshot-fault: restore-rename" in killed.stderr, str(killed)
    temps = list(es.root.rglob(".earshot-tmp-*"))
    assert len(temps) == 1

    for args in (("snapshots", "--json"), ("log", "--json")):
        result = es.run(*args)
        result.json()  # stdout stays exactly one JSON document
        notices = [line for line in result.stderr.splitlines() if "interrupted" in line]
        assert len(notices) == 1, str(result)
        assert notices[0].startswith("earshot: ") and base[:12] in notices[0]
    assert temps[0].exists()  # a reader changes nothing

    result = es.run("snapshot", "--json")
    assert "finished an interrupted restore" in result.stderr, str(result)
    assert not list(es.root.rglob(".earshot-tmp-*"))
    assert "interrupted" not in es.run("snapshots").stderr
    assert es.json("diff", base, "--stat")["changes"] == []


def test_restore_of_a_100_mib_sparse_file_keeps_its_holes(es: Earshot) -> None:
    path = es.root / "disk.img"
    size = 100 << 20
    with open(path, "wb") as f:
        f.truncate(size)
        for offset, data in ((0, b"head"), (50 << 20, b"middle"), (size - 4, b"tail")):
            f.seek(offset)
            f.write(data)
    if path.stat().st_blocks * 512 >= 1 << 20:
        pytest.skip("this file system does not keep holes")
    env = es.env(EARSHOT_MAX_FILE_SIZE="200M")
    snap = es.json("snapshot", env=env)["id"]
    path.unlink()
    es.run("restore", snap, env=env)
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
def test_restore_force_keeps_a_file_the_snapshot_ignored(es: Earshot, git: Any) -> None:
    # The repro: git reset --hard then git clean would keep secret.env too.
    git(es.root, "init", "-q")
    es.write(".gitignore", "secret.env\n")
    es.write("secret.env", "KEY=1\n")
    es.write("a.txt", "a\n")
    s0 = es.snap()
    es.write(".gitignore", "")
    es.snap()  # records secret.env: nothing ignores it now
    doc = es.json("restore", s0[:12], "--force", expect=3)
    assert (es.root / "secret.env").read_text() == "KEY=1\n"
    assert (es.root / ".gitignore").read_text() == "secret.env\n"
    assert doc["deleted"] == []
    assert doc["skipped"] == [
        {"path": "secret.env", "reason": "ignored by the snapshot's rules; kept"}
    ]


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_restore_force_judges_extras_by_the_snapshots_rules_at_every_level(
    es: Earshot, git: Any
) -> None:
    git(es.root, "init", "-q")
    es.write(".git/info/exclude", "*.local\n")  # read as it is on disk
    es.write(".gitignore", "# nothing\n")
    es.write("src/.gitignore", "gen/\n")
    es.write("src/main.c", "int main;\n")
    s0 = es.snap()
    es.write(".gitignore", "!*.local\n")
    es.write("src/.gitignore", "")
    es.write("src/gen/out.c", "generated\n")
    es.write("src/gen/deep/more.c", "generated\n")
    es.write("notes.local", "mine\n")
    es.write("extra.txt", "not ignored anywhere\n")
    es.snap()
    doc = es.json("restore", s0, "--force", expect=3)
    assert sorted(doc["deleted"]) == ["extra.txt"]
    assert {s["path"] for s in doc["skipped"]} == {"notes.local", "src/gen"}
    assert (es.root / "src/gen/deep/more.c").exists() and (es.root / "notes.local").exists()
    assert (es.root / "src/.gitignore").read_text() == "gen/\n"
