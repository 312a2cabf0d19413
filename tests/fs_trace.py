"""What a command did to the file system, recorded with strace, as operations a crash model replays.

``record(argv, watched, ...)`` runs a command under ``strace -f`` and keeps
the calls that change files under the watched directories: writes (with
their bytes), truncations, creations, mkdir, rmdir, unlink, rename, link,
symlink, chmod, and the barriers (fsync, fdatasync, a directory's fsync,
sync). Reads are not traced (they are most of the calls and change
nothing), so a write's offset comes from the file's size (``O_APPEND``) or
from the position the calls seen so far give it (open, write, lseek);
``check_replay`` proves the whole list rebuilds the state the command
really left, byte for byte, so a call the parser got wrong cannot pass
unseen.

The operations name files by *node* (an inode: a base file's inode number,
or the call that created it), so a write lands on the file it was made to
even when a crash state lacks the rename that later moved it.
"""

from __future__ import annotations

import os
import re
import stat
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: The calls traced: everything that changes a file's bytes, a name or a
#: mode, the barriers, and what the parser needs to follow paths (cwd, umask,
#: children). ``read`` is left out on purpose (see the module docstring).
TRACED = (
    "open,openat,creat,write,pwrite64,writev,pwritev,pwritev2,lseek,ftruncate,truncate,"
    "fallocate,rename,renameat,renameat2,unlink,unlinkat,rmdir,mkdir,mkdirat,link,linkat,"
    "symlink,symlinkat,chmod,fchmod,fchmodat,fsync,fdatasync,sync,syncfs,chdir,fchdir,"
    "umask,clone,clone3,fork,vfork,copy_file_range,sendfile,msync"
)
#: Calls whose effect the model does not replay: seen on a watched file, the
#: recording is refused rather than trusted.
UNSUPPORTED = ("copy_file_range", "sendfile", "msync")
#: Written through a shared map (LMDB's reader table), never by a call:
#: left as the base has it. Its content is reset by the first opener.
UNTRACKED_NAMES = ("lock.mdb",)

META = frozenset({"create", "mkdir", "rmdir", "unlink", "rename", "link", "symlink", "chmod"})
DATA = frozenset({"write", "truncate", "extend"})
BARRIERS = frozenset({"fsync", "fdatasync", "dirsync", "sync"})


@dataclass(frozen=True)
class Op:
    """One change or barrier. ``node`` names the file a data op or fsync acts on."""

    kind: str
    path: str = ""
    dest: str = ""
    node: str = ""
    offset: int = 0
    size: int = 0
    data: bytes = b""
    mode: int = 0
    synced: bool = False  # written through O_SYNC/O_DSYNC: durable when the call returns
    origin: str = ""  # a data op on a file of the base: where the base holds it


class TraceError(Exception):
    """The recording cannot be trusted (an unsupported call, or a replay that differs)."""


# -- the model of a tree --------------------------------------------------------------


@dataclass
class Node:
    kind: str  # "file", "dir", "link"
    id: str
    mode: int = 0o644
    data: bytearray = field(default_factory=bytearray)
    target: str = ""
    origin: str | None = None  # for a directory: the base path its unlisted children come from


_GONE = None


class Tree:
    """The watched directories as the operations leave them, over a base copy.

    Only what the operations touched is held (``entries``); anything else is
    read from ``base``, the copy of the watched directories taken before the
    command (``to_base`` maps a live path to its place there).
    """

    def __init__(self, to_base: Any, from_base: Any) -> None:
        self.to_base = to_base
        self.from_base = from_base
        self.entries: dict[str, Node | None] = {}
        self.nodes: dict[str, Node] = {}
        self.origins: dict[str, str] = {}  # node id -> base path, to load a node by id

    # lookups

    def lookup(self, path: str) -> Node | None:
        if path in self.entries:
            return self.entries[path]
        base = self._base_path(path)
        if base is None:
            return None
        node = self._load(base)
        if node is not None:
            self.entries[path] = node
        return node

    def _base_path(self, path: str) -> str | None:
        parent, rest = path, ""
        while True:
            head, tail = os.path.split(parent)
            if head == parent:
                return self.to_base(path)
            rest = f"{tail}/{rest}" if rest else tail
            parent = head
            if parent in self.entries:
                above = self.entries[parent]
                if above is None or above.kind != "dir" or above.origin is None:
                    return None
                return os.path.join(above.origin, rest)

    def _load(self, base: str | None) -> Node | None:
        if base is None:
            return None
        try:
            st = os.lstat(base)
        except (FileNotFoundError, NotADirectoryError):
            return None
        node_id = f"b{st.st_ino}"
        if node_id in self.nodes:
            return self.nodes[node_id]
        mode = stat.S_IMODE(st.st_mode)
        if stat.S_ISDIR(st.st_mode):
            node = Node("dir", node_id, mode, origin=base)
        elif stat.S_ISLNK(st.st_mode):
            node = Node("link", node_id, mode, target=os.readlink(base))
        elif stat.S_ISREG(st.st_mode):
            node = Node("file", node_id, mode, bytearray(Path(base).read_bytes()))
        else:
            raise TraceError(f"a special file in the base: {base}")
        self.nodes[node_id] = node
        self.origins[node_id] = base
        return node

    def node(self, op: Op) -> Node | None:
        """The node a data op acts on: made by an applied op, or a base file loaded now."""
        if op.node in self.nodes:
            return self.nodes[op.node]
        if not op.origin:
            return None  # created by an op this state lacks
        # Untouched by any applied op: where the base has it, or under a
        # directory moved since.
        places = [self.from_base(op.origin)]
        for path, node in list(self.entries.items()):
            if node is not None and node.origin and op.origin.startswith(node.origin + "/"):
                places.append(path + op.origin[len(node.origin) :])
        for place in places:
            found = self.lookup(place) if place else None
            if found is not None and found.id == op.node:
                return found
        return self._load(op.origin)  # out of reach: its bytes change nothing seen

    def children(self, path: str) -> list[str]:
        prefix = path + "/"
        return [p for p in self.entries if p.startswith(prefix)]

    # changes

    def apply(self, op: Op, keep: int | None = None) -> None:
        """Apply one op; ``keep`` cuts a write short (a torn write keeps its first bytes)."""
        kind = op.kind
        if kind in DATA:
            node = self.node(op)
            if node is None or node.kind != "file":
                return
            if kind == "write":
                data = op.data if keep is None else op.data[:keep]
                end = op.offset + len(data)
                if len(node.data) < op.offset:
                    node.data.extend(bytes(op.offset - len(node.data)))
                node.data[op.offset : end] = data
            elif kind == "truncate":
                del node.data[op.size :]
                node.data.extend(bytes(op.size - len(node.data)))
            else:  # extend (fallocate)
                node.data.extend(bytes(max(0, op.size - len(node.data))))
            return
        if kind == "create":
            self._put(op.path, self._new(op.node, Node("file", op.node, op.mode)))
        elif kind == "mkdir":
            self._put(op.path, self._new(op.node, Node("dir", op.node, op.mode)))
        elif kind == "symlink":
            self._put(op.path, self._new(op.node, Node("link", op.node, 0o777, target=op.dest)))
        elif kind in ("unlink", "rmdir"):
            for child in self.children(op.path):
                self.entries[child] = _GONE
            self.entries[op.path] = _GONE
        elif kind == "link":
            node = self.lookup(op.path)
            if node is not None:
                self._put(op.dest, node)
        elif kind == "rename":
            self._rename(op.path, op.dest)
        elif kind == "chmod":
            node = self.lookup(op.path)
            if node is not None:
                node.mode = op.mode

    def _new(self, node_id: str, node: Node) -> Node:
        self.nodes[node_id] = node
        return node

    def _put(self, path: str, node: Node) -> None:
        old = self.lookup(path)
        if old is not None and old.kind == "dir":
            for child in self.children(path):
                self.entries[child] = _GONE
        self.entries[path] = node

    def _rename(self, src: str, dst: str) -> None:
        node = self.lookup(src)
        if node is None or src == dst:
            return
        if node.kind == "dir":
            # Pin what lies under the destination, then carry the source's
            # known children over; the rest follow through the node's origin.
            for child in self.children(dst):
                self.entries[child] = _GONE
            moved = {dst + p[len(src) :]: self.entries[p] for p in self.children(src)}
            for child in self.children(src):
                del self.entries[child]
            self.entries.update(moved)
        self.entries[src] = _GONE
        self.entries[dst] = node


# -- parsing strace's output ------------------------------------------------------------

_LINE = re.compile(r"^(\d+) +(.*)$")
_CALL = re.compile(r"^(\w+)\((.*)\) += (-?\d+|0x[0-9a-f]+|\?)(?:<(.*?)>)?(?: .*)?$")
_HEX = re.compile(r"\\x([0-9a-f]{2})")
_FD = re.compile(r"^(-?\d+|AT_FDCWD)<(.*)>(\(deleted\))?$")
_IOV = re.compile(r'iov_base="((?:\\x[0-9a-f]{2})*)"')


def _bytes(text: str) -> bytes:
    return bytes.fromhex(text.replace("\\x", ""))


def _decode_path(text: str) -> str:
    return os.fsdecode(_bytes(text))  # " (deleted)" kept: such a file is out of reach


def _split_args(text: str) -> list[str]:
    """Top-level arguments: commas inside quotes, brackets and braces do not split."""
    out, depth, quoted, start = [], 0, False, 0
    for i, ch in enumerate(text):
        if quoted:
            if ch == '"':
                quoted = False
        elif ch == '"':
            quoted = True
        elif ch in "[{":
            depth += 1
        elif ch in "]}":
            depth -= 1
        elif ch == "," and depth == 0:
            out.append(text[start:i].strip())
            start = i + 1
    out.append(text[start:].strip())
    return out


def _string(arg: str) -> bytes:
    if not arg.startswith('"'):
        raise TraceError(f"not a string: {arg[:40]}")
    return _bytes(arg[1 : arg.rindex('"')])


def _fd(arg: str) -> tuple[str, str]:
    """``3</path>`` or ``AT_FDCWD</dir>``: the descriptor and its path."""
    match = _FD.match(arg)
    if match is None:
        raise TraceError(f"a descriptor without its path: {arg[:40]}")
    gone = " (deleted)" if match.group(3) else ""  # a memfd, or a file unlinked while open
    return match.group(1), _decode_path(match.group(2)) + gone


@dataclass
class _Proc:
    cwd: str
    umask: int


class Parser:
    """Turns strace lines into ops, following each process's cwd and umask."""

    def __init__(
        self, watched: list[str], to_base: Any, from_base: Any, cwd: str, umask: int
    ) -> None:
        self.watched = [w.rstrip("/") for w in watched]
        self.tree = Tree(to_base, from_base)
        self.ops: list[Op] = []
        self.procs: dict[str, _Proc] = {}
        self.first = _Proc(cwd, umask)
        self.pending: dict[str, str] = {}
        self.position: dict[str, int] = {}  # per path: the offset a plain write lands at
        self.flags: dict[tuple[str, str], str] = {}  # (fd, path) -> open flags
        self.created = 0

    def is_watched(self, path: str) -> bool:
        if path.endswith(" (deleted)") or os.path.basename(path) in UNTRACKED_NAMES:
            return False
        return any(path == w or path.startswith(w + "/") for w in self.watched)

    def _proc(self, pid: str) -> _Proc:
        if pid not in self.procs:
            self.procs[pid] = _Proc(self.first.cwd, self.first.umask)
        return self.procs[pid]

    def _resolve(self, pid: str, dirfd: str | None, name: bytes) -> str:
        text = os.fsdecode(name)
        if text.startswith("/"):
            return os.path.normpath(text)
        base = self._proc(pid).cwd if dirfd is None else _fd(dirfd)[1]
        return os.path.normpath(os.path.join(base, text))

    def emit(self, op: Op) -> None:
        self.ops.append(op)
        self.tree.apply(op)

    def _node_id(self) -> str:
        self.created += 1
        return f"n{self.created}"

    def feed(self, line: str) -> None:
        match = _LINE.match(line.rstrip("\n"))
        if match is None:
            return
        pid, rest = match.groups()
        if rest.startswith(("---", "+++")):
            return
        if rest.endswith("<unfinished ...>"):
            self.pending[pid] = rest[: -len("<unfinished ...>")].rstrip()
            return
        if rest.startswith("<..."):
            head = self.pending.pop(pid, None)
            if head is None:
                return
            rest = head + rest[rest.index("resumed>") + len("resumed>") :]
        call = _CALL.match(rest)
        if call is None:
            return
        name, args, ret, ret_path = call.groups()
        if ret == "?" or ret.startswith("-"):
            return  # failed or never returned: changed nothing
        number = int(ret, 8) if re.fullmatch(r"0[0-7]+", ret) else int(ret, 0)  # umask's is octal
        self.call(pid, name, _split_args(args), number, ret_path)

    def call(self, pid: str, name: str, args: list[str], ret: int, ret_path: str | None) -> None:
        proc = self._proc(pid)
        if name in ("clone", "clone3", "fork", "vfork"):
            self.procs[str(ret)] = _Proc(proc.cwd, proc.umask)
        elif name == "chdir":
            proc.cwd = self._resolve(pid, None, _string(args[0]))
        elif name == "fchdir":
            proc.cwd = _fd(args[0])[1]
        elif name == "umask":
            proc.umask = int(args[0], 8)
        elif name in ("open", "openat", "creat"):
            self._open(pid, name, args, ret, ret_path)
        elif name in ("write", "pwrite64", "writev", "pwritev", "pwritev2"):
            self._write(name, args, ret)
        elif name == "lseek":
            path = _fd(args[0])[1]
            if self.is_watched(path):
                self.position[path] = ret
        elif name in ("ftruncate", "truncate"):
            path = (
                _fd(args[0])[1]
                if name == "ftruncate"
                else self._resolve(pid, None, _string(args[0]))
            )
            self._data(path, "truncate", size=int(args[1]))
        elif name == "fallocate":
            path = _fd(args[0])[1]
            if self.is_watched(path):
                if args[1] != "0":
                    raise TraceError(f"fallocate {args[1]} on {path}: not modelled")
                self._data(path, "extend", size=int(args[2]) + int(args[3]))
        elif name in ("fsync", "fdatasync"):
            path = _fd(args[0])[1]
            if self.is_watched(path):
                node = self.tree.lookup(path)
                if node is not None:
                    kind = "dirsync" if node.kind == "dir" else name
                    self.emit(Op(kind, path=path, node=node.id))
        elif name in ("sync", "syncfs"):
            self.emit(Op("sync"))
        elif name in UNSUPPORTED:
            paths = [_fd(a)[1] for a in args if _FD.match(a)]
            if any(self.is_watched(p) for p in paths):
                raise TraceError(f"{name} on {paths}: not modelled")
        else:
            self._meta(pid, name, args)

    def _open(self, pid: str, name: str, args: list[str], fd: int, ret_path: str | None) -> None:
        if ret_path is None:
            return
        path = _decode_path(ret_path)
        if name == "creat":
            flags, mode = "O_WRONLY|O_CREAT|O_TRUNC", args[1]
        elif name == "open":
            flags, mode = args[1], args[2] if len(args) > 2 else "0"
        else:
            flags, mode = args[2], args[3] if len(args) > 3 else "0"
        if not self.is_watched(path) or not any(
            f in flags for f in ("O_WRONLY", "O_RDWR", "O_CREAT", "O_TRUNC")
        ):
            return
        self.flags[(str(fd), path)] = flags
        self.flags[("", path)] = flags  # for a descriptor dup'ed from it (a shell's ">>")
        self.position[path] = 0
        node = self.tree.lookup(path)
        if node is None and "O_CREAT" in flags:
            umask = self._proc(pid).umask
            self.emit(Op("create", path=path, node=self._node_id(), mode=int(mode, 8) & ~umask))
        elif node is not None and node.kind == "file" and "O_TRUNC" in flags and node.data:
            origin = self.tree.origins.get(node.id, "")
            self.emit(Op("truncate", path, node=node.id, size=0, origin=origin))

    def _write(self, name: str, args: list[str], written: int) -> None:
        fd, path = _fd(args[0])
        if not self.is_watched(path) or written == 0:
            return
        node = self.tree.lookup(path)
        if node is None or node.kind != "file":
            raise TraceError(f"{name} to {path}, which the model lacks")
        if name in ("writev", "pwritev", "pwritev2"):
            data = b"".join(_bytes(part) for part in _IOV.findall(args[1]))
        else:
            data = _string(args[1])
        data = data[:written]
        flags = self.flags.get((fd, path)) or self.flags.get(("", path), "")
        if name in ("pwrite64",) or name in ("pwritev", "pwritev2"):
            offset = int(args[3])
        elif "O_APPEND" in flags:
            offset = len(node.data)
        else:
            offset = self.position.get(path, 0)
        if name in ("write", "writev"):
            self.position[path] = offset + len(data)
        synced = "O_SYNC" in flags or "O_DSYNC" in flags
        origin = self.tree.origins.get(node.id, "")
        self.emit(
            Op("write", path, node=node.id, offset=offset, data=data, synced=synced, origin=origin)
        )

    def _data(self, path: str, kind: str, size: int) -> None:
        if not self.is_watched(path):
            return
        node = self.tree.lookup(path)
        if node is None or node.kind != "file":
            raise TraceError(f"{kind} of {path}, which the model lacks")
        self.emit(
            Op(kind, path, node=node.id, size=size, origin=self.tree.origins.get(node.id, ""))
        )

    def _meta(self, pid: str, name: str, args: list[str]) -> None:
        def at(i: int) -> str:  # a (dirfd, name) pair starting at args[i]
            return self._resolve(pid, args[i], _string(args[i + 1]))

        def plain(i: int) -> str:
            return self._resolve(pid, None, _string(args[i]))

        if name == "mkdir":
            path, mode = plain(0), args[1]
        elif name == "mkdirat":
            path, mode = at(0), args[2]
        elif name in ("unlink", "rmdir"):
            path = plain(0)
            if self.is_watched(path):
                self.emit(Op(name, path=path))
            return
        elif name == "unlinkat":
            path = at(0)
            if self.is_watched(path):
                self.emit(Op("rmdir" if "AT_REMOVEDIR" in args[2] else "unlink", path=path))
            return
        elif name in ("rename", "renameat", "renameat2"):
            src, dst = (plain(0), plain(1)) if name == "rename" else (at(0), at(2))
            if name == "renameat2" and "RENAME_EXCHANGE" in args[4]:
                raise TraceError("rename with RENAME_EXCHANGE: not modelled")
            if self.is_watched(src) != self.is_watched(dst):
                raise TraceError(f"a rename across the watched border: {src} -> {dst}")
            if self.is_watched(dst):
                self.emit(Op("rename", path=src, dest=dst))
            return
        elif name in ("link", "linkat"):
            src, dst = (plain(0), plain(1)) if name == "link" else (at(0), at(2))
            if self.is_watched(dst):
                self.emit(Op("link", path=src, dest=dst))
            return
        elif name in ("symlink", "symlinkat"):
            target = os.fsdecode(_string(args[0]))
            path = plain(1) if name == "symlink" else at(1)
            if self.is_watched(path):
                self.emit(Op("symlink", path=path, dest=target, node=self._node_id()))
            return
        elif name in ("chmod", "fchmod", "fchmodat"):
            if name == "fchmod":
                path, mode = _fd(args[0])[1], args[1]
            elif name == "chmod":
                path, mode = plain(0), args[1]
            else:
                path, mode = at(0), args[2]
            if self.is_watched(path):
                self.emit(Op("chmod", path=path, mode=int(mode, 8)))
            return
        else:
            return
        if self.is_watched(path):
            umask = self._proc(pid).umask
            self.emit(Op("mkdir", path=path, node=self._node_id(), mode=int(mode, 8) & ~umask))


# -- recording ------------------------------------------------------------------------


def record(
    argv: list[str],
    watched: list[str],
    to_base: Any,
    from_base: Any,
    trace_file: Path,
    **popen: Any,
) -> tuple[subprocess.CompletedProcess[str], list[Op]]:
    """Run ``argv`` under strace; return its result and the ops it made on ``watched``."""
    command = [
        "strace", "-f", "-qq", "-y", "-xx", "-s", str(1 << 28),
        "-e", f"trace={TRACED}", "-o", str(trace_file), *argv,
    ]  # fmt: skip
    proc = subprocess.run(command, capture_output=True, text=True, check=False, **popen)
    if not trace_file.exists():
        raise TraceError(f"strace did not run: {proc.stderr.strip()[-300:]}")
    umask = os.umask(0)
    os.umask(umask)
    cwd = str(popen.get("cwd") or os.getcwd())
    parser = Parser(watched, to_base, from_base, os.path.realpath(cwd), umask)
    with open(trace_file, encoding="ascii", errors="replace") as lines:
        for line in lines:
            parser.feed(line)
    return proc, parser.ops
