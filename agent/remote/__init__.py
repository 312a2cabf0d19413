"""Sessions off the machine: push, pull and clone through a remote.

A room of the agent layer over the store's remote (``earshot.cas.remote``):
``bundle`` (a session as it travels, and whether one state holds another),
``heads`` (a session's states on the remote; the remote's sessions; forget),
``push``, and ``pull`` (with clone).
"""
