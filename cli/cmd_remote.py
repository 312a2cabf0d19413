"""``remote``: the remotes checkpoints go to (``push``, ``pull`` and ``clone``
are in ``cmd_sync``).

Also what ``fsck --remote`` and ``gc --remote`` run (``check_remote``,
``prune_remote``). Every command opens the remote with its secret (key file,
``$EARSHOT_REMOTE_PASSPHRASE`` or a prompt), turns earshot's errors into one
line and its exit code, and prints text or one ``--json`` document.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from . import render
from .common import (
    configure_logging,
    error_kind,
    fail,
)
from .progress import progress_for
from .render import human_bytes

if TYPE_CHECKING:
    from earshot.cas.remote.config import RemoteSpec
    from earshot.cas.remote.repository import Repository

F = TypeVar("F", bound=Callable[..., Any])


def _ask(prompt: str) -> str:
    if not sys.stdin.isatty():
        return ""
    return str(click.prompt(prompt, hide_input=True, err=True))


def open_remote(name: str, create: bool = False) -> tuple[RemoteSpec, Repository]:
    from earshot.cas.remote import config
    from earshot.cas.remote.repository import Repository

    spec = config.get(name)
    repo = Repository.open(spec.storage(), spec.secret(_ask), config.cache_dir(), create=create)
    return spec, repo


def only_remote(name: str | None) -> str:
    """The remote a command means: the one named, else the only one there is."""
    if name:
        return name
    from earshot.cas.remote import config

    known = sorted(config.load())
    if len(known) == 1:
        return known[0]
    fail(
        "name the remote ("
        + (
            ", ".join(known) + " are known)"
            if known
            else "none is known yet; 'earshot remote add NAME s3://BUCKET/PREFIX')"
        ),
        2,
        "usage",
    )


def remote_command(func: F) -> F:
    """--json and -v, and earshot's errors as one line with their exit code."""

    @click.option("--json", "as_json", is_flag=True, help="Print one JSON document on stdout.")
    @click.option("-v", "--verbose", count=True, help="Log to stderr (-vv for debug).")
    @functools.wraps(func)
    def wrapper(as_json: bool, verbose: int, **kwargs: Any) -> Any:
        configure_logging(verbose)
        from earshot.cas.errors import EarshotError

        try:
            return func(as_json=as_json, **kwargs)
        except EarshotError as exc:
            fail(str(exc), exc.exit_code, error_kind(exc))
        except OSError as exc:
            where = f"{exc.filename}: " if exc.filename else ""
            fail(f"{where}{exc.strerror or exc}")

    return wrapper  # type: ignore[return-value]


# -- earshot remote ------------------------------------------------------------------


@click.group()
def remote() -> None:
    """Name the S3-compatible remotes checkpoints are pushed to.

    Everything sent is encrypted on this machine (AES-256-GCM) under a key
    opened by a key file or a passphrase ($EARSHOT_REMOTE_PASSPHRASE); the
    server sees neither contents nor file or session names. Lose both the
    key file and the passphrase and the remote's content is lost with them.
    """


@remote.command("add")
@click.argument("name")
@click.argument("url")
@click.option("--endpoint", help="The server's URL, for servers other than AWS S3.")
@click.option(
    "--key-file",
    type=click.Path(dir_okay=False),
    help="A file whose content opens the remote (instead of a passphrase).",
)
@click.option(
    "--new-key-file",
    is_flag=True,
    help="Make --key-file now: 32 random bytes, readable by you alone. Keep a copy.",
)
@remote_command
def remote_add(
    as_json: bool,
    name: str,
    url: str,
    endpoint: str | None,
    key_file: str | None,
    new_key_file: bool,
) -> None:
    """Name a remote (s3://BUCKET/PREFIX) and open it, making it if it is empty.

    The key is checked at once: a wrong passphrase or key file is refused
    here, not at the first push.
    """
    from earshot.cas.remote import config, crypto
    from earshot.cas.remote.repository import Repository

    config.check_new(name, url)
    remotes = config.load()
    if name in remotes:
        fail(f"a remote named {name!r} exists ({remotes[name].url}); 'earshot remote rm' it first")
    if new_key_file:
        if not key_file:
            fail("--new-key-file needs --key-file PATH (where to make it)", 2, "usage")
        crypto.new_key_file(key_file)
    if key_file:
        key_file = str(Path(key_file).expanduser().resolve())
    spec = config.RemoteSpec(name, url, endpoint, key_file)
    storage = spec.storage()
    existed = storage.get("config") is not None
    repo = Repository.open(storage, spec.secret(_ask), config.cache_dir(), create=True)
    remotes[name] = spec
    config.save(remotes)
    doc: dict[str, Any] = {"name": name, "url": url, "endpoint": endpoint, "key_file": key_file}
    doc |= {"created": not existed, "id": repo.id}
    made = "made" if not existed else "opened"
    render.emit(doc, f"remote {name}: {url} ({made}, id {repo.id[:8]})", as_json)


@remote.command("list")
@remote_command
def remote_list(as_json: bool) -> None:
    """The remotes named on this machine."""
    from earshot.cas.remote import config

    remotes = config.load()
    docs = [
        {"name": r.name, "url": r.url, "endpoint": r.endpoint, "key_file": r.key_file}
        for r in remotes.values()
    ]
    lines = [
        f"{r.name}\t{r.url}" + (f"\t(endpoint {r.endpoint})" if r.endpoint else "")
        for r in remotes.values()
    ]
    render.emit({"remotes": docs}, "\n".join(lines) or "no remote yet", as_json)


@remote.command("rm")
@click.argument("name")
@remote_command
def remote_rm(as_json: bool, name: str) -> None:
    """Forget a remote's name here; nothing on the remote is touched."""
    from earshot.cas.remote import config

    remotes = config.load()
    config.get(name)
    del remotes[name]
    config.save(remotes)
    render.emit({"removed": name}, f"removed remote {name} (its content stays)", as_json)


@remote.command("sessions")
@click.argument("name", required=False)
@remote_command
def remote_sessions(as_json: bool, name: str | None) -> None:
    """The sessions a remote holds, newest push first."""
    from earshot.agent.remote.heads import remote_sessions as listed

    _spec, repo = open_remote(only_remote(name))
    found = listed(repo)
    docs = [
        {
            "session": s.session,
            "batches": s.batches,
            "pushed": render.when(s.time_ns),
            "host": s.host,
            "heads": s.heads,
            "refs": s.refs,
        }
        for s in found
    ]
    lines = [
        f"{s.session}  {s.batches} batches  pushed {render.when(s.time_ns)} from {s.host}"
        + (
            f"  ({s.heads} states pushed from two places: {', '.join(s.refs)})"
            if s.heads > 1
            else ""
        )
        for s in found
    ]
    render.emit({"sessions": docs}, "\n".join(lines) or "no session on the remote", as_json)


@remote.command("forget")
@click.argument("name")
@click.argument("session")
@click.option(
    "--ref",
    "push",
    metavar="PUSH",
    help="Only this state of a session pushed from two places (see 'remote sessions').",
)
@remote_command
def remote_forget(as_json: bool, name: str, session: str, push: str | None) -> None:
    """Take a session off a remote; 'earshot gc --remote NAME' then frees its data."""
    from earshot.agent.remote.heads import forget

    _spec, repo = open_remote(name)
    count = forget(repo, session, push)
    render.emit(
        {"session": session, "references": count},
        f"forgot session {session} on {name} ({count} references)",
        as_json,
    )


# -- fsck --remote, gc --remote -----------------------------------------------------


def check_remote(name: str, as_json: bool) -> None:
    from earshot.cas.remote.check import check

    _spec, repo = open_remote(name)
    with progress_for(as_json) as progress:
        report = check(repo, progress)
    doc = {
        "remote": name,
        "packs": report.packs,
        "objects": report.objects,
        "bytes": report.bytes,
        "references": report.refs,
        "problems": report.problems,
    }
    text = "\n".join(
        [
            *report.problems,
            f"remote {name}: {report.objects} objects in {report.packs} packs "
            f"({human_bytes(report.bytes)}), {report.refs} references: "
            + (f"{len(report.problems)} problems" if report.problems else "sound"),
        ]
    )
    render.emit(doc, text, as_json)
    if report.problems:
        sys.exit(1)


def prune_remote(name: str, as_json: bool, remote_grace: float | None = None) -> None:
    from earshot.cas.remote.prune import GRACE_S, prune

    _spec, repo = open_remote(name)
    grace = GRACE_S if remote_grace is None else remote_grace
    with progress_for(as_json) as progress:
        report = prune(repo, grace, progress)
    doc = {
        "remote": name,
        "references_dropped": report.refs_dropped,
        "packs_dropped": report.packs_dropped,
        "bytes_dropped": report.bytes_dropped,
        "packs_kept": report.packs_kept,
        "bytes_kept": report.bytes_kept,
        "young_packs_kept": report.young_kept,
        "locks_dropped": report.locks_dropped,
    }
    text = (
        f"remote {name}: dropped {report.packs_dropped} packs ({human_bytes(report.bytes_dropped)})"
        f" and {report.refs_dropped} references held by newer ones; kept {report.packs_kept} "
        f"packs ({human_bytes(report.bytes_kept)}"
        + (f", {report.young_kept} younger than the grace period" if report.young_kept else "")
        + ")"
    )
    render.emit(doc, text, as_json)


def or_remote(action: Callable[..., None], *extra: Callable[[Any], Any]) -> Callable[[F], F]:
    """Outermost on ``fsck``/``gc``: with ``--remote NAME`` the command acts on
    that remote (``action(name, as_json, **extra options)``), not on the root."""

    def decorate(func: F) -> F:
        @functools.wraps(func)
        def wrapper(**options: Any) -> Any:
            name = options.pop("remote_name", None)
            if name is None:
                for key in [k for k in options if k.startswith("remote_")]:
                    options.pop(key)
                return func(**options)
            configure_logging(options.get("verbose", 0))
            from earshot.cas.errors import EarshotError

            extras = {k: v for k, v in options.items() if k.startswith("remote_")}
            try:
                action(name, options.get("as_json", False), **extras)
            except EarshotError as exc:
                fail(str(exc), exc.exit_code, error_kind(exc))

        wrapped: Any = click.option(
            "--remote",
            "remote_name",
            metavar="NAME",
            help="Act on this remote instead of the root's store.",
        )(wrapper)
        for option in extra:
            wrapped = option(wrapped)
        return wrapped  # type: ignore[no-any-return]

    return decorate
