"""`earshot snapshot` and `earshot snapshots`: ids, reuse, notes, order, scoped restage, --root."""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from conftest import Earshot

HEX64 = re.compile(r"[0-9a-f]{64}")


def test_snapshot_json_is_one_document_with_a_64_hex_id_not_reused(es: Earshot) -> None:
    es.write("a.txt", "a\n")
    doc = es.json("snapshot")
    assert HEX64.fullmatch(doc["id"])
    assert doc["reused"] is False
    assert doc["files"] == 1
    assert doc["files_read"] == 1


def test_snapshot_with_no_change_reuses_the_last_one(es: Earshot) -> None:
    es.write("a.txt", "a\n")
    first = es.json("snapshot")
    second = es.json("snapshot")
    assert second["reused"] is True
    assert second["id"] == first["id"]
    out = es.run("snapshot").stdout  # the text says so too
    assert first["id"][:12] in out and "reusing" in out
    assert es.ids() == [first["id"]]


def test_snapshots_json_lists_newest_first_with_each_message_as_note(es: Earshot) -> None:
    made = []
    for i in range(3):
        es.write("a.txt", f"version {i}\n")
        made.append(es.snap("-m", f"n{i}"))
    listed = es.json("snapshots")["snapshots"]
    assert [s["id"] for s in listed] == made[::-1]
    assert [s["note"] for s in listed] == ["n2", "n1", "n0"]
    assert all({"time", "files"} <= set(s) for s in listed)
    times = [s["time_ns"] for s in listed]
    assert times == sorted(times, reverse=True)


def test_snapshots_on_an_empty_store_is_an_empty_list(es: Earshot) -> None:
    assert es.json("snapshots") == {"snapshots": []}


def test_scoped_snapshot_records_only_the_named_path(es: Earshot) -> None:
    es.write("a.txt", "a\n")
    es.write("b.txt", "b\n")
    first = es.snap()
    es.write("a.txt", "a changed\n")
    es.write("b.txt", "b changed\n")
    scoped = es.json("snapshot", "a.txt")
    assert scoped["reused"] is False
    changes = es.json("diff", first, scoped["id"])["changes"]
    assert [(c["path"], c["change"]) for c in changes] == [("a.txt", "modified")]
    # A full snapshot afterwards still sees b.txt's change.
    full = es.snap()
    changes = es.json("diff", scoped["id"], full)["changes"]
    assert [(c["path"], c["change"]) for c in changes] == [("b.txt", "modified")]


def test_scoped_snapshot_of_a_path_outside_the_root_fails_one_line(
    es: Earshot, check_error: Any
) -> None:
    es.write("a.txt", "a\n")
    es.snap()
    (es.root.parent / "x").write_text("outside\n")
    for outside in ("../x", str(es.root.parent / "x")):
        line = check_error(es.run("snapshot", outside, "--json", expect=None))
        assert "outside the root" in line


def test_root_that_does_not_exist_fails_one_line(es: Earshot, check_error: Any) -> None:
    missing = es.root.parent / "missing"
    for command in ("snapshot", "snapshots"):
        line = check_error(es.run(command, "--root", str(missing), expect=None))
        assert str(missing) in line
    assert not missing.exists()


def test_default_root_is_the_current_directory(es: Earshot, tmp_path: Path) -> None:
    es.write("a.txt", "a\n")
    snap_id = es.snap()  # cwd is the root, no --root
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    listed = es.json("snapshots", "--root", str(es.root), cwd=elsewhere)["snapshots"]
    assert [s["id"] for s in listed] == [snap_id]
    # ... and a different cwd is a different (empty) project.
    assert es.json("snapshots", cwd=elsewhere) == {"snapshots": []}
    # A relative --root is taken from the cwd.
    relative = es.json("snapshots", "--root", "root", cwd=tmp_path)["snapshots"]
    assert [s["id"] for s in relative] == [snap_id]


def test_snapshot_writes_nothing_inside_the_root(es: Earshot, list_tree: Any) -> None:
    es.write("a.txt", "a\n")
    es.write("d/b.txt", "b\n")
    before = list_tree(es.root, mtimes=True)
    es.snap()
    es.run("snapshots")
    assert list_tree(es.root, mtimes=True) == before
    assert es.store_dir().parent == es.home / "checkpoints"


def test_scoped_snapshot_after_a_restore_builds_on_the_restored_state(es: Earshot) -> None:
    es.write("a.txt", "a\n")
    a = es.snap()
    es.write("a.txt", "edited\n")
    es.write("x.txt", "extra\n")
    es.json("restore", a, "--force")  # disk: a.txt == "a\n", no x.txt
    es.write("b.txt", "b\n")
    scoped = es.snap("b.txt")
    changes = es.json("diff", a, scoped)["changes"]
    assert [(c["path"], c["change"]) for c in changes] == [("b.txt", "added")]


def test_verbose_snapshot_logs_to_stderr_and_keeps_stdout_json(es: Earshot) -> None:
    es.write("a.txt", "a\n")
    result = es.run("snapshot", "-vv", "--json")
    assert result.json()["reused"] is False
    assert result.stderr.strip() != ""
