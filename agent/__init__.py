"""Agent layer: sessions, tool batches, snapshot policy, ledger, undo and redo."""
