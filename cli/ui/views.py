"""What the page shows, read from the functions the CLI's ``--json`` comes from.

``sessions`` is ``earshot sessions --json``; ``session`` is ``earshot
transcript --json`` and ``earshot log --json`` of one session; ``diff`` is
``earshot diff N --json`` with each file's patch. Where the page needs
HTML (a reply's markdown, a coloured diff) it is added beside the
document's own fields (``html``), never instead of them. Nothing here
changes a file or the store: a root earshot never recorded shows no
sessions, and none is made.
"""

from __future__ import annotations

from typing import Any

from earshot.agent.core.conversation import summaries
from earshot.agent.core.transcript import read_transcript
from earshot.agent.loop.workspace import Workspace
from earshot.cas.paths import checkpoints_dir

from .. import render, render_agent, render_conversation, render_session
from ..cmd_diff import batch_changes, patches_of
from ..cmd_history import history
from . import markup

Doc = dict[str, Any]


def recorded(workspace: Workspace) -> bool:
    """Whether the root has a store (reading never makes one)."""
    return checkpoints_dir(workspace.root, workspace.home).exists()


def sessions(workspace: Workspace) -> Doc:
    """``earshot sessions --json``."""
    if not recorded(workspace):
        return render_session.sessions([])[0]
    with workspace.project(finish=False) as project:
        listed = summaries(project, with_prompt_counts=True)
    return render_session.sessions(listed)[0]


def session(workspace: Workspace, ident: str, at: str | None = None) -> Doc:
    """The transcript on the current path (or the branch of ``at``) and the log."""
    with workspace.project(finish=False) as project:
        shown = render_conversation.transcript(read_transcript(project, ident, at))[0]
        log = render_agent.log(ident, *history(project, ident))[0]
    for item in shown["items"]:
        if item["type"] == "assistant":
            item["html"] = markup.markdown(item["text"])
        elif item["type"] == "compaction":
            item["html"] = markup.markdown(item["summary"])
    return {"transcript": shown, "log": log}


def diff(workspace: Workspace, ident: str, seq: int) -> Doc:
    """``earshot diff N --json`` of batch ``seq``, with each text file's patch and its HTML."""
    with workspace.project(finish=False) as project:
        changes = batch_changes(project, ident, seq)
        patches = patches_of(project, changes)
    doc = render.changes(changes, False, patches)[0]
    for change in doc["changes"]:
        patch = patches.get(change["path"])
        change["patch"] = patch
        change["html"] = markup.diff(change["path"], patch) if patch else None
    return {"session": ident, "seq": seq, **doc}
