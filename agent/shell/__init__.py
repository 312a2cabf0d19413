"""Whether a shell command may destroy data, decided before it runs.

A pure heuristic over the command's text (tree-sitter-bash, plus PowerShell
and cmd): it imports nothing of earshot. ``classify(command, exists)`` in
``destructive`` is the entry point; ``words`` turns syntax-tree nodes into
literal words, ``argv`` is the vocabulary the per-command rules share,
``rules`` dispatches to them (``files``, ``packages``, ``wrappers``,
``interpreters``, ``windows``).
"""
