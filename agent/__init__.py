"""The agent layer: what an agent's tool calls do to a root, and how they are taken back.

Four rooms, each a package:

- ``core``: sessions, tool batches, the snapshot policy, ledgers, undo, redo,
  rewind, fork and recovery after a crash. It builds on ``earshot.cas`` and
  may use the three rooms below.
- ``log``: the append-only JSONL conversation trees, their ids, check and
  repair. It knows nothing of checkpoints.
- ``shell``: whether a shell command may destroy data (a heuristic that
  imports nothing of earshot).
- ``watch``: the inotify watcher, the daemon hosting it, and the thin client
  a short-lived process asks what changed.

A room never imports another room's insides except through the core.
"""
