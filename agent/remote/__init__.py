"""Sessions off the machine: push, pull and clone through a remote.

A room of the agent layer over the store's remote (``earshot.cas.remote``):
``bundle`` (a session as it travels, and whether one state holds another),
``sync`` (push, pull, clone, the remote's sessions, forget).
"""
