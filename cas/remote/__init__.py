"""Checkpoints off the machine: a store's objects on an S3-compatible remote.

A room of the store: it knows objects, snapshots and opaque references,
nothing of sessions (the agent layer's ``earshot.agent.remote`` builds on it).

- ``storage``: the bucket, through boto3 (the only module that speaks to a server)
- ``crypto``: the master key, sealing (AES-256-GCM), keyed names, scrypt-wrapped keys
- ``packs``: the byte layout of packs and index files
- ``repository``: opening a remote, its index (cached), packs and references
- ``transfer``: what the remote lacks, sent; what the local store lacks, fetched
- ``locks``: shared locks for pushes, an exclusive one for gc
- ``prune``: ``gc --remote``; ``check``: ``fsck --remote``
- ``config``: the remotes a person has named, and their secrets
"""
