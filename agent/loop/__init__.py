"""earshot chat's model loop and its providers; no terminal code.

``chat.Chat`` runs a session's turns: the prompt into the log, the model
asked (``provider``: ``anthropic_api``, ``openai_api``, through their
official SDKs; ``errors`` says their failures in a line), each reply's tool
calls (``tools``) run as one batch of the session (``reply_batch``), asking
first (``permissions``); ``history`` builds each request from the log
alone; ``workspace`` opens the root's project per piece of work. A face
(the terminal, print mode, a test) implements ``events.Events``.
"""
