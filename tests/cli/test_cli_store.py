"""`earshot stats`, `fsck` (healthy and with a flipped byte), `forget` and `gc`."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

import blake3
import pytest
from earshot_cli import one_line_error

if TYPE_CHECKING:
    from earshot_cli import Cli

STATS_NUMBERS = (
    "snapshots",
    "content_bytes",
    "stored_bytes",
    "disk_bytes",
    "disk_per_content_byte",
    "compression_ratio",
    "dedup_ratio",
)


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _object_count(stats: dict[str, Any]) -> int:
    objects = stats["objects"]
    return sum(objects.values()) if isinstance(objects, dict) else int(objects)


def test_stats_json_has_every_figure_as_a_number(cli: Cli) -> None:
    cli.write("a.txt", "hello " * 200)
    cli.write("b.txt", "hello " * 200)  # same content: deduplicated
    cli.snap()
    stats = cli.json("stats")
    for key in STATS_NUMBERS:
        assert _is_number(stats[key]), (key, stats[key])
    # "objects" is a count per object type, each a number.
    assert isinstance(stats["objects"], dict)
    assert all(_is_number(n) for n in stats["objects"].values())
    assert stats["snapshots"] == 1
    assert stats["objects"]["blob"] == 1
    assert stats["objects"]["snapshot"] == 1
    assert stats["content_bytes"] == 1200
    assert stats["disk_bytes"] > 0


def test_stats_on_an_empty_store_is_all_zero_not_an_error(cli: Cli) -> None:
    stats = cli.json("stats")
    assert stats["snapshots"] == 0
    assert _object_count(stats) == 0
    for key in ("disk_per_content_byte", "compression_ratio", "dedup_ratio"):
        assert stats[key] == 0


def test_fsck_on_a_healthy_store_exits_0_ok(cli: Cli) -> None:
    cli.write("a.txt", "a\n")
    cli.write("d/b.txt", "b\n")
    cli.snap()
    doc = cli.json("fsck")
    assert doc["ok"] is True
    assert doc["problems"] == []
    assert doc["snapshots"] == 1
    assert doc["objects"] > 0
    assert "ok" in cli.run("fsck").stdout


def _corrupt_marker(cli: Cli) -> tuple[str, bytes, str]:
    """Snapshot an incompressible file, then flip one byte of it in data.mdb.

    Returns the snapshot id, the true content and the blob's hex digest.
    """
    marker = os.urandom(3000)  # zstd cannot shrink it: stored raw
    cli.write("marker.bin", marker)
    cli.write("other.txt", "other\n")
    snap_id = cli.snap()
    (data_mdb,) = list((cli.home / "checkpoints").glob("*/data.mdb"))
    needle = marker[1000:1032]
    with open(data_mdb, "r+b") as f:
        data = f.read()
        offsets = []
        at = data.find(needle)
        while at != -1:
            offsets.append(at)
            at = data.find(needle, at + 1)
        assert offsets, "the marker is not stored raw in data.mdb"
        for at in offsets:  # every copy, so a stale page cannot mask it
            f.seek(at + 7)
            f.write(bytes([data[at + 7] ^ 0x5A]))
    return snap_id, marker, blake3.blake3(marker).hexdigest()


def test_fsck_after_a_flipped_byte_exits_1_naming_the_object(cli: Cli) -> None:
    _, _, digest = _corrupt_marker(cli)
    result = cli.run("fsck", "--json", expect=1)
    doc = result.json()
    assert doc["ok"] is False
    assert doc["problems"]
    assert any(digest[:12] in problem for problem in doc["problems"]), doc["problems"]
    text = cli.run("fsck", expect=1).stdout
    assert digest[:12] in text


@pytest.mark.parametrize("force", [False, True], ids=["keep", "force"])
def test_restore_of_a_corrupt_blob_never_writes_wrong_bytes(
    cli: Cli, check_error: Any, force: bool
) -> None:
    snap_id, marker, _ = _corrupt_marker(cli)
    (cli.root / "marker.bin").unlink()
    result = cli.run("restore", snap_id, *(["--force"] if force else []), "--json", expect=None)
    path = cli.root / "marker.bin"
    if path.exists():
        assert path.read_bytes() == marker, f"restore wrote corrupt content\n{result}"
    elif result.rc == 3:
        # Reported and skipped is acceptable too.
        assert "marker.bin" in {s["path"] for s in result.json()["skipped"]}, str(result)
    else:
        # Or an error: exit 1, one line.
        check_error(result)


def test_gc_after_forget_drops_what_only_that_snapshot_used(cli: Cli) -> None:
    cli.write("keep.txt", "kept\n")
    cli.write("old.bin", os.urandom(200_000))
    old = cli.snap()
    (cli.root / "old.bin").unlink()
    cli.snap()
    before = cli.json("stats")

    assert cli.json("forget", old[:8]) == {"forgotten": [old]}
    report = cli.json("gc", "--compact")
    assert report["dead_objects"] > 0
    assert _is_number(report["disk_bytes_before"])
    assert _is_number(report["disk_bytes_after"])
    assert report["disk_bytes_after"] <= report["disk_bytes_before"]

    after = cli.json("stats")
    assert after["snapshots"] == 1
    assert _object_count(after) < _object_count(before)
    assert after["content_bytes"] < before["content_bytes"]
    assert after["disk_bytes"] == report["disk_bytes_after"]


def test_forget_of_an_unknown_id_exits_1_one_line(cli: Cli, check_error: Any) -> None:
    cli.write("a.txt", "a\n")
    snap_id = cli.snap()
    other = ("0" if snap_id[0] != "0" else "1") + snap_id[1:]
    check_error(cli.run("forget", other, "--json", expect=None))
    assert cli.ids() == [snap_id]


@pytest.mark.parametrize("damage", ["unknown-type", "truncated"])
def test_a_damaged_index_entry_is_listed_by_fsck_and_one_line_elsewhere(
    cli: Cli, check_error: Any, damage: str
) -> None:
    from earshot.agent.core.records import TABLES
    from earshot.cas import schema
    from earshot.cas.project import Project

    cli.write("a.txt", "a\n")
    sid = cli.new_session()
    cli.run("bash", "echo b > a.txt", session=sid)
    digest = blake3.blake3(b"b\n").digest()
    project = Project(cli.root, home=cli.home, extra_tables=TABLES)
    with project, project.store.backend.write() as txn:
        raw = txn.get(schema.INDEX, digest)
        assert raw is not None
        bad = b"\0" + bytes(raw[1:]) if damage == "unknown-type" else bytes(raw[:5])
        txn.put(schema.INDEX, digest, bad)
    fsck = cli.run("fsck", expect=1)
    assert f"object {digest.hex()[:12]} is corrupt: its index entry is damaged" in fsck.stdout
    assert "Traceback" not in fsck.stderr
    for args in (("stats",), ("gc",), ("undo",), ("snapshot",)):
        line = check_error(cli.run(*args, session=sid, expect=1))
        assert "is corrupt" in line, args
    assert (cli.root / "a.txt").read_text() == "b\n"


def test_a_damaged_page_of_the_store_is_one_line_naming_fsck_never_a_traceback(
    cli: Cli,
) -> None:
    # Not a record's bytes (each is checked by its digest or seal): the page
    # structure LMDB reads them through. Each page in turn gets its flags byte
    # flipped; every command either works or says so in one line.
    for i in range(40):
        cli.write(f"f{i}.txt", f"file {i}\n")
    cli.run("snapshot")
    cli.run("bash", "echo y > f1.txt")
    (data_mdb,) = list((cli.home / "checkpoints").glob("*/data.mdb"))
    pristine = data_mdb.read_bytes()
    page = 4096
    damaged_seen = 0
    for number in range(2, len(pristine) // page):  # pages 0 and 1: LMDB's meta pages
        data = bytearray(pristine)
        data[number * page + 10] ^= 0x5A  # mp_flags: a branch, leaf or overflow page
        data_mdb.write_bytes(data)
        for command in ("fsck", "log"):
            ran = cli.run(command, expect=None)
            assert "Traceback" not in ran.stderr, (number, str(ran))
            if ran.rc == 1 and "damaged (" in ran.stderr:
                line = one_line_error(ran)
                assert "'earshot fsck'" in line and "nothing was changed" in line, line
                damaged_seen += 1
    data_mdb.write_bytes(pristine)
    assert damaged_seen, "no page flipped was met: the test damaged nothing"
    assert "ok" in cli.run("fsck").stdout
