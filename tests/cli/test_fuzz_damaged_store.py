"""A real store's LMDB pages damaged at random, then read: every command works, or
says in one line that the store is damaged and to run fsck; never a traceback.
fsck never dies by a signal; another command may, where LMDB itself does
(``damaged_or_refused`` says when).

test_cli_store.py flips each page's flags byte in turn; here the bytes are
many and anywhere in a page (its header, its node pointers, its nodes), in
branch, leaf and overflow pages and in the meta pages LMDB starts from. Each
example runs the real script four times, so the profile's count is cut to 6%.
"""

from __future__ import annotations

import re
import shutil
import signal
import struct
import tempfile
from pathlib import Path

import pytest
from earshot_cli import Cli, Ran
from fuzz import examples
from hypothesis import example, given
from hypothesis import strategies as st

PAGE = 4096
#: LMDB's page flags (mp_flags, 2 bytes at offset 10 of a page).
KINDS = {"branch": 0x01, "leaf": 0x02, "overflow": 0x04, "meta": 0x08}
COMMANDS = (("log",), ("snapshots",), ("fsck",), ("undo",))


class Store:
    def __init__(self, top: Path) -> None:
        self.top = top
        root = top / "root"
        root.mkdir()
        cli = Cli(top / "home", root)
        for i in range(60):
            cli.write(f"d{i % 4}/f{i}.txt", f"file {i}\n" * (i + 1))
        self.session = cli.new_session()
        cli.run("bash", "echo y > d0/f1.txt; rm d1/f5.txt", session=self.session)
        cli.run("snapshot")
        cli.run("bash", "mkdir e && echo z > e/g", session=self.session)
        (self.data,) = (top / "home" / "checkpoints").glob("*/data.mdb")
        shutil.copytree(root, top / "root-as-recorded", symlinks=True)
        self.pristine = self.data.read_bytes()
        flags = [
            struct.unpack_from("<H", self.pristine, n * PAGE + 10)[0] for n in range(self.pages)
        ]
        self.kinds = {k: [n for n, f in enumerate(flags) if f & bit] for k, bit in KINDS.items()}

    @property
    def pages(self) -> int:
        return len(self.pristine) // PAGE


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Store:
    with pytest.MonkeyPatch.context() as env:
        env.setenv("EARSHOT_WATCH", "never")  # before the autouse fixture that says so
        return Store(tmp_path_factory.mktemp("store"))


#: LMDB's own assertion, after which it aborts the process (liblmdb 0.9, mdb.c).
LMDB_ABORT = re.compile(r"\S*mdb\.c:\d+: Assertion '.*' failed in mdb_\w+\(\)")


def damaged_or_refused(ran: Ran) -> None:
    """The contract: done, or one line saying the store (or a record of it) is damaged.

    One known limit: LMDB trusts a page's own number, bounds and node offsets,
    and reads the file through a map. A command that reads or writes through
    a damaged page can die by a signal, which Python cannot catch: SIGABRT on
    LMDB's own assertion (a leaf whose page number was flipped, at the next
    write that touches it, ``mdb_page_touch``; a branch whose bounds were
    flipped, at the next cursor over it, ``mdb_cursor_next``), or SIGBUS, with
    nothing said, when a flipped node offset points past the end of the file
    (a leaf's first node pointer, bytes 16-17, xor 0xC0). Checking every page
    before each command costs seconds on a large store; ``fsck``, where the
    others send the person, checks the pages without LMDB first, so it never
    dies so.
    """
    if ran.rc < 0 and ran.args[0] != "fsck":
        if ran.rc == -signal.SIGABRT:
            assert LMDB_ABORT.fullmatch(ran.stderr.strip()), str(ran)
        else:
            assert ran.rc in (-signal.SIGBUS, -signal.SIGSEGV) and not ran.stderr, str(ran)
        return
    assert ran.rc >= 0, f"killed by signal {-ran.rc}\n{ran}"
    assert "Traceback" not in ran.stderr, str(ran)
    lines = ran.stderr.splitlines()
    assert all(line.startswith("earshot: ") for line in lines), str(ran)
    if ran.rc in (0, 3):
        return
    assert ran.rc == 1 and lines, str(ran)
    if ran.args[0] == "fsck" and "problems (listed on stdout)" in lines[-1]:
        return  # fsck's own report: each problem on stdout
    # An interrupted batch the damage brought back (a stale page) is said first.
    assert any(word in lines[-1] for word in ("fsck", "damaged", "corrupt")), str(ran)


pages = st.sampled_from(sorted(KINDS))
flips = st.lists(
    st.tuples(st.integers(0, 63) | st.integers(0, PAGE - 1), st.integers(1, 255)),
    min_size=1,
    max_size=12,
)


@examples(0.06)
@given(pages, st.integers(0, 10**6), flips)
@example("meta", 0, [(20, 0x01)])  # the meta page's format version: py-lmdb's own check
@example("branch", 0, [(12, 0xFF), (14, 0xFF)])  # lower and upper bounds of its nodes
@example("leaf", 0, [(0, 0x01)])  # its own page number: the next write through it aborts
@example("leaf", 21, [(17, 0xC0)])  # its first node past the end of the file: SIGBUS
@example("leaf", 3, [(12, 20)])  # its lower bound: an index entry lost, an object missing
@example("leaf", 0, [(18, 1)])  # LMDB's list of tables: a table lost would look new and empty
@example("leaf", 0, [(10, 0x04)])  # a leaf flagged an overflow page too: a commit's EIO
def test_a_store_with_damaged_pages_is_read_or_refused_in_one_line(
    store: Store, kind: str, pick: int, damage: list[tuple[int, int]]
) -> None:
    candidates = store.kinds[kind] or list(range(2, store.pages))
    number = candidates[pick % len(candidates)]
    data = bytearray(store.pristine)
    for offset, xor in damage:
        data[number * PAGE + offset] ^= xor
    root = store.top / "root"
    shutil.rmtree(root)  # as recorded again: an undo of an earlier example changed it
    shutil.copytree(store.top / "root-as-recorded", root, symlinks=True)
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "home"
        shutil.copytree(store.top / "home", home, ignore=shutil.ignore_patterns("reserve"))
        (home / store.data.relative_to(store.top / "home")).write_bytes(data)
        cli = Cli(home, root)
        for args in COMMANDS:
            damaged_or_refused(cli.run(*args, session=store.session, expect=None, timeout=120))
