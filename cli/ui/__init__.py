"""``earshot ui``: the root's sessions and the chat in a browser, on 127.0.0.1.

A Starlette application served by uvicorn (``server``). What it shows
comes from the functions the CLI's ``--json`` output comes from
(``views``: the sessions, a transcript, a session's log, a batch's diff);
what it changes goes through the core the CLI uses, with the CLI's
preview first (``actions``: rewind, undo, redo); its composer runs the
loop ``earshot chat`` runs (``composer``). ``live`` tells open pages when
anything appended to a session, whoever did it; ``guard`` refuses every
request without the URL's token, with a Host other than the local one, or
(to change anything) from another origin. The page itself (``static/``)
loads nothing from the network.
"""
