"""`earshot snapshot` and `earshot snapshots`: ids, reuse, notes, order, scoped restage, --root."""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from earshot_cli import Cli

from earshot_cli import EARSHOT

# Once in-process, once through the root's daemon (scoped restages of what it saw).
pytestmark = pytest.mark.both_modes

HEX64 = re.compile(r"[0-9a-f]{64}")


def test_snapshot_json_is_one_document_with_a_64_hex_id_not_reused(cli: Cli) -> None:
    cli.write("a.txt", "a\n")
    doc = cli.json("snapshot")
    assert HEX64.fullmatch(doc["id"])
    assert doc["reused"] is False
    assert doc["files"] == 1
    assert doc["files_read"] == 1


def test_snapshot_with_no_change_reuses_the_last_one(cli: Cli) -> None:
    cli.write("a.txt", "a\n")
    first = cli.json("snapshot")
    second = cli.json("snapshot")
    assert second["reused"] is True
    assert second["id"] == first["id"]
    out = cli.run("snapshot").stdout  # the text says so too
    assert first["id"][:12] in out and "reusing" in out
    assert cli.ids() == [first["id"]]


def test_snapshots_json_lists_newest_first_with_each_message_as_note(cli: Cli) -> None:
    made = []
    for i in range(3):
        cli.write("a.txt", f"version {i}\n")
        made.append(cli.snap("-m", f"n{i}"))
    listed = cli.json("snapshots")["snapshots"]
    assert [s["id"] for s in listed] == made[::-1]
    assert [s["note"] for s in listed] == ["n2", "n1", "n0"]
    assert all({"time", "files"} <= set(s) for s in listed)
    times = [s["time_ns"] for s in listed]
    assert times == sorted(times, reverse=True)


def test_snapshots_on_an_empty_store_is_an_empty_list(cli: Cli) -> None:
    assert cli.json("snapshots") == {"snapshots": []}


def test_scoped_snapshot_records_only_the_named_path(cli: Cli) -> None:
    cli.write("a.txt", "a\n")
    cli.write("b.txt", "b\n")
    first = cli.snap()
    cli.write("a.txt", "a changed\n")
    cli.write("b.txt", "b changed\n")
    scoped = cli.json("snapshot", "a.txt")
    assert scoped["reused"] is False
    changes = cli.json("diff", first, scoped["id"])["changes"]
    assert [(c["path"], c["change"]) for c in changes] == [("a.txt", "modified")]
    # A full snapshot afterwards still sees b.txt's change.
    full = cli.snap()
    changes = cli.json("diff", scoped["id"], full)["changes"]
    assert [(c["path"], c["change"]) for c in changes] == [("b.txt", "modified")]


def test_scoped_snapshot_of_a_path_outside_the_root_fails_one_line(
    cli: Cli, check_error: Any
) -> None:
    cli.write("a.txt", "a\n")
    cli.snap()
    (cli.root.parent / "x").write_text("outside\n")
    for outside in ("../x", str(cli.root.parent / "x")):
        line = check_error(cli.run("snapshot", outside, "--json", expect=None))
        assert "outside the root" in line


def test_root_that_does_not_exist_fails_one_line(cli: Cli, check_error: Any) -> None:
    missing = cli.root.parent / "missing"
    for command in ("snapshot", "snapshots"):
        line = check_error(cli.run(command, "--root", str(missing), expect=None))
        assert str(missing) in line
    assert not missing.exists()


def test_default_root_is_the_current_directory(cli: Cli, tmp_path: Path) -> None:
    cli.write("a.txt", "a\n")
    snap_id = cli.snap()  # cwd is the root, no --root
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    listed = cli.json("snapshots", "--root", str(cli.root), cwd=elsewhere)["snapshots"]
    assert [s["id"] for s in listed] == [snap_id]
    # ... and a different cwd is a different (empty) project.
    assert cli.json("snapshots", cwd=elsewhere) == {"snapshots": []}
    # A relative --root is taken from the cwd.
    relative = cli.json("snapshots", "--root", "root", cwd=tmp_path)["snapshots"]
    assert [s["id"] for s in relative] == [snap_id]


def test_snapshot_writes_nothing_inside_the_root(cli: Cli, tree: Any) -> None:
    cli.write("a.txt", "a\n")
    cli.write("d/b.txt", "b\n")
    before = tree(cli.root, mtimes=True)
    cli.snap()
    cli.run("snapshots")
    assert tree(cli.root, mtimes=True) == before
    assert cli.store_dir().parent == cli.home / "checkpoints"


def test_scoped_snapshot_after_a_restore_builds_on_the_restored_state(cli: Cli) -> None:
    cli.write("a.txt", "a\n")
    a = cli.snap()
    cli.write("a.txt", "edited\n")
    cli.write("x.txt", "extra\n")
    cli.json("restore", a, "--force")  # disk: a.txt == "a\n", no x.txt
    cli.write("b.txt", "b\n")
    scoped = cli.snap("b.txt")
    changes = cli.json("diff", a, scoped)["changes"]
    assert [(c["path"], c["change"]) for c in changes] == [("b.txt", "added")]


def test_verbose_snapshot_logs_to_stderr_and_keeps_stdout_json(cli: Cli) -> None:
    cli.write("a.txt", "a\n")
    result = cli.run("snapshot", "-vv", "--json")
    assert result.json()["reused"] is False
    assert result.stderr.strip() != ""


def in_mount_namespace(
    cli: Cli, mounts: list[tuple[str, str]], *commands: str, then: str = ""
) -> list[Any]:
    """Run earshot commands (each with --json) in a private mount namespace holding ``mounts``.

    ``mounts``: (file system type, path under the root); ``then``: a shell
    line run after mounting. Skips when this machine cannot make a mount
    namespace (no unshare, or not allowed).
    """
    if shutil.which("unshare") is None:
        pytest.skip("unshare is not installed")
    script = ["set -e"]
    for kind, rel in mounts:
        (cli.root / rel).mkdir(parents=True, exist_ok=True)
        script.append(f"mount -t {kind} {kind} {shlex.quote(str(cli.root / rel))}")
    script += [then, "echo mounted"]
    for command in commands:
        script.append(f"echo; {shlex.quote(str(EARSHOT))} {command} --json || true")
    proc = subprocess.run(
        ["unshare", "-m", "sh", "-c", "\n".join(script)],
        cwd=cli.root,
        env=cli.env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if not proc.stdout.startswith("mounted"):
        pytest.skip(f"cannot mount in a private namespace here: {proc.stderr.strip()}")
    docs = proc.stdout.split("\n", 1)[1].strip().split("\n\n")
    assert len(docs) == len(commands), proc.stdout + proc.stderr
    return [json.loads(d) for d in docs]


def test_snapshot_skips_and_lists_special_file_systems_and_records_a_tmpfs(
    cli: Cli,
) -> None:
    cli.write("a.txt", "a\n")
    mounts = [("proc", "my proc"), ("sysfs", "sys"), ("devpts", "dev/pts"), ("tmpfs", "t")]
    (doc,) = in_mount_namespace(cli, mounts, "snapshot", then="echo in-tmpfs > t/f")
    assert sorted(doc.get("skipped", []), key=lambda s: s["path"]) == [
        {"path": "dev/pts", "reason": "special file system (devpts)"},
        {"path": "my proc", "reason": "special file system (proc)"},
        {"path": "sys", "reason": "special file system (sysfs)"},
    ], doc
    assert doc["files"] == 2  # a.txt and t/f: a tmpfs holds real files
    assert doc["unrecorded_paths"] == []


def test_restore_force_leaves_a_special_file_system_mounted_since_alone(cli: Cli) -> None:
    cli.write("a.txt", "a\n")
    (cli.root / "sys").mkdir()
    (cli.root / "sys" / "file-under-the-mount").write_text("hidden once mounted\n")
    before = cli.snap()
    snapped, restored = in_mount_namespace(
        cli, [("sysfs", "sys")], "snapshot", f"restore {before} --force"
    )
    assert snapped["skipped"] == [{"path": "sys", "reason": "special file system (sysfs)"}]
    assert restored["written"] == [] and restored["deleted"] == []
    assert {
        "path": "sys",
        "reason": "not recorded on disk (a special file or file system); left alone",
    } in (restored["skipped"])
