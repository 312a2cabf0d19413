"""The conversation of a session: an append-only JSONL tree, one file each.

``session.Session`` is the handle (append, navigate, context); ``header``
the format of line 1, ``entries`` that of every further line, ``fields`` the
JSON field readers and line encoder both share, ``logfile`` the write queue
and torn tails, ``fileio`` opening and reading a file safely, ``scan`` how
bytes become lines, ``tree`` the tree built from them, ``ids`` the
time-ordered ids, ``listing`` the sessions of a root, ``check`` check and
repair. It imports only earshot.cas's small shared modules (errors, paths,
logs, faults): nothing of checkpoints.
"""
