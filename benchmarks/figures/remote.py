"""The remote: a cold push of the tree, an incremental push of a 10-file batch,
and a clone, against restic backing the same tree up to the same kind of server.

Each peer works on its own copy of the tree and talks to an S3 server of its
own on this machine: moto's standalone server (``python -m moto.server``,
everything in memory), fresh every repeat, one bucket. Within a repeat each
step runs for both peers in turn, the order reversed on every other repeat.

* cold push: earshot records the tree as its first batch (``earshot bash
  'true'``, untimed), names the remote (``earshot remote add``, untimed),
  then ``earshot push`` is timed; restic: ``restic init`` (untimed), then
  ``restic backup .`` from the tree is timed. Its CPU time (user + system of
  the pushing process) is recorded beside it: the server runs on the same
  cores.
* incremental push: one shell command appends a line to 10 files (seeded,
  the same files and line on both copies): through ``earshot bash`` as one
  batch, for restic by ``sh -c`` (untimed); then ``earshot push`` and
  ``restic backup .`` again, timed. earshot's batch goes through the root's
  watch daemon, as with ``EARSHOT_WATCH=auto``: after the first batch (a
  walk of the whole tree) the daemon is started (``earshot watch``, every
  watch placed) and a first call made through it, untimed, as the daemon
  figure does; the daemon is stopped at the repeat's end. Without it, past
  the restage budget (at 100,000 files) the batch is *folded*: its changes
  land in no batch, so in no push. The batch must list the 10 files, or the
  figure fails.
* clone: into an empty directory, as on a new machine: ``earshot clone NAME
  DIR --session ID`` with a fresh ``EARSHOT_HOME`` (only remotes.json
  copied), ``restic restore latest --target DIR`` with a fresh cache. Each
  is checked file by file (content, permission bits, symlink targets)
  against the source tree after the batch: every path wrong, extra or
  missing is a defect, counted (``remote_clone_defects``) and reported as
  the figure's error, its timings kept. earshot keeps the files git ignores
  as regenerable output (``build/``, ``__pycache__/``) as existence only, so
  its clone may lack those, and only those; restic brings back every file.

After each push the bytes the server holds (the sum of the bucket's object
sizes, ``list_objects_v2``) and the requests it answered (its request log)
are recorded. Both use a passphrase (earshot: ``EARSHOT_REMOTE_PASSPHRASE``;
restic: ``RESTIC_PASSWORD``). The figure runs on generated trees of up to
100,000 files: two copies and two servers holding the tree in memory; at
100,000 files with at most 3 repeats (one takes ~7 minutes on 2 cores).
"""

from __future__ import annotations

import importlib.util
import json
import os
import random
import re
import shlex
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Protocol

from benchmarks.suite import edits, treestate
from benchmarks.suite.plan import Plan
from benchmarks.suite.runner import Context, Tree, alternate, children_cpu, timed, tree_weight
from benchmarks.suite.trees import TreeSpec

NAME = "remote"
MAX_FILES = 100_000
BIG = 100_000  # from this size on, at most 3 repeats: one takes ~7 minutes here
PEERS = ("earshot", "restic")
EDITED = 10  # files the incremental batch changes
EXIT_INCOMPLETE = 3  # earshot clone: done, but some paths could not be written
BUCKET = "bench"
REMOTE = "bench"  # the remote's name in earshot
PASSPHRASE = "earshot-bench-passphrase"
CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_EC2_METADATA_DISABLED": "true",
    "NO_PROXY": "127.0.0.1,localhost",
    "no_proxy": "127.0.0.1,localhost",
}
REQUEST_LINE = re.compile(rb'"[A-Z]+ \S+ HTTP/1\.[01]" \d{3} ')
SERVER_NOTE = (
    "Each peer pushes to a moto S3 server of its own on this machine (`python -m moto.server`, "
    "in memory), fresh every repeat: the server's work shares the machine's cores; the CPU "
    "time counts the pushing process alone."
)


class S3Server:
    """moto's standalone S3 server on 127.0.0.1, its request log in a file, one bucket."""

    def __init__(self, work: Path) -> None:
        self.work = work
        self.log = work / "s3-requests.log"
        self.port = 0
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            self.port = int(sock.getsockname()[1])
        argv = [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)]
        with self.log.open("wb") as log:
            self.proc = subprocess.Popen(
                argv,
                stdout=log,
                stderr=log,
                env={**os.environ, **CREDENTIALS},
                start_new_session=True,
            )
        deadline = time.monotonic() + 60
        while True:  # until it answers
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    break
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"moto's S3 server did not start: {self._tail()}") from None
                time.sleep(0.05)
        self._client().create_bucket(Bucket=BUCKET)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        self.proc = None

    def requests(self) -> int:
        """Requests answered so far (one line of the server's log each)."""
        return len(REQUEST_LINE.findall(self.log.read_bytes()))

    def stored(self) -> tuple[int, int]:
        """(bytes, objects) the bucket holds."""
        client = self._client()
        size = count = 0
        for page in client.get_paginator("list_objects_v2").paginate(Bucket=BUCKET):
            for item in page.get("Contents", []):
                size += int(item["Size"])
                count += 1
        return size, count

    def _client(self) -> Any:
        import boto3

        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            aws_access_key_id=CREDENTIALS["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
            region_name=CREDENTIALS["AWS_DEFAULT_REGION"],
        )

    def _tail(self) -> str:
        try:
            return self.log.read_text(errors="replace").strip()[-400:]
        except OSError:
            return "no log"


class RemotePeer(Protocol):
    name: str
    tree: Path
    server: S3Server
    exit: int  # the clone's exit code (earshot: 3 when incomplete)

    def prepare(self) -> None:
        """A fresh, empty remote (and for earshot the tree's first batch); not timed."""

    def push(self) -> None:
        """Send what the remote lacks (timed)."""

    def change(self, command: str, paths: list[str]) -> None:
        """Run the shell command that makes the batch (changing ``paths``), in the
        tree (not timed)."""

    def close(self) -> None:
        """Stop what the peer left running."""

    def clone(self, dest: Path) -> None:
        """The latest state into the empty directory ``dest``, as on a new machine (timed)."""

    def note(self) -> str:
        """What this peer's commands are, for the report."""
        ...


def _run(
    argv: list[str], env: dict[str, str], cwd: Path | None = None, ok: tuple[int, ...] = (0,)
) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True, check=False)
    if proc.returncode not in ok:
        raise RuntimeError(
            f"{' '.join(argv[:4])} exited {proc.returncode}: {proc.stderr.strip()[-600:]}"
        )
    return proc


class EarshotRemote:
    """The ``earshot`` console script: a batch, ``remote add``, ``push``, ``clone``."""

    name = "earshot"

    def __init__(self, exe: str, tree: Path, store: Path, server: S3Server) -> None:
        self.exe = exe
        self.tree = tree
        self.store = store
        self.server = server
        self.home = store / "home"
        self.session = ""
        self.exit = 0  # the last command's exit code

    def env(self, home: Path, watch: str) -> dict[str, str]:
        return {
            **os.environ,
            **CREDENTIALS,
            "EARSHOT_HOME": str(home),
            "EARSHOT_WATCH": watch,
            "EARSHOT_REMOTE_PASSPHRASE": PASSPHRASE,
        }

    def run(
        self,
        *args: str,
        home: Path | None = None,
        watch: str = "always",
        ok: tuple[int, ...] = (0,),
    ) -> Any:
        proc = _run([self.exe, *args, "--json"], self.env(home or self.home, watch), ok=ok)
        self.exit = proc.returncode
        return json.loads(proc.stdout) if proc.stdout.strip() else {}

    def prepare(self) -> None:
        self.home.mkdir(parents=True)
        root = ("--root", str(self.tree))
        # The first batch walks the whole tree, never the daemon's (as the daemon
        # figure's setup); then the daemon, every watch placed, and a first call
        # through it, after which a batch is the daemon's to record.
        doc = self.run("bash", "true", *root, watch="never")
        self.session = str(doc["session"])
        started = self.run("watch", *root)
        if not started.get("running"):
            raise RuntimeError(f"earshot watch: the daemon did not start: {started}")
        self.run("bash", "true", "--session", self.session, *root)
        url = f"s3://{BUCKET}/earshot"
        self.run("remote", "add", REMOTE, url, "--endpoint", self.server.endpoint)

    def push(self) -> None:
        doc = self.run("push", REMOTE, "--session", self.session, "--root", str(self.tree))
        pushed = doc["pushed"]
        if len(pushed) != 1 or pushed[0]["up_to_date"]:
            raise RuntimeError(f"earshot push sent nothing: {pushed}")

    def change(self, command: str, paths: list[str]) -> None:
        doc = self.run("bash", command, "--session", self.session, "--root", str(self.tree))
        recorded = {c["path"] for c in doc.get("changes", [])}
        if doc.get("folded") or recorded != set(paths):
            argv = [self.exe, "watch", "--status", "--root", str(self.tree)]
            env = self.env(self.home, "always")
            status = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
            raise RuntimeError(
                f"earshot's batch did not record the {len(paths)} files it changed "
                f"(folded: {doc.get('folded')}; recorded {len(recorded)}); the daemon: "
                + " / ".join((status.stdout + status.stderr).split("\n")[:8])
            )

    def close(self) -> None:
        """Stop the root's watch daemon, if the batches started one."""
        if self.home.exists():
            env = self.env(self.home, "never")
            argv = [self.exe, "watch", "--stop", "--root", str(self.tree)]
            subprocess.run(argv, env=env, capture_output=True, check=False)

    def clone(self, dest: Path) -> None:
        home = self.store / "clone-home"
        home.mkdir(parents=True)
        shutil.copy2(self.home / "remotes.json", home / "remotes.json")
        # EARSHOT_WATCH's default (auto): a clone starts no daemon in its root. An
        # incomplete clone exits 3: what it lacks is the check's to count.
        argv = ("clone", REMOTE, str(dest), "--session", self.session)
        self.run(*argv, home=home, watch="auto", ok=(0, EXIT_INCOMPLETE))

    def note(self) -> str:
        return (
            "earshot: the tree's first batch (`earshot bash 'true'`), the root's daemon "
            "(`earshot watch`) and a first call through it, and `earshot remote add`, untimed; "
            "then `earshot push`; the 10 files changed by one `earshot bash` batch through the "
            "daemon, then `earshot push`; the clone by `earshot clone` with a fresh "
            "EARSHOT_HOME (remotes.json copied). Its clone lacks the files git ignores as "
            "regenerable output (existence only, by design); every other file is checked."
        )


class ResticRemote:
    """restic 0.14+: ``init``, ``backup .`` from the tree, ``restore latest``."""

    name = "restic"

    def __init__(self, tree: Path, store: Path, server: S3Server) -> None:
        self.tree = tree
        self.store = store
        self.server = server
        self.cache = store / "cache"
        self.exit = 0  # restic: any other exit fails the figure

    @property
    def repository(self) -> str:
        return f"s3:{self.server.endpoint}/{BUCKET}/restic"

    def run(self, *args: str, cache: Path | None = None, cwd: Path | None = None) -> str:
        env = {**os.environ, **CREDENTIALS, "RESTIC_PASSWORD": PASSPHRASE}
        argv = ["restic", "-r", self.repository, "--cache-dir", str(cache or self.cache)]
        return _run([*argv, *args], env, cwd).stdout

    def prepare(self) -> None:
        self.store.mkdir(parents=True, exist_ok=True)
        self.run("init")

    def push(self) -> None:
        self.run("backup", ".", "--host", "bench", cwd=self.tree)

    def change(self, command: str, paths: list[str]) -> None:
        _run(["sh", "-c", command], dict(os.environ), self.tree)

    def close(self) -> None:
        """Nothing runs between restic's commands."""

    def clone(self, dest: Path) -> None:
        self.run("restore", "latest", "--target", str(dest), cache=self.store / "clone-cache")

    def note(self) -> str:
        return (
            f"{restic_version()}: `restic init` untimed (its default repository version, "
            "compression auto), then `restic backup .` from the tree, and again after the "
            "10 files changed (the same shell command, by `sh -c`); the clone by `restic "
            "restore latest --target DIR` with a fresh cache."
        )


def restic_version() -> str:
    proc = subprocess.run(["restic", "version"], capture_output=True, text=True, check=False)
    return " ".join(proc.stdout.split()[:2]) or "restic"


def needs() -> None:
    """What the figure runs on: restic, and moto's server in this interpreter."""
    if shutil.which("restic") is None:
        raise RuntimeError("no restic here: `apt-get install restic` (0.14 or later)")
    if importlib.util.find_spec("moto") is None or importlib.util.find_spec("boto3") is None:
        raise RuntimeError("no moto here: `pip install 'moto[server]' boto3` in this venv")


def ignored(root: Path) -> set[str]:
    """Files and links git lists as ignored under ``root`` (a repository outside it)."""
    with tempfile.TemporaryDirectory(prefix="bench-remote-") as scratch:
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": scratch,
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_DIR": os.path.join(scratch, "git"),
            "GIT_WORK_TREE": str(root.resolve()),
        }
        subprocess.run(["git", "init", "-q"], env=env, check=True, capture_output=True)
        listed = subprocess.run(
            ["git", "ls-files", "-oi", "--exclude-standard", "-z"],
            cwd=root,
            env=env,
            check=True,
            capture_output=True,
        ).stdout
    return {os.fsdecode(p) for p in listed.split(b"\0") if p}


def edit_command(targets: list[str], seed: int) -> tuple[str, bytes]:
    """The shell command appending one line to each target, and the line."""
    line = f"\n// remote batch {seed}\n"
    printf = shlex.quote(line.replace("\\", "\\\\").replace("\n", "\\n").replace("%", "%%"))
    command = "; ".join(f"printf {printf} >> {shlex.quote(rel)}" for rel in targets)
    return command, line.encode()


def entry(path: Path) -> treestate.Entry:
    st = os.lstat(path)
    data = path.read_bytes()
    return treestate.Entry("file", stat.S_IMODE(st.st_mode), len(data), treestate.blob_id(data))


def clone_defects(want: treestate.State, got: treestate.State, may_lack: set[str]) -> list[str]:
    """The clone's paths that are not as in the source (content, mode, kind, or not
    there at all), then the source's it lacks, ``may_lack``'s aside; sorted each."""
    wrong = sorted(p for p, e in got.items() if want.get(p) != e)
    return wrong + sorted(p for p in want if p not in got and p not in may_lack)


class Remote:
    name = NAME
    title = "The remote: cold push, incremental push, clone, against restic"

    def applies(self, tree: TreeSpec, plan: Plan) -> bool:
        return tree.kind == "generated" and tree.files <= MAX_FILES

    def repeats(self, tree: TreeSpec, plan: Plan) -> int:
        return min(plan.repeat, 3) if tree.files >= BIG else plan.repeat

    def weight(self, tree: TreeSpec, plan: Plan) -> float:
        # seconds per 10,000 files, seen: the copies and reading the tree ~5, a
        # repeat ~40 (both peers: servers, pushes, the batch, clones and their check)
        return tree_weight(tree) * (5 + self.repeats(tree, plan) * 40)

    def run(self, ctx: Context, tree: Tree) -> None:
        needs()
        copies = {name: ctx.copy(tree, name) for name in PEERS}
        ctx.progress.step("reading the source tree (the clones' check)")
        pool = edits.candidates(tree.pristine)
        source = treestate.capture(tree.pristine)
        regenerable = ignored(tree.pristine)
        for r in range(self.repeats(tree.spec, ctx.plan)):
            peers = self._peers(ctx, copies, r)
            restore: dict[str, dict[str, bytes]] = {}
            try:
                self._repeat(ctx, tree, peers, r, pool, source, regenerable, restore)
            finally:
                for peer in peers:
                    peer.close()
                    peer.server.stop()
                    for rel, data in restore.get(peer.name, {}).items():
                        (peer.tree / rel).write_bytes(data)  # the copy as made, for the next
                shutil.rmtree(ctx.work / f"repeat-{r}", ignore_errors=True)

    def _peers(self, ctx: Context, copies: dict[str, Path], r: int) -> list[RemotePeer]:
        peers: list[RemotePeer] = []
        for name in PEERS:
            work = ctx.scratch(f"repeat-{r}", name)
            server = S3Server(work)
            store = work / "store"
            if name == "earshot":
                peers.append(EarshotRemote(ctx.earshot, copies[name], store, server))
            else:
                peers.append(ResticRemote(copies[name], store, server))
        return peers

    def _repeat(
        self,
        ctx: Context,
        tree: Tree,
        peers: list[RemotePeer],
        r: int,
        pool: list[str],
        source: treestate.State,
        regenerable: set[str],
        restore: dict[str, dict[str, bytes]],
    ) -> None:
        repeat = self.repeats(tree.spec, ctx.plan)
        order = alternate(peers, r)
        notes = {p.name: p.note() for p in peers}

        def record(metric: str, peer: RemotePeer, value: float, unit: str = "s") -> None:
            note = SERVER_NOTE if metric == "remote_push_cold_cpu" else notes[peer.name]
            ctx.results.measure(NAME, metric, tree.key, peer.name, value, unit, note=note)

        for peer in order:
            ctx.progress.step(f"repeat {r + 1}/{repeat}: a fresh server and remote, {peer.name}")
            peer.server.start()
            peer.prepare()
        for peer in order:
            ctx.progress.step(f"repeat {r + 1}/{repeat}: cold push, {peer.name}")
            asked, cpu = peer.server.requests(), children_cpu()
            seconds = timed(peer.push)
            cpu = children_cpu() - cpu
            asked = peer.server.requests() - asked
            stored, _objects = peer.server.stored()
            record("remote_push_cold", peer, seconds)
            record("remote_push_cold_cpu", peer, cpu)
            record("remote_stored_cold", peer, stored, "bytes")
            record("remote_requests_cold", peer, asked, "count")

        targets = random.Random(r).sample(pool, min(EDITED, len(pool)))
        command, line = edit_command(targets, r)
        want = dict(source)
        for rel in targets:
            data = (tree.pristine / rel).read_bytes() + line
            mode = source[rel].mode
            want[rel] = treestate.Entry("file", mode, len(data), treestate.blob_id(data))
        for peer in order:
            ctx.progress.step(f"repeat {r + 1}/{repeat}: a batch of {EDITED} files, {peer.name}")
            restore[peer.name] = {rel: (tree.pristine / rel).read_bytes() for rel in targets}
            peer.change(command, targets)
            changed = [rel for rel in targets if entry(peer.tree / rel) != want[rel]]
            if changed:
                raise AssertionError(f"the batch's edit went wrong on {peer.name}: {changed[0]}")
            stored, _ = peer.server.stored()
            asked = peer.server.requests()
            ctx.progress.step(f"repeat {r + 1}/{repeat}: incremental push, {peer.name}")
            seconds = timed(peer.push)
            asked = peer.server.requests() - asked
            added = peer.server.stored()[0] - stored
            record("remote_push_10", peer, seconds)
            record("remote_added_10", peer, added, "bytes")
            record("remote_requests_10", peer, asked, "count")

        for peer in order:
            ctx.progress.step(f"repeat {r + 1}/{repeat}: clone, {peer.name}")
            dest = ctx.work / f"repeat-{r}" / peer.name / "clone"
            dest.mkdir()
            asked = peer.server.requests()
            seconds = timed(lambda p=peer, d=dest: p.clone(d))
            asked = peer.server.requests() - asked
            ctx.progress.step(f"repeat {r + 1}/{repeat}: checking the clone, {peer.name}")
            may_lack = regenerable if peer.name == "earshot" else set()
            got = treestate.capture(dest)
            defects = clone_defects(want, got, may_lack)
            shutil.rmtree(dest, ignore_errors=True)
            record("remote_clone", peer, seconds)
            record("remote_requests_clone", peer, asked, "count")
            record("remote_clone_files", peer, len(got), "count")
            record("remote_clone_defects", peer, len(defects), "count")
            if defects:
                lacking = sum(1 for p in defects if p not in got)
                ctx.results.error(
                    NAME,
                    tree.key,
                    f"{peer.name}'s clone (repeat {r + 1}) is not the source: "
                    f"{len(defects) - lacking} paths wrong or extra, {lacking} missing, "
                    f"e.g. {defects[0]} (its command exited {peer.exit})",
                )


FIGURE = Remote()
