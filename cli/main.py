"""The ``earshot`` command: a click group whose commands load on first use.

Commands are imported only when invoked, so ``earshot --version`` and
``--help`` never load LMDB, BLAKE3 or zstd.
"""

from __future__ import annotations

import importlib
import sys
from typing import Any

import click

VERSION = "0.1.0"

#: command name -> (module under earshot.cli, attribute, one-line help)
COMMANDS: dict[str, tuple[str, str, str]] = {
    "snapshot": ("cmd_snapshot", "snapshot", "Record the root as a snapshot."),
    "snapshots": ("cmd_snapshot", "snapshots", "List the snapshots of the root, newest first."),
    "diff": ("cmd_diff", "diff", "Show what changed between two snapshots, or since one."),
    "restore": ("cmd_restore", "restore", "Bring the root back to a snapshot."),
    "forget": ("cmd_maintenance", "forget", "Unlist snapshots so gc can drop them."),
    "gc": ("cmd_maintenance", "gc", "Drop objects no snapshot needs; --compact shrinks the file."),
    "fsck": ("cmd_maintenance", "fsck", "Verify every object and reference in the store."),
    "purge": ("cmd_maintenance", "purge", "Remove everything earshot keeps for the root."),
    "stats": (
        "cmd_maintenance",
        "stats",
        "Objects, bytes stored, disk cost per byte.",
    ),
    "session": ("cmd_session", "session", "Start a session: 'earshot session new'."),
    "sessions": (
        "cmd_conversation",
        "sessions",
        "List the root's sessions, newest first; 'check' their files.",
    ),
    "prompt": ("cmd_conversation", "prompt", "Append a user prompt to the session."),
    "say": ("cmd_conversation", "say", "Append a message (--role user|assistant)."),
    "tree": ("cmd_conversation", "tree", "List the numbered prompts on the current path."),
    "transcript": (
        "cmd_conversation",
        "transcript",
        "Show the session's conversation (--at another branch).",
    ),
    "rewind": (
        "cmd_conversation",
        "rewind",
        "Go back to before prompt N; --code also undoes its batches.",
    ),
    "fork": ("cmd_conversation", "fork", "Start a new session from before prompt N."),
    "bash": ("cmd_tools", "bash", "Run a shell command as a one-call batch."),
    "write": ("cmd_tools", "write", "Write a file (stdin or --from) as a one-call batch."),
    "edit": ("cmd_tools", "edit", "Replace text in a file as a one-call batch."),
    "exec": ("cmd_tools", "exec_", "Run a batch of tool calls given as JSON."),
    "log": ("cmd_history", "log", "List the session's batches and what each changed."),
    "undo": ("cmd_history", "undo", "Undo the session's last N batches."),
    "redo": ("cmd_history", "redo", "Redo the most recent undo."),
    "watch": ("cmd_watch", "watch", "Run the watcher daemon of the root (--status, --stop)."),
    "chat": ("cmd_chat", "chat", "Talk to a coding agent that works in the root (-p for scripts)."),
    "hook": ("cmd_hook", "hook", "Handle one hook event of Claude Code, Codex or Gemini CLI."),
    "install": ("cmd_install", "install", "Record what Claude Code, Codex or Gemini CLI does."),
    "uninstall": ("cmd_install", "uninstall", "Take earshot's hooks out of an agent's settings."),
    "ui": ("cmd_ui", "ui", "Serve the root's sessions and a chat in a browser, on 127.0.0.1."),
    "remote": ("cmd_remote", "remote", "Name the S3-compatible remotes checkpoints go to."),
    "push": ("cmd_sync", "push", "Send sessions and their checkpoints to a remote, encrypted."),
    "pull": ("cmd_sync", "pull", "Bring sessions from a remote into this root's store."),
    "clone": ("cmd_sync", "clone", "Make a new root at a session's latest state from a remote."),
    "doctor": ("cmd_doctor", "doctor", "Check that the agents' hooks run and earshot can record."),
}


class LazyGroup(click.Group):
    """A group that imports a command's module only when it runs."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        spec = COMMANDS.get(cmd_name)
        if spec is None:
            return None
        module = importlib.import_module(f"earshot.cli.{spec[0]}")
        command: click.Command = getattr(module, spec[1])
        return command

    def make_context(
        self,
        info_name: str | None,
        args: list[str],
        parent: click.Context | None = None,
        **extra: Any,
    ) -> click.Context:
        from .common import usage_errors_as_json

        with usage_errors_as_json(sys.argv[1:]):
            return super().make_context(info_name, args, parent, **extra)

    def invoke(self, ctx: click.Context) -> Any:
        from .common import usage_errors_as_json

        # A command's own arguments are parsed here, under the group's call.
        with usage_errors_as_json(sys.argv[1:]):
            return super().invoke(ctx)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        # Short help from the table, so listing commands imports none of them.
        rows = [(name, COMMANDS[name][2]) for name in self.list_commands(ctx)]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


#: Options of ``earshot`` alone: they start ``earshot chat`` with them.
CHAT_OPTIONS = ("--continue", "--resume", "--model")


@click.group(
    cls=LazyGroup,
    invoke_without_command=True,
    context_settings={"help_option_names": ["-h", "--help"]},
)
@click.version_option(VERSION, prog_name="earshot")
@click.option("--continue", "continue_", is_flag=True, help="earshot chat --continue.")
@click.option("--resume", "resume_id", metavar="ID", help="earshot chat --resume ID.")
@click.option("--model", metavar="PROVIDER:NAME", help="earshot chat --model PROVIDER:NAME.")
@click.pass_context
def cli(ctx: click.Context, continue_: bool, resume_id: str | None, model: str | None) -> None:
    """Checkpoints, undo and session trees for AI coding agents.

    earshot records a working tree (the root, default: the current directory)
    into its own content-addressed store, never touching your git repository.
    A command's options go after it or, for --json, -v, --root and --session,
    before it too: `earshot --json log`. `earshot` alone
    on a terminal is `earshot chat`, and takes its --continue, --resume ID
    and --model.

    diff, log, tree and transcript page their output on a terminal ($EARSHOT_PAGER,
    else $PAGER, else less; --no-pager for none) and colour it (NO_COLOR,
    or EARSHOT_COLOR=never, for none).

    \b
    Exit codes: 0 done; 1 error; 2 usage; 3 done, but some paths were
    skipped or in conflict (listed).
    Data lives in $EARSHOT_HOME, else $XDG_DATA_HOME/earshot,
    else ~/.local/share/earshot.
    Settings: ~/.config/earshot/config.toml, then the project's
    .earshot.toml (what the EARSHOT_* variables set; the variables win).
    """
    chosen = continue_ or resume_id is not None or model is not None
    if ctx.invoked_subcommand is not None:
        if chosen:
            raise click.UsageError(
                f"{', '.join(CHAT_OPTIONS)} go with 'earshot chat' (or 'earshot' alone); "
                f"options of '{ctx.invoked_subcommand}' go after it"
            )
        return
    if not chosen and not (sys.stdin.isatty() and sys.stdout.isatty()):
        click.echo(ctx.get_help())
        return
    chat = LazyGroup.get_command(cli, ctx, "chat")
    assert chat is not None
    ctx.invoke(chat, continue_=continue_, resume_id=resume_id, model=model)


def main() -> None:
    """Console-script entry point."""
    # File names that are not valid UTF-8 arrive as surrogate escapes; write
    # them back as the original bytes rather than failing under a strict locale.
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            reconfigure(errors="surrogateescape")
    try:
        cli.main(prog_name="earshot", standalone_mode=True)
    except KeyboardInterrupt:
        click.echo("earshot: interrupted", err=True)
        sys.exit(130)
