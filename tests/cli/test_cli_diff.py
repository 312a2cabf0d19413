"""`earshot diff A [B]`: --stat marks, unified diffs, the JSON shape, odd file names."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from conftest import Earshot


def _two_states(es: Earshot) -> tuple[str, str]:
    """Snapshot A, then change the root (one of each: modified, deleted, added); B."""
    es.write("keep.txt", "same\n")
    es.write("mod.txt", "one\ntwo\nthree\n")
    es.write("gone.txt", "bye\n")
    a = es.snap()
    es.write("mod.txt", "one\nTWO\nthree\n")
    (es.root / "gone.txt").unlink()
    es.write("sub/new.txt", "hello\n")
    b = es.snap()
    return a, b


EXPECTED = {("mod.txt", "modified"), ("gone.txt", "deleted"), ("sub/new.txt", "added")}


def test_diff_stat_text_and_json_against_the_disk_and_between_snapshots(es: Earshot) -> None:
    a, b = _two_states(es)
    for args in ((a,), (a, b)):  # against the disk now (== B here), and A to B
        _check_stat(es.run("diff", *args, "--stat").stdout.splitlines())
        _check_text(es.run("diff", *args).stdout.splitlines())
        _check_json(es.json("diff", *args))
    # Against the disk means the disk as it is now, not the last snapshot.
    es.write("later.txt", "later\n")
    changes = es.json("diff", a)["changes"]
    assert ("later.txt", "added") in {(c["path"], c["change"]) for c in changes}


def _check_stat(lines: list[str]) -> None:
    """--stat: one '<mark> <path>' line per change, no patch, then the summary."""
    assert {"~ mod.txt", "- gone.txt", "+ sub/new.txt"} <= set(lines)
    assert not any("keep.txt" in line for line in lines)
    assert not any(line.startswith(("---", "+++", "@@")) for line in lines)
    assert lines[-1] == "1 added, 1 deleted, 1 modified"


def _check_text(lines: list[str]) -> None:
    """Text: the marks plus unified diff lines."""
    assert {"~ mod.txt", "- gone.txt", "+ sub/new.txt"} <= set(lines)
    for expected in ("--- a/mod.txt", "+++ b/mod.txt", "-two", "+TWO", " one", "-bye", "+hello"):
        assert expected in lines
    assert any(line.startswith("@@ ") for line in lines)


def _check_json(doc: Any) -> None:
    assert {(c["path"], c["change"]) for c in doc["changes"]} == EXPECTED
    assert doc["summary"]["added"] == 1
    assert doc["summary"]["deleted"] == 1
    assert doc["summary"]["modified"] == 1
    for change in doc["changes"]:
        assert set(change) >= {"path", "change", "old", "new"}


def test_diff_of_a_snapshot_with_itself_is_empty(es: Earshot) -> None:
    es.write("a.txt", "a\n")
    a = es.snap()
    doc = es.json("diff", a, a)
    assert doc["changes"] == []
    assert es.run("diff", a, a).stdout.strip() == "no changes"


def test_diff_reports_a_mode_change(es: Earshot) -> None:
    es.write("run.sh", "#!/bin/sh\n", mode=0o644)
    a = es.snap()
    (es.root / "run.sh").chmod(0o755)
    doc = es.json("diff", a)
    assert [(c["path"], c["change"]) for c in doc["changes"]] == [("run.sh", "mode")]
    assert "m run.sh" in es.run("diff", a, "--stat").stdout.splitlines()


def test_diff_with_a_bad_id_exits_1_one_line(es: Earshot, check_error: Any) -> None:
    es.write("a.txt", "a\n")
    a = es.snap()
    check_error(es.run("diff", "1234567", expect=None))
    check_error(es.run("diff", a, "zz", "--json", expect=None))


def test_diff_against_the_disk_does_not_list_a_snapshot(es: Earshot) -> None:
    es.write("a.txt", "a\n")
    a = es.snap()
    es.write("a.txt", "changed\n")
    es.run("diff", a, "--stat")
    assert es.ids() == [a]


UNDECODABLE = b"caf\xe9.txt"  # Latin-1 bytes: not UTF-8


@pytest.mark.parametrize("output", ["--json", "--stat"])
def test_diff_of_an_undecodable_file_name_works_under_a_strict_utf8_locale(
    es: Earshot, output: str
) -> None:
    es.write("a.txt", "a\n")
    a = es.snap()
    (es.root / os.fsdecode(UNDECODABLE)).write_bytes(b"x\n")
    # PYTHONIOENCODING=utf-8:strict is what a en_US.UTF-8 locale gives Python.
    env = es.env(PYTHONIOENCODING="utf-8:strict")
    result = es.run("diff", a, output, expect=None, env=env)
    assert result.rc == 0, str(result)
    if output == "--json":
        paths = [c["path"] for c in result.json()["changes"]]
        assert len(paths) == 1
        assert paths[0].encode("utf-8", "surrogateescape") == UNDECODABLE
