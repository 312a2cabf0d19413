"""Which files under a root a live process maps shared and writable (``cas/mapped.py``)."""

from __future__ import annotations

import mmap
import os
from pathlib import Path

from earshot.cas.mapped import shared_writable_mappings


def _proc(tmp_path: Path, maps: dict[str, str]) -> str:
    proc = tmp_path / "proc"
    for pid, text in maps.items():
        (proc / pid).mkdir(parents=True)
        (proc / pid / "maps").write_text(text)
    (proc / "self").mkdir()  # not a pid: never read
    return str(proc)


def test_only_shared_writable_mappings_under_the_root_are_listed(tmp_path: Path) -> None:
    proc = _proc(
        tmp_path,
        {
            "10": (
                "7f00-7f01 rw-s 00000000 08:01 11 /r/db.shm\n"
                "7f01-7f02 r--s 00000000 08:01 12 /r/read-only\n"
                "7f02-7f03 rw-p 00000000 08:01 13 /r/private\n"
                "7f03-7f04 rw-s 00000000 08:01 14 /elsewhere/x\n"
                "7f04-7f05 rw-s 00000000 08:01 15 /r2/not-under\n"
                "7f05-7f06 rw-s 00000000 00:01 16 /dev/zero (deleted)\n"
                "7f06-7f07 rw-p 00000000 00:00 0 [heap]\n"
            ),
            "11": "7f00-7f01 rw-s 00000000 08:01 17 /r/sub dir/with space\n",
        },
    )
    assert shared_writable_mappings("/r", proc) == {"db.shm", "sub dir/with space"}


def test_an_ambiguous_name_is_listed_both_ways(tmp_path: Path) -> None:
    proc = _proc(
        tmp_path,
        {
            "10": "7f00-7f01 rw-s 00000000 08:01 11 /r/gone (deleted)\n"
            "7f01-7f02 rw-s 00000000 08:01 12 /r/two\\012lines\n"
        },
    )
    assert shared_writable_mappings("/r/", proc) == {
        "gone (deleted)",
        "gone",
        "two\\012lines",
        "two\nlines",
    }


def test_a_live_mapping_of_this_process_is_found_in_the_real_proc(tmp_path: Path) -> None:
    target = tmp_path / "data.bin"
    target.write_bytes(b"\0" * 4096)
    with open(target, "r+b") as f:
        mapping = mmap.mmap(f.fileno(), 0)
    try:
        assert "data.bin" in shared_writable_mappings(os.path.realpath(tmp_path))
    finally:
        mapping.close()
    assert "data.bin" not in shared_writable_mappings(os.path.realpath(tmp_path))


def test_no_proc_lists_nothing(tmp_path: Path) -> None:
    assert shared_writable_mappings("/r", str(tmp_path / "absent")) == set()
