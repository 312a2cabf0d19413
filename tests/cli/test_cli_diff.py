"""`earshot diff A [B]`: --stat marks, unified diffs, the JSON shape, odd file names."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from earshot_cli import Cli


def _two_states(cli: Cli) -> tuple[str, str]:
    """Snapshot A, then change the root (one of each: modified, deleted, added); B."""
    cli.write("keep.txt", "same\n")
    cli.write("mod.txt", "one\ntwo\nthree\n")
    cli.write("gone.txt", "bye\n")
    a = cli.snap()
    cli.write("mod.txt", "one\nTWO\nthree\n")
    (cli.root / "gone.txt").unlink()
    cli.write("sub/new.txt", "hello\n")
    b = cli.snap()
    return a, b


EXPECTED = {("mod.txt", "modified"), ("gone.txt", "deleted"), ("sub/new.txt", "added")}


def test_diff_stat_text_and_json_against_the_disk_and_between_snapshots(cli: Cli) -> None:
    a, b = _two_states(cli)
    for args in ((a,), (a, b)):  # against the disk now (== B here), and A to B
        _check_stat(cli.run("diff", *args, "--stat").stdout.splitlines())
        _check_text(cli.run("diff", *args).stdout.splitlines())
        _check_json(cli.json("diff", *args))
    # Against the disk means the disk as it is now, not the last snapshot.
    cli.write("later.txt", "later\n")
    changes = cli.json("diff", a)["changes"]
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


def test_diff_of_a_snapshot_with_itself_is_empty(cli: Cli) -> None:
    cli.write("a.txt", "a\n")
    a = cli.snap()
    doc = cli.json("diff", a, a)
    assert doc["changes"] == []
    assert cli.run("diff", a, a).stdout.strip() == "no changes"


def test_diff_reports_a_mode_change(cli: Cli) -> None:
    cli.write("run.sh", "#!/bin/sh\n", mode=0o644)
    a = cli.snap()
    (cli.root / "run.sh").chmod(0o755)
    doc = cli.json("diff", a)
    assert [(c["path"], c["change"]) for c in doc["changes"]] == [("run.sh", "mode")]
    assert "m run.sh" in cli.run("diff", a, "--stat").stdout.splitlines()


def test_diff_with_a_bad_id_exits_1_one_line(cli: Cli, check_error: Any) -> None:
    cli.write("a.txt", "a\n")
    a = cli.snap()
    check_error(cli.run("diff", "1234567", expect=None))
    check_error(cli.run("diff", a, "zz", "--json", expect=None))


def test_diff_against_the_disk_does_not_list_a_snapshot(cli: Cli) -> None:
    cli.write("a.txt", "a\n")
    a = cli.snap()
    cli.write("a.txt", "changed\n")
    cli.run("diff", a, "--stat")
    assert cli.ids() == [a]


UNDECODABLE = b"caf\xe9.txt"  # Latin-1 bytes: not UTF-8


@pytest.mark.parametrize("output", ["--json", "--stat"])
def test_diff_of_an_undecodable_file_name_works_under_a_strict_utf8_locale(
    cli: Cli, output: str
) -> None:
    cli.write("a.txt", "a\n")
    a = cli.snap()
    (cli.root / os.fsdecode(UNDECODABLE)).write_bytes(b"x\n")
    # PYTHONIOENCODING=utf-8:strict is what a en_US.UTF-8 locale gives Python.
    env = cli.env(PYTHONIOENCODING="utf-8:strict")
    result = cli.run("diff", a, output, expect=None, env=env)
    assert result.rc == 0, str(result)
    if output == "--json":
        paths = [c["path"] for c in result.json()["changes"]]
        assert len(paths) == 1
        assert paths[0].encode("utf-8", "surrogateescape") == UNDECODABLE
