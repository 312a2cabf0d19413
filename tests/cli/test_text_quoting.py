"""Names with control characters: quoted in text output as git quotes them, real in JSON.

One file name must never pass for several lines of output. The CLI tests run
the real ``earshot`` script (``cli``); ``quote_path`` itself is property-tested.
"""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING, Any

from hypothesis import example, given
from hypothesis import strategies as st

from earshot.cli.render import one_line, quote_path

if TYPE_CHECKING:
    from earshot_cli import Cli

EVIL = "evil\n+ fake.txt"
QUOTED = '"evil\\n+ fake.txt"'


def _lines_naming(text: str, needle: str) -> list[str]:
    return [line for line in text.splitlines() if needle in line]


def _write_evil(cli: Cli) -> None:
    calls = [{"tool": "write_file", "path": EVIL, "content": "x\n"}]
    cli.run("exec", stdin=json.dumps(calls))


def test_log_prints_a_newline_name_quoted_on_one_line(cli: Cli) -> None:
    _write_evil(cli)
    out = cli.run("log").stdout
    assert "fake.txt" not in out.replace(QUOTED, "")
    assert len(_lines_naming(out, QUOTED)) == 1
    (batch,) = cli.json("log")["batches"]
    assert batch["calls"][0]["path"] == EVIL
    assert batch["changes"][0]["path"] == EVIL


def test_diff_stat_of_a_batch_and_of_snapshots_quotes_the_name(cli: Cli) -> None:
    snap = cli.snap()
    _write_evil(cli)
    for args in (("diff", "1", "--stat"), ("diff", snap, "--stat"), ("diff", snap)):
        out = cli.run(*args).stdout
        assert f"+ {QUOTED}" in out.splitlines(), out
        assert "\n+ fake.txt" not in out
    doc = cli.json("diff", "1")
    assert [c["path"] for c in doc["changes"]] == [EVIL]


def test_undo_and_redo_impact_quote_the_name(cli: Cli) -> None:
    _write_evil(cli)
    dry = cli.run("undo", "--dry-run").stdout
    assert f"  would delete  {QUOTED}" in dry.splitlines()
    assert cli.json("undo", "--dry-run")["deleted"] == [EVIL]
    done = cli.run("undo").stdout
    assert f"  delete  {QUOTED}" in done.splitlines()
    redone = cli.run("redo").stdout
    assert f"  restore {QUOTED}" in redone.splitlines()


def test_restore_lists_the_name_quoted(cli: Cli) -> None:
    snap = cli.snap()
    (cli.root / "tab\there").write_text("t\n")
    out = cli.run("restore", snap, "--dry-run", expect=3).stdout
    assert any(line.startswith('  skipped "tab\\there": ') for line in out.splitlines()), out
    doc = cli.json("restore", snap, "--dry-run", expect=3)
    assert doc["skipped"][0]["path"] == "tab\there"


def test_snapshot_lists_an_unrecorded_name_quoted(cli: Cli) -> None:
    os.mkfifo(cli.root / "fifo\nnot recorded (special): x")
    out = cli.run("snapshot").stdout
    (line,) = [line for line in out.splitlines() if line.startswith("  not recorded")]
    assert all(line.startswith(("snapshot", "  ")) for line in out.splitlines()), out
    assert line == '  not recorded (special): "fifo\\nnot recorded (special): x"'
    doc = cli.json("snapshot")
    assert [p["path"] for p in doc["unrecorded_paths"]] == ["fifo\nnot recorded (special): x"]


def test_an_error_naming_a_newline_path_stays_one_line(cli: Cli, check_error: Any) -> None:
    cli.json("session", "new")
    ran = cli.run("edit", "no\nsuch", "--old", "a", "--new", "b", expect=1)
    assert "no\\nsuch" in check_error(ran)


@example("plain/name.txt")
@example('q"uote')
@example("back\\slash")
@example("bad\udcff")
@example("line\u2028sep")
@example("nel\x85")
@example("café/名前")
@given(st.text())
def test_quote_path_is_one_line_and_leaves_plain_names_alone(path: str) -> None:
    quoted = quote_path(path)
    assert len(quoted.splitlines()) <= 1
    assert len(one_line(path).splitlines()) <= 1
    quoted.encode("utf-8")  # no surrogates left: printable under any locale
    plain = not any(
        c in '"\\' or ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F or c in "\u2028\u2029" for c in path
    ) and not any(0xDC80 <= ord(c) <= 0xDCFF for c in path)
    if plain:
        assert quoted == path
    else:
        assert quoted.startswith('"') and quoted.endswith('"')


def test_quote_path_uses_git_escapes() -> None:
    assert quote_path("a\nb") == '"a\\nb"'
    assert quote_path('t\tq"b\\') == '"t\\tq\\"b\\\\"'
    assert quote_path("bell\x07del\x7f") == '"bell\\adel\\177"'
    assert quote_path("bad\udcff") == '"bad\\377"'
    assert quote_path("café") == "café"
