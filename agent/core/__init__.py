"""The core of the agent layer: batches of tool calls, their ledgers, and taking them back.

``engine.Engine`` runs a batch under the snapshot policy and commits it;
``records`` holds what is kept per batch and session; ``undo`` reverts and
replays batches; ``navigation`` rewinds and forks; ``recovery`` finishes what
a killed process started; ``conversation`` and ``sessions`` tie a session's
checkpoints to its log, and ``removal`` takes both away (never a session
busy or open in a chat). ``calls``, ``files``, ``command`` and ``tracker`` are
the tools and what they need.
"""
