"""The agent layer: what an agent's tool calls do to a root, and how they are taken back.

Seven rooms, each a package:

- ``core``: sessions, tool batches, the snapshot policy, ledgers, undo, redo,
  rewind, fork and recovery after a crash. It builds on ``earshot.cas`` and
  may use the three rooms below.
- ``log``: the append-only JSONL conversation trees, their ids, check and
  repair. It knows nothing of checkpoints.
- ``shell``: whether a shell command may destroy data (a heuristic that
  imports nothing of earshot).
- ``watch``: the inotify watcher, the daemon hosting it, and the thin client
  a short-lived process asks what changed.
- ``hooks``: other agents' hook events (Claude Code, Codex CLI, Gemini CLI)
  onto sessions and batches, through the core.
- ``loop``: earshot chat's model loop and providers, no terminal code.
- ``remote``: sessions pushed to, pulled from and cloned out of an
  S3-compatible remote, over the core and ``earshot.cas.remote``.

A room never imports another room's insides except through the core.
"""
