"""Watching a root: which paths changed since a token, or "don't know".

``watcher.Watcher`` holds one inotify watch per recorded directory
(``tree`` says which); ``daemon`` hosts it behind a unix socket, one per
root; ``client`` is the lean side a short-lived process uses (no watchdog,
no lmdb), offered to the core as a change tracker.
"""
