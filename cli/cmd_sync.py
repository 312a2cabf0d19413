"""``push``, ``pull`` and ``clone``: sessions to and from a remote.

Each opens the remote as ``cmd_remote`` does (``open_remote``), prints
text or one ``--json`` document, and turns a refused session into one line
and exit 1 (what went before it is said in that line).
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import click

from . import render
from .cmd_remote import only_remote, open_remote, remote_command
from .common import fail, project_command
from .progress import progress_for
from .render import human_bytes

if TYPE_CHECKING:
    from earshot.cas.project import Project


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
    from earshot.agent.remote.push import push as push_sessions
    from earshot.agent.remote.push import pushable_sessions

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
            "folded": p.folded,
        }
        for p in pushed
    ]
    for p in pushed:
        if p.folded:
            click.echo(
                f"earshot: warning: {p.session}: its newest batch was folded (its changes go "
                "into the next batch's snapshot): they reach the remote once the session's "
                "next batch records them and you push again",
                err=True,
            )
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
    from earshot.agent.remote.heads import Diverged, remote_sessions
    from earshot.agent.remote.pull import local_sessions
    from earshot.agent.remote.pull import pull as pull_session

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
    from earshot.agent.remote.heads import remote_sessions
    from earshot.agent.remote.pull import clone as clone_session

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
