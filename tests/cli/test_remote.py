"""Checkpoints off the machine: push, pull, clone, fsck and gc against a real S3 server.

Each test runs the real ``earshot`` script against moto's standalone S3
server on 127.0.0.1 (tests/s3_server.py), a bucket of its own. A second
machine is a second root with a home of its own, which names the same
remote with the same passphrase.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from earshot_cli import EARSHOT, Cli, Ran
from model_servers import AnthropicServer, ToolCall
from s3_server import CREDENTIALS, CuttingProxy, S3Server

PASSPHRASE = "correct horse battery staple"
MODEL = "anthropic:claude-test"


@pytest.fixture(scope="module")
def s3() -> Iterator[S3Server]:
    server = S3Server().start()
    yield server
    server.stop()


class Machine:
    """One root and one home naming the remote ``r``: a machine of its own."""

    def __init__(self, s3: S3Server, bucket: str, base: Path, name: str) -> None:
        self.s3 = s3
        self.bucket = bucket
        self.cli = Cli(base / f"{name}-home", base / name)
        self.cli.root.mkdir()
        self.url = f"s3://{bucket}/earshot"

    @property
    def root(self) -> Path:
        return self.cli.root

    def env(self, **extra: str) -> dict[str, str]:
        return self.cli.env(
            **CREDENTIALS, EARSHOT_REMOTE_PASSPHRASE=extra.pop("passphrase", PASSPHRASE), **extra
        )

    def run(self, *args: str, expect: int | None = 0, **kwargs: Any) -> Ran:
        env = self.env(**kwargs.pop("env", {}))
        return self.cli.run(*args, expect=expect, env=env, timeout=180, **kwargs)

    def json(self, *args: str, **kwargs: Any) -> Any:
        return self.run(*args, "--json", **kwargs).json()

    def add(self, **kwargs: Any) -> Ran:
        return self.run("remote", "add", "r", self.url, "--endpoint", self.s3.endpoint, **kwargs)

    def popen(self, *args: str, cwd: Path | None = None, **env: str) -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            [str(EARSHOT), *args],
            cwd=cwd or self.root,
            env=self.env(**env),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )

    def stopped_at(self, site: str, *args: str, cwd: Path | None = None) -> subprocess.Popen[bytes]:
        """``earshot ARGS`` stopped at the fault point ``site``: returned once its
        line says so (the event, not the clock)."""
        proc = self.popen(*args, cwd=cwd, EARSHOT_FAULTS=f"{site}=stop")
        assert proc.stderr is not None
        for raw in proc.stderr:
            if f"earshot-fault: {site} (stopped".encode() in raw:
                return proc
        raise AssertionError(proc.communicate())


def go_on(proc: subprocess.Popen[bytes], expect: int = 0) -> bytes:
    """Let a stopped command go on to its end; its stderr."""
    os.kill(proc.pid, signal.SIGCONT)
    _out, err = proc.communicate(timeout=180)
    assert proc.returncode == expect, err
    return err


@pytest.fixture
def machines(s3: S3Server, tmp_path: Path) -> Callable[..., list[Machine]]:
    bucket = s3.make_bucket(f"b{random.randrange(1 << 40):x}")

    def make(*names: str) -> list[Machine]:
        made = [Machine(s3, bucket, tmp_path, name) for name in names]
        for one in made:
            one.add()
        return made

    return make


def seed(root: Path, files: int = 20) -> None:
    for i in range(files):
        path = root / f"src/mod{i % 5}/file{i}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"value = {i}\n")
    (root / "app.py").write_text("x = 1\n")
    (root / "run.sh").write_text("#!/bin/sh\necho run\n")
    (root / "run.sh").chmod(0o755)
    (root / "link").symlink_to("app.py")
    (root / "empty").mkdir()


# -- a session travels --------------------------------------------------------------


def test_a_session_pushed_then_cloned_elsewhere_continues_its_chat_and_undoes_exactly(
    machines: Callable[..., list[Machine]], tree: Callable[..., Any]
) -> None:
    here, there = machines("here", "there")
    seed(here.root)
    start = tree(here.root)
    script = [
        [
            "Changing things.",
            ToolCall("write_file", {"path": "new.txt", "content": "made by the model\n"}),
            ToolCall("edit", {"path": "app.py", "old": "x = 1", "new": "x = 2"}),
            ToolCall("bash", {"command": "rm -r src/mod1 && echo removed"}),
        ],
        "Done: the first prompt's work.",
    ]
    with AnthropicServer(script) as model:
        env = {"ANTHROPIC_BASE_URL": model.url, "ANTHROPIC_API_KEY": "k"}
        first = here.json(
            "chat",
            "-p",
            "first prompt",
            "--model",
            MODEL,
            "--allow",
            "bash,write_file,edit",
            env=env,
        )
    session = first["session"]
    after = tree(here.root)
    pushed = here.json("push")
    assert pushed["pushed"][0]["session"] == session and pushed["pushed"][0]["packs"] >= 1

    clone_dir = there.root / "work"
    cloned = there.json("clone", "r", str(clone_dir), "--session", session)
    assert cloned["batches"] == 1
    assert tree(clone_dir) == after
    log = there.json("log", cwd=clone_dir)
    assert [b["seq"] for b in log["batches"]] == [1]

    # The conversation goes on there: the model is sent what was said here.
    with AnthropicServer(
        [[ToolCall("write_file", {"path": "more.txt", "content": "m\n"})], "ok"]
    ) as model:
        env = {"ANTHROPIC_BASE_URL": model.url, "ANTHROPIC_API_KEY": "k"}
        again = there.json(
            "chat",
            "-p",
            "second prompt",
            "--continue",
            "--model",
            MODEL,
            "--allow",
            "write_file",
            env=env,
            cwd=clone_dir,
        )
        sent = str(model.main_requests[-1]["messages"])
    assert again["session"] == session
    assert "first prompt" in sent and "Done: the first prompt's work." in sent
    assert (clone_dir / "more.txt").read_text() == "m\n"
    there.run("undo", "2", cwd=clone_dir)
    assert tree(clone_dir) == start


def test_an_incremental_push_sends_the_change_alone(
    machines: Callable[..., list[Machine]],
) -> None:
    (here,) = machines("here")
    seed(here.root, files=400)
    here.run("bash", "echo one > one.txt")
    cold = here.json("push")["pushed"][0]
    before = set(here.s3.objects(here.bucket))
    here.run(
        "bash", "for i in 0 1 2 3 4 5 6 7 8 9; do echo changed >> src/mod0/file$((i*5)).py; done"
    )
    warm = here.json("push")["pushed"][0]
    added = set(here.s3.objects(here.bucket)) - before
    # Ten contents, the trees above them, the snapshots, the session's bundle
    # and log: one data pack and one metadata pack, each with its index file,
    # and the reference.
    assert warm["packs"] == 2
    assert len(added) == 5, sorted(added)
    assert warm["objects"] < 40 < cold["objects"]
    assert warm["bytes"] < cold["bytes"] / 4
    assert here.json("push")["pushed"][0]["up_to_date"] is True


def test_nothing_readable_leaves_the_machine(
    machines: Callable[..., list[Machine]],
) -> None:
    (here,) = machines("here")
    marker = "TOP-SECRET-CONTENT-7f3a"
    (here.root / "secret-name-of-a-file.env").write_text(f"API_KEY={marker}\n" * 50)
    here.run("bash", "echo more >> secret-name-of-a-file.env")
    session = here.json("log")["session"]
    here.run("push")
    found = here.s3.objects(here.bucket)
    assert any(k.split("/")[1] == "data" for k in found)
    for needle in (marker, "secret-name-of-a-file", session, str(here.root)):
        for key, data in found.items():
            assert needle.encode() not in data, (needle, key)
            assert needle not in key, (needle, key)


# -- what a hostile server or a wrong key gets ---------------------------------------


@pytest.mark.parametrize("folder", ["data", "index", "refs"])
def test_a_tampered_file_is_refused_and_changes_nothing_here(
    machines: Callable[..., list[Machine]], folder: str, check_error: Callable[..., str]
) -> None:
    here, there = machines("here", "there")
    seed(here.root)
    here.run("bash", "echo one > one.txt")
    session = here.json("log")["session"]
    here.run("push")
    key = sorted(k for k in here.s3.objects(here.bucket) if k.split("/")[1] == folder)[0]
    data = bytearray(here.s3.objects(here.bucket)[key])
    data[len(data) // 2] ^= 0x01
    here.s3.put(here.bucket, key, bytes(data))

    clone_dir = there.root / "work"
    line = check_error(there.run("clone", "r", str(clone_dir), "--session", session, expect=1))
    assert "does not authenticate" in line or "does not match" in line or "damaged" in line
    assert not clone_dir.exists()
    assert not (there.cli.home / "checkpoints").exists() or not any(
        (there.cli.home / "checkpoints").iterdir()
    )
    # A pull into a root with a session of its own leaves its store as it was.
    there.run("bash", "echo mine > mine.txt")
    before = there.json("log"), there.json("sessions")
    check_error(there.run("pull", "r", "--session", session, expect=1))
    assert (there.json("log"), there.json("sessions")) == before
    assert there.run("fsck").rc == 0
    problems = there.json("fsck", "--remote", "r", expect=1)["problems"]
    assert problems


def test_a_wrong_passphrase_opens_nothing(
    machines: Callable[..., list[Machine]], check_error: Callable[..., str]
) -> None:
    (here,) = machines("here")
    here.run("bash", "echo one > one.txt")
    here.run("push")
    other = Machine(here.s3, here.bucket, here.root.parent, "other")
    ran = other.run(
        "remote",
        "add",
        "r",
        other.url,
        "--endpoint",
        other.s3.endpoint,
        expect=1,
        env={"passphrase": "wrong"},
    )
    assert "does not open this remote" in check_error(ran)
    assert not (other.cli.home / "remotes.json").exists()
    ran = here.run("push", "--json", expect=1, env={"passphrase": "wrong"})
    assert ran.json()["error"]["code"] == "wrong_key"


def test_a_key_file_opens_the_remote_and_a_passphrase_does_not(
    machines: Callable[..., list[Machine]], tmp_path: Path
) -> None:
    (here,) = machines("here")
    key = tmp_path / "remote.key"
    url = f"s3://{here.bucket}/keyed"
    here.run(
        "remote",
        "add",
        "k",
        url,
        "--endpoint",
        here.s3.endpoint,
        "--key-file",
        str(key),
        "--new-key-file",
    )
    assert key.stat().st_mode & 0o777 == 0o600
    here.run("bash", "echo one > one.txt")
    assert here.json("push", "k")["pushed"][0]["packs"] >= 1
    other = Machine(here.s3, here.bucket, tmp_path, "other")
    ran = other.run("remote", "add", "k", url, "--endpoint", here.s3.endpoint, expect=1)
    assert "does not open" in ran.stderr
    other.run("remote", "add", "k", url, "--endpoint", here.s3.endpoint, "--key-file", str(key))
    assert len(other.json("remote", "sessions", "k")["sessions"]) == 1


# -- cuts, races ------------------------------------------------------------------------


def _big_tree(root: Path) -> None:
    """About 20 MiB that does not compress: three data packs or more."""
    rng = random.Random(7)
    for i in range(5):
        (root / f"blob{i}.bin").write_bytes(rng.randbytes(4 << 20))
    seed(root)


CUTS = ["remote-pack-sent@1", "remote-index-sent@2", "remote-ref-ready", "remote-put@{random}"]


@pytest.mark.slow
@pytest.mark.parametrize("cut", CUTS)
def test_a_push_killed_mid_way_resumes_and_never_names_a_missing_object(
    machines: Callable[..., list[Machine]], tree: Callable[..., Any], cut: str
) -> None:
    here, there = machines("here", "there")
    _big_tree(here.root)
    here.run("bash", "echo one > one.txt")
    session = here.json("log")["session"]
    site = cut.format(random=random.Random(cut).randrange(2, 9))
    killed = here.run("push", expect=None, env={"EARSHOT_FAULTS": f"{site}=kill"})
    assert killed.rc == -signal.SIGKILL, str(killed)
    assert f"earshot-fault: {site.split('@')[0]}" in killed.stderr
    # What arrived is sound, and names nothing missing.
    assert here.json("fsck", "--remote", "r")["problems"] == []
    arrived = sum(len(v) for k, v in here.s3.objects(here.bucket).items() if "/data/" in k)
    resumed = here.json("push")["pushed"][0]
    # What a push of it all sends, to a remote of its own.
    here.run("remote", "add", "whole", f"{here.url}-whole", "--endpoint", here.s3.endpoint)
    whole = here.json("push", "whole")["pushed"][0]["bytes"]
    # Sent again: at most the one pack whose index file did not arrive.
    assert resumed["bytes"] <= whole - arrived + (9 << 20), (arrived, resumed, whole)
    assert resumed["bytes"] + arrived >= whole
    assert here.json("fsck", "--remote", "r")["problems"] == []
    clone_dir = there.root / "work"
    there.run("clone", "r", str(clone_dir), "--session", session)
    assert tree(clone_dir) == tree(here.root)


def test_two_pushes_at_once_lose_nothing(
    machines: Callable[..., list[Machine]], tree: Callable[..., Any]
) -> None:
    one, two, third = machines("one", "two", "third")
    for machine in (one, two):
        seed(machine.root)
        machine.run("bash", f"echo {machine.root.name} > who.txt")
    sessions = {m.root.name: m.json("log")["session"] for m in (one, two)}
    procs = [m.popen("push") for m in (one, two)]
    for proc in procs:
        _out, err = proc.communicate(timeout=180)
        assert proc.returncode == 0, err
    listed = {s["session"] for s in third.json("remote", "sessions")["sessions"]}
    assert listed == set(sessions.values())
    for machine in (one, two):
        target = third.root / machine.root.name
        third.run("clone", "r", str(target), "--session", sessions[machine.root.name])
        assert tree(target) == tree(machine.root)


def _held_at_ref(machine: Machine, cwd: Path) -> subprocess.Popen[bytes]:
    """A push stopped just before it writes its reference (it has read the heads)."""
    return machine.stopped_at("remote-ref-ready", "push", cwd=cwd)


def test_one_session_pushed_from_two_places_at_once_keeps_both_until_one_is_chosen(
    machines: Callable[..., list[Machine]],
    tree: Callable[..., Any],
    check_error: Callable[..., str],
) -> None:
    here, there, third = machines("here", "there", "third")
    seed(here.root)
    here.run("bash", "echo one > one.txt")
    session = here.json("log")["session"]
    here.run("push")
    clone_dir = there.root / "work"
    there.run("clone", "r", str(clone_dir), "--session", session)
    here.run("bash", "echo here > here.txt")
    there.run("bash", "echo there > there.txt", cwd=clone_dir)
    # Both read the remote before either writes: two states, neither lost.
    held = [_held_at_ref(here, here.root), _held_at_ref(there, clone_dir)]
    for proc in held:
        go_on(proc)
    (found,) = here.json("remote", "sessions")["sessions"]
    assert found["heads"] == 2
    line = check_error(here.run("pull", "r", "--session", session, expect=1))
    assert "--ref" in line and "do not hold each other" in line
    here.run("bash", "echo more > more.txt")
    assert "pull" in check_error(here.run("push", expect=1))
    # Either state can be taken whole.
    for ref in found["refs"]:
        target = third.root / ref
        third.run("clone", "r", str(target), "--session", session, "--ref", ref)
        assert (target / "here.txt").exists() != (target / "there.txt").exists()
    # Keeping one: the other is forgotten, and the session moves on.
    keep = next(r for r in found["refs"] if (third.root / r / "here.txt").exists())
    drop = next(r for r in found["refs"] if r != keep)
    here.run("remote", "forget", "r", session, "--ref", drop)
    assert here.json("remote", "sessions")["sessions"][0]["heads"] == 1
    assert here.json("pull", "r")["pulled"][0]["up_to_date"] is True
    here.run("push")
    target = third.root / "after"
    third.run("clone", "r", str(target), "--session", session)
    assert tree(target) == tree(here.root)


def test_two_pushes_of_one_state_at_once_are_one_state(
    machines: Callable[..., list[Machine]],
) -> None:
    (here,) = machines("here")
    here.run("bash", "echo one > one.txt")
    session = here.json("log")["session"]
    held = [_held_at_ref(here, here.root), _held_at_ref(here, here.root)]
    for proc in held:
        go_on(proc)
    (found,) = here.json("remote", "sessions")["sessions"]
    assert found["heads"] == 1
    assert here.json("pull", "r", "--session", session)["pulled"][0]["up_to_date"] is True


def test_a_batch_writing_a_large_file_travels_whole(
    machines: Callable[..., list[Machine]], tree: Callable[..., Any]
) -> None:
    here, there = machines("here", "there")
    seed(here.root)
    here.run("bash", "echo one > one.txt")
    here.run("bash", "head -c 3000000 /dev/urandom > big.bin && rm src/mod0/file0.py")
    session = here.json("log")["session"]
    here.run("push")
    clone_dir = there.root / "work"
    there.run("clone", "r", str(clone_dir), "--session", session)
    assert tree(clone_dir) == tree(here.root)
    there.run("undo", cwd=clone_dir)
    here.run("undo")
    assert tree(clone_dir) == tree(here.root)
    assert not (clone_dir / "big.bin").exists()


def test_pull_brings_the_batches_made_elsewhere(
    machines: Callable[..., list[Machine]], check_error: Callable[..., str]
) -> None:
    here, there = machines("here", "there")
    seed(here.root)
    here.run("bash", "echo one > one.txt")
    session = here.json("log")["session"]
    here.run("push")
    clone_dir = there.root / "work"
    there.run("clone", "r", str(clone_dir), "--session", session)
    there.run("bash", "echo two > two.txt", cwd=clone_dir)
    there.run("push", cwd=clone_dir)
    # Here does not have batch 2: a push is refused, a pull brings it.
    line = check_error(here.run("push", expect=1))
    assert "pull" in line
    pulled = here.json("pull", "r")["pulled"]
    assert [(p["session"], p["new_batches"]) for p in pulled] == [(session, 1)]
    assert [b["seq"] for b in here.json("log")["batches"]] == [1, 2]
    assert not (here.root / "two.txt").exists()  # a pull leaves the tree alone
    assert here.json("pull", "r")["pulled"][0]["up_to_date"] is True


@pytest.mark.slow
def test_gc_refuses_while_a_push_runs_and_drops_only_what_no_session_needs(
    machines: Callable[..., list[Machine]],
    tree: Callable[..., Any],
    check_error: Callable[..., str],
) -> None:
    here, there = machines("here", "there")
    _big_tree(here.root)
    here.run("bash", "echo one > one.txt")
    first = here.json("log")["session"]
    # A push stopped after its first pack: it holds its lock.
    push = here.stopped_at("remote-pack-sent", "push")  # its lock written
    before = set(here.s3.objects(here.bucket))
    ran = here.run("gc", "--remote", "r", "--grace", "0", expect=75)
    assert "a push from" in check_error(ran, 75)
    assert set(here.s3.objects(here.bucket)) == before
    go_on(push)
    # A second session, then the first is forgotten and collected.
    second_root = here.root.parent / "second"
    second_root.mkdir()
    seed(second_root)
    here.run("bash", "echo two > two.txt", cwd=second_root)
    second = here.json("log", cwd=second_root)["session"]
    here.run("push", cwd=second_root)
    here.run("remote", "forget", "r", first)
    dropped = here.json("gc", "--remote", "r", "--grace", "0")
    assert dropped["packs_dropped"] >= 1 and dropped["packs_kept"] >= 1
    assert here.json("fsck", "--remote", "r")["problems"] == []
    clone_dir = there.root / "work"
    there.run("clone", "r", str(clone_dir), "--session", second)
    assert tree(clone_dir) == tree(second_root)
    gone = there.run("clone", "r", str(there.root / "gone"), "--session", first, expect=1)
    assert "no session" in gone.stderr


def test_fsck_remote_names_a_damaged_pack(
    machines: Callable[..., list[Machine]],
) -> None:
    (here,) = machines("here")
    seed(here.root)
    here.run("bash", "echo one > one.txt")
    here.run("push")
    assert here.json("fsck", "--remote", "r")["problems"] == []
    key = next(k for k in here.s3.objects(here.bucket) if "/data/" in k)
    data = bytearray(here.s3.objects(here.bucket)[key])
    data[-1] ^= 0xFF
    here.s3.put(here.bucket, key, bytes(data))
    report = here.run("fsck", "--remote", "r", expect=1)
    assert "does not match its name" in report.stdout


# -- the commands' edges ------------------------------------------------------------------


def test_remote_commands_say_what_is_wrong_in_one_line(
    machines: Callable[..., list[Machine]], check_error: Callable[..., str]
) -> None:
    (here,) = machines("here")
    check_error(here.run("remote", "add", "r", here.url, "--endpoint", here.s3.endpoint, expect=1))
    assert "not a remote URL" in check_error(here.run("remote", "add", "x", "http://b/p", expect=1))
    assert "no such bucket" in check_error(
        here.run(
            "remote",
            "add",
            "y",
            "s3://no-such-bucket-here/p",
            "--endpoint",
            here.s3.endpoint,
            expect=1,
        )
    )
    assert "no remote named" in check_error(here.run("push", "nope", expect=1))
    (here.root / "busy").mkdir()
    (here.root / "busy" / "f").write_text("x")
    here.run("bash", "echo one > one.txt")
    session = here.json("log")["session"]
    here.run("push")
    ran = here.run("clone", "r", str(here.root / "busy"), "--session", session, "--json", expect=1)
    assert "not an empty directory" in ran.json()["error"]["message"]
    listed = here.json("remote", "list")["remotes"]
    assert [r["name"] for r in listed] == ["r"]
    here.run("remote", "rm", "r")
    assert here.json("remote", "list")["remotes"] == []


def test_an_unreachable_server_is_one_line_after_its_retries(
    machines: Callable[..., list[Machine]], check_error: Callable[..., str]
) -> None:
    (here,) = machines("here")
    here.run("bash", "echo one > one.txt")
    from s3_server import free_port

    dead = f"http://127.0.0.1:{free_port()}"
    ran = here.run("remote", "add", "dead", "s3://bkt/p", "--endpoint", dead, expect=1)
    assert "connect" in check_error(ran).lower()


@pytest.mark.parametrize(
    "cut", ["remote-pack-fetched@2", "remote-objects-fetched", "remote-log-written"]
)
def test_a_pull_killed_mid_way_leaves_the_store_sound_and_the_next_one_finishes(
    machines: Callable[..., list[Machine]], cut: str
) -> None:
    here, there = machines("here", "there")
    _big_tree(here.root)
    here.run("bash", "echo one > one.txt")
    here.run("bash", "echo two > two.txt")
    session = here.json("log")["session"]
    here.run("push")
    there.run("bash", "echo mine > mine.txt")
    mine = there.json("log")
    killed = there.run("pull", "r", "--session", session, expect=None, env={"EARSHOT_FAULTS": cut})
    assert killed.rc == -signal.SIGKILL, str(killed)
    assert there.run("fsck").rc == 0
    assert there.json("log") == mine  # its own session, as it was
    there.run("pull", "r", "--session", session)
    assert [b["seq"] for b in there.json("log", "--session", session)["batches"]] == [1, 2]
    assert here.json("log") == there.json("log", "--session", session) | {
        k: v for k, v in here.json("log").items() if k not in ("batches",)
    }


def test_a_gc_killed_mid_way_leaves_the_remote_sound(
    machines: Callable[..., list[Machine]], tree: Callable[..., Any]
) -> None:
    here, there = machines("here", "there")
    _big_tree(here.root)
    here.run("bash", "echo one > one.txt")
    first = here.json("log")["session"]
    here.run("push")
    second_root = here.root.parent / "second"
    second_root.mkdir()
    seed(second_root)
    here.run("bash", "echo two > two.txt", cwd=second_root)
    second = here.json("log", cwd=second_root)["session"]
    here.run("push", cwd=second_root)
    here.run("remote", "forget", "r", first)
    for site in ("remote-gc-index-written", "remote-delete@2"):
        ran = here.run(
            "gc", "--remote", "r", "--grace", "0", expect=None, env={"EARSHOT_FAULTS": site}
        )
        assert ran.rc == -signal.SIGKILL, str(ran)
        assert here.json("fsck", "--remote", "r")["problems"] == []
    here.run("gc", "--remote", "r", "--grace", "0")
    assert here.json("fsck", "--remote", "r")["problems"] == []
    clone_dir = there.root / "work"
    there.run("clone", "r", str(clone_dir), "--session", second)
    assert tree(clone_dir) == tree(second_root)


def test_a_session_that_went_on_in_both_places_is_refused_both_ways(
    machines: Callable[..., list[Machine]], check_error: Callable[..., str]
) -> None:
    here, there = machines("here", "there")
    seed(here.root)
    here.run("bash", "echo one > one.txt")
    session = here.json("log")["session"]
    here.run("push")
    clone_dir = there.root / "work"
    there.run("clone", "r", str(clone_dir), "--session", session)
    there.run("bash", "echo there > there.txt", cwd=clone_dir)
    there.run("push", cwd=clone_dir)
    here.run("bash", "echo here > here.txt")
    before = here.json("log")
    line = check_error(here.run("pull", "r", "--session", session, expect=1))
    assert "went on in two places" in line
    assert here.json("log") == before
    assert "pull" in check_error(here.run("push", expect=1))


def test_a_pull_never_replaces_a_log_whose_records_retention_dropped(
    machines: Callable[..., list[Machine]], check_error: Callable[..., str]
) -> None:
    here, there = machines("here", "there")
    here.run("bash", "echo one > one.txt")
    session = here.json("log")["session"]
    here.run("push")
    clone_dir = there.root / "work"
    there.run("clone", "r", str(clone_dir), "--session", session)
    there.run("say", "--role", "user", "a note made only there", cwd=clone_dir)
    (log,) = (there.cli.home / "sessions").glob(f"*/{session}.jsonl")
    kept = log.read_bytes()
    # Retention drops the session's checkpoint records; its log stays.
    from earshot.agent.core.records import TABLES, delete_session
    from earshot.cas.project import Project

    project = Project(clone_dir, home=there.cli.home, extra_tables=TABLES)
    with project, project.store.backend.write() as txn:
        delete_session(txn, session)
    line = check_error(there.run("pull", "r", "--session", session, cwd=clone_dir, expect=1))
    assert "holds messages the remote's lacks" in line
    assert log.read_bytes() == kept


def test_connections_cut_mid_request_are_retried_and_the_push_is_whole(
    s3: S3Server, machines: Callable[..., list[Machine]], tree: Callable[..., Any]
) -> None:
    here, there = machines("here", "there")
    _big_tree(here.root)
    here.run("bash", "echo one > one.txt")
    session = here.json("log")["session"]
    proxy = CuttingProxy(s3.port, first=3, after=1 << 20)
    try:
        url = f"s3://{here.bucket}/cut"
        here.run("remote", "add", "cut", url, "--endpoint", proxy.endpoint)
        pushed = here.json("push", "cut")["pushed"][0]
    finally:
        proxy.close()
    assert proxy.cuts == 3 and pushed["packs"] >= 3, (proxy.connections, proxy.cuts, pushed)
    there.run("remote", "add", "cut", url, "--endpoint", s3.endpoint)
    assert there.json("fsck", "--remote", "cut")["problems"] == []
    clone_dir = there.root / "work"
    there.run("clone", "cut", str(clone_dir), "--session", session)
    assert tree(clone_dir) == tree(here.root)


def test_a_line_written_to_the_log_while_a_pull_runs_is_kept(
    machines: Callable[..., list[Machine]], check_error: Callable[..., str]
) -> None:
    here, there = machines("here", "there")
    here.run("bash", "echo one > one.txt")
    session = here.json("log")["session"]
    here.run("push")
    clone_dir = there.root / "work"
    there.run("clone", "r", str(clone_dir), "--session", session)
    here.run("bash", "echo two > two.txt")
    here.run("push")
    pull = there.stopped_at("remote-objects-fetched", "pull", "r", cwd=clone_dir)
    there.run("say", "--role", "user", "written while the pull ran", cwd=clone_dir)
    assert b"took lines the remote's lacks" in go_on(pull, expect=1)
    (log,) = (there.cli.home / "sessions").glob(f"*/{session}.jsonl")
    assert "written while the pull ran" in log.read_text()


def test_a_clone_into_a_former_root_is_refused(
    machines: Callable[..., list[Machine]], check_error: Callable[..., str]
) -> None:
    here, there = machines("here", "there")
    here.run("bash", "echo one > one.txt")
    session = here.json("log")["session"]
    here.run("push")
    clone_dir = there.root / "work"
    there.run("clone", "r", str(clone_dir), "--session", session)
    there.run("bash", "echo local > local.txt", cwd=clone_dir)
    shutil.rmtree(clone_dir)
    ran = there.run("clone", "r", str(clone_dir), "--session", session, expect=1)
    assert "was a root earshot recorded" in check_error(ran)
    assert not clone_dir.exists()


def test_what_a_server_or_a_file_plants_is_one_line(
    machines: Callable[..., list[Machine]], check_error: Callable[..., str]
) -> None:
    (here,) = machines("here")
    here.run("bash", "echo one > one.txt")
    here.run("push")
    objects = here.s3.objects(here.bucket)
    (key,) = [k for k in objects if "/keys/" in k]
    planted = objects[key].replace(b'"n": 32768', b'"n": 1073741824')
    here.s3.put(here.bucket, key.replace("/keys/", "/keys/0"), planted)
    assert here.json("remote", "sessions")["sessions"]  # the good key still opens it
    here.s3.put(here.bucket, key, planted)
    here.s3.client().delete_object(Bucket=here.bucket, Key=key.replace("/keys/", "/keys/0"))
    assert "does not open" in check_error(here.run("push", expect=1))
    config = next(k for k in objects if k.endswith("/config"))
    here.s3.put(here.bucket, config, b'{"earshot-remote": Infinity, "id": "abc"}')
    assert "not an earshot remote" in check_error(here.run("push", expect=1))
    (here.cli.home / "remotes.json").write_text('{"r": {"url": "s3://b/p", "key_file": 7}}')
    assert "key_file is not a string" in check_error(here.run("push", expect=1))


@pytest.mark.parametrize("when", ["after-its-packs", "between-a-pack-and-its-index"])
def test_a_push_whose_lock_lapsed_sends_again_what_a_gc_took_meanwhile(
    machines: Callable[..., list[Machine]],
    tree: Callable[..., Any],
    monkeypatch: pytest.MonkeyPatch,
    when: str,
) -> None:
    """A push asleep past its lock's lease (a laptop lid closed): a gc ran and
    dropped the forgotten session's packs, holding contents this push found on
    the remote and did not send. Before its reference, it looks again."""
    here, there = machines("here", "there")
    _big_tree(here.root)
    here.run("bash", "echo one > one.txt")
    first = here.json("log")["session"]
    here.run("push")
    here.run("remote", "forget", "r", first)
    second = here.root.parent / "second"
    shutil.copytree(here.root, second, symlinks=True)
    here.run("bash", "echo two > two.txt", cwd=second)
    session = here.json("log", cwd=second)["session"]

    from earshot.agent.core.records import TABLES
    from earshot.agent.remote import push as sync
    from earshot.cas.project import Project
    from earshot.cas.remote import config
    from earshot.cas.remote.prune import prune
    from earshot.cas.remote.repository import Repository

    for key, value in here.env().items():
        monkeypatch.setenv(key, value)
    spec = config.get("r")
    repo = Repository.open(spec.storage(), PASSPHRASE.encode(), config.cache_dir())
    real = sync._send_session
    calls = []

    def lid_closes(lock: Any) -> None:
        """The lock lapses, and a gc runs meanwhile."""
        lock.remove()
        other = Repository.open(spec.storage(), PASSPHRASE.encode(), config.cache_dir())
        assert prune(other, grace_s=0).packs_dropped >= 1
        lock.lapsed = True

    def asleep(*args: Any, **kwargs: Any) -> Any:
        sent = real(*args, **kwargs)
        if not calls and when == "after-its-packs":
            lid_closes(args[5])
        calls.append(sent)
        return sent

    monkeypatch.setattr(sync, "_send_session", asleep)
    if when == "between-a-pack-and-its-index":
        real_refresh = sync.locks.Lock.refresh

        def refresh(lock: Any) -> None:
            if not lock.lapsed:
                lid_closes(lock)
            real_refresh(lock)

        monkeypatch.setattr(sync.locks.Lock, "refresh", refresh)
    with Project(second, home=here.cli.home, extra_tables=TABLES) as project:
        sync.push(project, repo, [session])
    assert len(calls) == 2
    assert here.json("fsck", "--remote", "r")["problems"] == []
    clone_dir = there.root / "work"
    there.run("clone", "r", str(clone_dir), "--session", session)
    assert tree(clone_dir) == tree(second)


def test_a_name_planted_in_the_bucket_never_becomes_a_path_here(
    machines: Callable[..., list[Machine]], tmp_path: Path
) -> None:
    import blake3

    (here,) = machines("here")
    here.run("bash", "echo one > one.txt")
    here.run("push")
    data = b"* * * * * root echo planted\n"
    victim = tmp_path / "victim"
    key = f"earshot/index/../../../../../../../../../../{victim}/{blake3.blake3(data).hexdigest()}"
    here.s3.put(here.bucket, key, data)
    here.run("bash", "echo two > two.txt")
    here.run("push")
    assert here.json("fsck", "--remote", "r")["problems"] == []
    assert not victim.exists()


@pytest.mark.parametrize("stage", ["recorded", "begun"])
def test_a_batch_begun_while_a_pull_runs_is_never_overwritten(
    machines: Callable[..., list[Machine]], check_error: Callable[..., str], stage: str
) -> None:
    here, there = machines("here", "there")
    here.run("bash", "echo one > one.txt")
    session = here.json("log")["session"]
    here.run("push")
    clone_dir = there.root / "work"
    there.run("clone", "r", str(clone_dir), "--session", session)
    here.run("bash", "echo remote-two > two.txt")
    here.run("push")
    pull = there.stopped_at("remote-objects-fetched", "pull", "r", cwd=clone_dir)
    if stage == "recorded":
        there.run("bash", "echo local-two > local.txt", cwd=clone_dir)
    else:  # its number taken, nothing in the log yet
        cmd = ("bash", "echo local-two > local.txt")
        batch = there.stopped_at("intent-begun", *cmd, cwd=clone_dir)
    err = go_on(pull, expect=1)
    assert (b"took a batch here" if stage == "begun" else b"while the pull ran") in err, err
    if stage == "begun":
        go_on(batch)
    (batch,) = [b for b in there.json("log", cwd=clone_dir)["batches"] if b["seq"] == 2]
    assert "local-two" in str(batch["calls"])
    there.run("undo", cwd=clone_dir)
    assert not (clone_dir / "local.txt").exists()


def test_a_lock_of_another_pid_namespace_is_not_taken_for_dead(
    machines: Callable[..., list[Machine]], monkeypatch: pytest.MonkeyPatch
) -> None:
    (here,) = machines("here")
    here.run("bash", "echo one > one.txt")
    here.run("push")
    from earshot.cas.remote import config, locks
    from earshot.cas.remote.repository import Repository

    for key, value in here.env().items():
        monkeypatch.setenv(key, value)
    spec = config.get("r")
    repo = Repository.open(spec.storage(), PASSPHRASE.encode(), config.cache_dir())
    elsewhere = locks.Lock(repo, "shared")
    monkeypatch.setattr(locks.os, "getpid", lambda: 4_000_000)  # no such pid here
    monkeypatch.setattr(locks, "_pid_space", lambda: "another-boot/4026531836")
    elsewhere.write()
    monkeypatch.undo()
    for key, value in here.env().items():
        monkeypatch.setenv(key, value)
    ran = here.run("gc", "--remote", "r", "--grace", "0", expect=75)
    assert "a push from" in ran.stderr
    dead_here = locks.Lock(repo, "shared")
    monkeypatch.setattr(locks.os, "getpid", lambda: 4_000_000)
    dead_here.write()
    monkeypatch.undo()
    elsewhere.remove()
    here.run("gc", "--remote", "r", "--grace", "0")  # this boot, this namespace: dead


def test_a_plain_pull_takes_this_roots_sessions_alone(
    machines: Callable[..., list[Machine]],
) -> None:
    one, two = machines("one", "two")
    one.run("bash", "echo one > one.txt")
    one.run("push")
    two.run("bash", "echo two > two.txt")
    mine = two.json("log")["session"]
    two.run("push")
    assert [p["session"] for p in two.json("pull", "r")["pulled"]] == [mine]
    assert [s["id"] for s in two.json("sessions")["sessions"]] == [mine]
    assert "outside" in two.run("push", "--session", "outside", expect=2).stderr


def test_a_session_retention_pruned_that_went_on_here_is_filled_in_and_pushed(
    machines: Callable[..., list[Machine]],
) -> None:
    here, there = machines("here", "there")
    here.run("bash", "echo one > one.txt")
    session = here.json("log")["session"]
    here.run("bash", "echo two > two.txt", session=session)
    here.run("push")
    from earshot.agent.core.records import TABLES, delete_session
    from earshot.cas.project import Project

    project = Project(here.root, home=here.cli.home, extra_tables=TABLES)
    with project, project.store.backend.write() as txn:
        delete_session(txn, session)  # as retention drops an old session's batches
    here.run("bash", "echo three > three.txt", env={"EARSHOT_SESSION": session})
    assert [b["seq"] for b in here.json("log", "--session", session)["batches"]] == [3]
    assert "pull" in here.run("push", "--session", session, expect=1).stderr
    pulled = here.json("pull", "r", "--session", session)["pulled"][0]
    assert pulled["new_batches"] == 2
    assert [b["seq"] for b in here.json("log", "--session", session)["batches"]] == [1, 2, 3]
    here.run("push", "--session", session)
    clone_dir = there.root / "work"
    there.run("clone", "r", str(clone_dir), "--session", session)
    assert sorted(p.name for p in clone_dir.iterdir()) == ["one.txt", "three.txt", "two.txt"]


def test_a_clone_the_disk_could_not_take_says_it_is_incomplete(
    machines: Callable[..., list[Machine]],
) -> None:
    here, there = machines("here", "there")
    seed(here.root)
    here.run("bash", "echo one > one.txt")
    session = here.json("log")["session"]
    here.run("push")
    clone_dir = there.root / "work"
    ran = there.run(
        "clone",
        "r",
        str(clone_dir),
        "--session",
        session,
        "--json",
        expect=3,
        env={"EARSHOT_FAULTS": "restore-rename@2=enospc"},
    )
    doc = ran.json()
    assert doc["skipped"] and "No space left" in doc["skipped"][0]["why"]


def test_a_push_whose_newest_batch_was_folded_says_its_changes_are_not_there_yet(
    machines: Callable[..., list[Machine]],
) -> None:
    (here,) = machines("here")
    (here.root / "gen.py").write_text("open('made.txt', 'w').write('made\\n')\n")
    budget = {"EARSHOT_RESTAGE_BUDGET_MS": "0"}
    here.run("bash", "echo one > one.txt", env=budget)
    here.run("bash", "python3 gen.py", env=budget)
    assert here.json("log", env=budget)["batches"][-1]["folded"] is True
    ran = here.run("push", "--json", env=budget)
    assert ran.json()["pushed"][0]["folded"] is True
    assert "its newest batch was folded" in ran.stderr
    again = here.run("bash", "echo two > two.txt", env=budget)
    assert again.rc == 0
    ran = here.run("push", "--json", env=budget)
    assert ran.json()["pushed"][0]["folded"] is False and "folded" not in ran.stderr
