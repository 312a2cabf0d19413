"""``remote``, ``push``, ``pull`` and ``clone``: checkpoints off the machine.

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
    project_command,
)
from .progress import progress_for
from .render import human_bytes

if TYPE_CHECKING:
    from earshot.cas.project import Project
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
    from earshot.agent.remote.sync import remote_sessions as listed

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
    from earshot.agent.remote.sync import forget

    _spec, repo = open_remote(name)
    count = forget(repo, session, push)
    render.emit(
        {"session": session, "references": count},
        f"forgot session {session} on {name} ({count} references)",
        as_json,
    )


# -- push, pull, clone ------------------------------------------------------------


@click.command()
@click.argument("name", required=False)
@click.option("--session", "sessions", multiple=True, help="A session to push (repeatable).")
@click.option("--all", "every", is_flag=True, help="Push every session of the root.")
@project_command
def push(
    project: Project, as_json: bool, name: str | None, sessions: tuple[str, ...], every: bool
) -> None:
    """Send sessions (their batches, log and snapshots) to a remote.

    Only what the remote lacks is sent. With no --session, the root's most
    recently active session. A session the remote holds more of (pushed from
    elsewhere) is refused: pull it first.
    """
    from earshot.agent.core.sessions import list_sessions
    from earshot.agent.remote.sync import push as push_sessions
    from earshot.agent.remote.sync import pushable_sessions

    spec, repo = open_remote(only_remote(name))
    chosen = list(sessions)
    if every:
        chosen = pushable_sessions(project)
    elif not chosen:
        recent = [r.id for r in list_sessions(project)]
        chosen = recent[:1]
    if not chosen:
        fail("no session to push in this root", 3, "nothing_to_push")
    if "outside" in chosen:
        fail(
            "'outside' (what changed outside any call) belongs to this root alone; "
            "it is not pushed",
            2,
            "usage",
        )
    with progress_for(as_json) as progress:
        pushed, refused = push_sessions(project, repo, chosen, progress)
    docs = [
        {
            "session": p.session,
            "reference": p.ref,
            "up_to_date": p.ref is None,
            "batches": p.batches,
            "objects": p.objects,
            "bytes": p.bytes,
            "packs": p.packs,
        }
        for p in pushed
    ]
    lines = [
        f"{p.session}: up to date on {spec.name}"
        if p.ref is None
        else f"{p.session}: pushed {p.batches} batches to {spec.name} "
        f"({p.objects} objects, {human_bytes(p.bytes)} in {p.packs} packs)"
        for p in pushed
    ]
    if refused:
        done = f"{sum(p.ref is not None for p in pushed)} pushed; " if pushed else ""
        more = f" (and {len(refused) - 1} more refused)" if len(refused) > 1 else ""
        fail(done + refused[0] + more, 1, "diverged")
    render.emit({"remote": spec.name, "pushed": docs}, "\n".join(lines), as_json)


@click.command()
@click.argument("name", required=False)
@click.option("--session", "sessions", multiple=True, help="A session to pull (repeatable).")
@click.option(
    "--ref",
    "push",
    metavar="PUSH",
    help="For a session pushed from two places at once: the state to take "
    "(its push id, from 'remote sessions').",
)
@project_command
def pull(
    project: Project, as_json: bool, name: str | None, sessions: tuple[str, ...], push: str | None
) -> None:
    """Bring sessions from a remote into this root's store; the tree is not touched.

    With no --session, every session the remote holds. A session that went
    on both here and elsewhere is refused (exit 1), never overwritten.
    """
    from earshot.agent.remote.sync import Diverged, local_sessions, remote_sessions
    from earshot.agent.remote.sync import pull as pull_session

    if push and len(sessions) != 1:
        fail("--ref takes one --session (the session whose state it names)", 2, "usage")
    spec, repo = open_remote(only_remote(name))
    # With none named: the sessions this root has that the remote holds too
    # (other roots' sessions come only when named).
    mine = local_sessions(project)
    chosen = list(sessions) or [s.session for s in remote_sessions(repo) if s.session in mine]
    docs, lines, refused = [], [], []
    with progress_for(as_json) as progress:
        for session in chosen:
            try:
                got = pull_session(project, repo, session, progress, push)
            except Diverged as exc:
                refused.append(str(exc))
                continue
            docs.append(
                {
                    "session": got.session,
                    "up_to_date": got.up_to_date,
                    "batches": got.batches,
                    "new_batches": got.new_batches,
                    "objects": got.objects,
                    "bytes": got.bytes,
                }
            )
            lines.append(
                f"{got.session}: up to date"
                if got.up_to_date
                else f"{got.session}: pulled {got.new_batches} new batches "
                f"({got.objects} objects, {human_bytes(got.bytes)})"
            )
    if refused:
        done = f"{len(docs)} pulled; " if docs else ""
        more = f" (and {len(refused) - 1} more refused)" if len(refused) > 1 else ""
        fail(done + refused[0] + more, 1, "diverged")
    if not chosen:
        lines = [
            f"no session of this root is on {spec.name} ('earshot remote sessions {spec.name}' "
            f"lists them; 'earshot pull {spec.name} --session ID' brings one)"
        ]
    render.emit({"remote": spec.name, "pulled": docs}, "\n".join(lines), as_json)


@click.command()
@click.argument("name")
@click.argument("directory", type=click.Path(file_okay=False))
@click.option("--session", help="The session to clone (default: the remote's only one).")
@click.option(
    "--ref",
    "push",
    metavar="PUSH",
    help="For a session pushed from two places at once: the state to take "
    "(its push id, from 'remote sessions').",
)
@remote_command
def clone(as_json: bool, name: str, directory: str, session: str | None, push: str | None) -> None:
    """Make DIRECTORY a new root at a session's latest state, holding the session.

    'earshot chat --continue', 'earshot log' and 'earshot undo' work there as
    they did where the session was pushed from.
    """
    from earshot.agent.remote.sync import clone as clone_session
    from earshot.agent.remote.sync import remote_sessions

    _spec, repo = open_remote(name)
    if session is None:
        found = remote_sessions(repo)
        if len(found) != 1:
            fail(f"the remote holds {len(found)} sessions: name one with --session", 2, "usage")
        session = found[0].session
    with progress_for(as_json) as progress:
        done = clone_session(repo, directory, session, progress=progress, push=push)
    doc = {
        "root": done.root,
        "session": session,
        "batches": done.pulled.batches,
        "files": done.files,
        "snapshot": done.restored,
        "objects": done.pulled.objects,
        "bytes": done.pulled.bytes,
    }
    doc["skipped"] = [{"path": p, "why": why} for p, why in done.skipped]
    doc["not_held"] = done.unheld
    text = (
        f"cloned session {session} into {done.root}: {done.pulled.batches} batches, "
        f"{done.files} files ({human_bytes(done.pulled.bytes)} fetched)"
    )
    if done.unheld:
        text += f"; {done.unheld} paths the session does not hold (ignored caches) not made"
    if done.skipped:
        from .quoting import quote_path

        text += "".join(f"\n  not written: {quote_path(p)}: {why}" for p, why in done.skipped[:20])
        text += f"\nthe clone is incomplete: {len(done.skipped)} paths could not be written"
    render.emit(doc, text, as_json)
    if done.skipped:
        sys.exit(3)


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
