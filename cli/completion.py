"""Shell completion of what only the store knows: snapshot ids and batch numbers.

click completes commands and options itself (``_EARSHOT_COMPLETE``; the
README says how to turn it on). These complete an argument from the root's
store: ``restore``, ``forget`` and ``diff`` take snapshot ids (the first 12
hex digits, with each snapshot's time and note as the hint), ``diff`` a
batch number of the session too. ``answer_shell`` is where the console
script sends a shell's request (``earshot.cli.entry``). A root earshot has not recorded completes
nothing and, as every read-only command, gets no store.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from typing import Any, NoReturn

import click
from click.shell_completion import CompletionItem

_SHOWN = 12


@contextlib.contextmanager
def _project(ctx: click.Context) -> Iterator[Any]:
    """The root's project, or None (no store, a root refused, any error)."""
    from earshot.cas.paths import checkpoints_dir

    from .common import discovered

    try:
        root = discovered(ctx.params.get("root"))
    except Exception:  # a completion says nothing, rather than an error mid-line
        yield None
        return
    if not os.path.isdir(root) or not checkpoints_dir(root).exists():
        yield None
        return
    from earshot.agent.core.records import TABLES
    from earshot.cas.project import Project

    try:
        with Project(root, extra_tables=TABLES) as project:
            yield project
    except Exception:
        yield None


def snapshot_ids(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[Any]:
    """The listed snapshots whose ids start with ``incomplete``, newest first."""
    from earshot.cas.digest import to_hex

    from .render import when

    with _project(ctx) as project:
        if project is None:
            return []
        items = []
        for digest, snap in project.snapshots():
            ident = to_hex(digest)
            if ident.startswith(incomplete.lower()):
                hint = f"{when(snap.time_ns)} {snap.note}".strip()
                items.append(CompletionItem(ident[:_SHOWN], help=hint))
        return items


def snapshot_ids_or_batches(
    ctx: click.Context, param: click.Parameter, incomplete: str
) -> list[Any]:
    """``diff``'s first argument: a batch number of the session, or a snapshot id."""
    return [*_batches(ctx, incomplete), *snapshot_ids(ctx, param, incomplete)]


def _batches(ctx: click.Context, incomplete: str) -> list[Any]:
    from earshot.agent.core.conversation import BATCHES, find
    from earshot.agent.core.records import session_batches

    if incomplete and not incomplete.isdigit():
        return []
    with _project(ctx) as project:
        if project is None:
            return []
        try:
            ident = find(project, ctx.params.get("session_id"), acting=BATCHES)
        except Exception:
            return []
        if ident is None:
            return []
        with project.store.backend.read() as view:
            batches = session_batches(view, ident, ledgers=False)
        from .render_agent import call_summary

        return [
            CompletionItem(str(b.seq), help=call_summary(b))
            for b in reversed(batches)
            if str(b.seq).startswith(incomplete)
        ]


def answer_shell() -> NoReturn:
    """A shell asks for completions: the words before the cursor read as a
    command line (options before the command moved after it), the settings
    applied if they can be, nothing said on stderr (it would land in the
    person's prompt); click answers."""
    import shlex

    from click.shell_completion import split_arg_string

    from . import global_options, settings_file

    words = split_arg_string(os.environ.get("COMP_WORDS", ""))
    with contextlib.suppress(ValueError):
        cword = int(os.environ.get("COMP_CWORD", ""))
        if 0 < cword <= len(words):
            words[1:cword] = global_options.hoisted(words[1:cword])
            os.environ["COMP_WORDS"] = " ".join(shlex.quote(w) for w in words)
    try:
        start = os.getcwd()
        with contextlib.suppress(settings_file.SettingsError):
            settings_file.apply(start)
    except OSError:
        sys.exit(0)  # no directory to complete in: nothing to offer
    from .main import main as full

    full()
    sys.exit(0)  # click's completion exits itself
