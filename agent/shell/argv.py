"""Shared vocabulary of the destructive-command rules: argument vectors, the
host interface the rules report to, and a small getopt.

An argument is ``str`` when the shell word is a literal (quotes and escapes
already removed) and ``None`` when it is not (it contains a parameter
expansion, a command substitution, an arithmetic expansion...): the rules must
then assume the worst about it.
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from typing import Protocol

Arg = str | None
Argv = Sequence[Arg]

#: Marks "no directory change" for :meth:`Host.run_argv` (``None`` already
#: means "changes to a directory we cannot name").
SAME_DIR = "."


class Host(Protocol):
    """What a rule may do: flag, check a write target, or recurse."""

    def flag(self, reason: str) -> None:
        """Record that the command may destroy data, and why."""

    def overwrite(self, tool: str, path: Arg) -> None:
        """Flag ``tool`` writing over ``path`` unless the path provably does not exist."""

    def run_argv(self, argv: Argv, stdin: str | None, chdir: Arg = SAME_DIR) -> None:
        """Classify a wrapped simple command (``sudo rm x`` -> ``rm x``).

        ``stdin`` is the text fed to it when the command line shows it (a
        heredoc or here-string), else ``None``; ``chdir`` is a directory the
        wrapper switches to first (``env -C dir``).
        """

    def run_script(self, script: Arg, origin: str, *, same_shell: bool = False) -> None:
        """Parse and classify shell source; ``None`` means it cannot be seen (flagged)."""

    def chdir(self, path: Arg) -> None:
        """Track a ``cd`` so later relative paths are checked in the right place."""

    def target(self, path: Arg) -> None:
        """A path the command may delete or overwrite, with everything below it: what
        earshot records first, past its limits, so undo can bring it back."""


#: A rule: (host, argv, visible stdin text) -> None, reporting through the host.
Handler = Callable[[Host, Argv, "str | None"], None]


@dataclass(slots=True)
class Options:
    """The result of :func:`getopt`: options seen, their values, and operands."""

    flags: set[str] = field(default_factory=set)
    values: dict[str, list[Arg]] = field(default_factory=dict)
    operands: list[Arg] = field(default_factory=list)

    def has(self, *names: str) -> bool:
        return any(name in self.flags for name in names)

    def last(self, *names: str) -> tuple[bool, Arg]:
        """(present, value) of the last occurrence among ``names``."""
        found: list[Arg] = []
        for name in names:
            found.extend(self.values.get(name, ()))
        return (True, found[-1]) if found else (False, None)


def getopt(
    args: Argv,
    short_arg: str = "",
    long_arg: Collection[str] = (),
    *,
    short_optional: str = "",
    stop: bool = False,
) -> Options:
    """Split ``args`` into options and operands, GNU style.

    ``short_arg`` lists short options that take a value (attached or in the
    next word), ``short_optional`` those whose value can only be attached
    (``sed -i.bak``), ``long_arg`` the long options that take a value in the
    next word when written without ``=``. With ``stop``, the first operand
    ends option parsing and it and everything after it become operands (how
    wrappers such as ``sudo`` and ``env`` read their command line). A
    non-literal word is an operand: we cannot tell what it is.
    """
    opts = Options()
    i = 0
    n = len(args)
    while i < n:
        arg = args[i]
        i += 1
        if arg is None or arg == "-" or not arg.startswith("-"):
            opts.operands.append(arg)
            if stop:
                opts.operands.extend(args[i:])
                break
            continue
        if arg == "--":
            opts.operands.extend(args[i:])
            break
        if arg.startswith("--"):
            name, eq, value = arg.partition("=")
            opts.flags.add(name)
            if eq:
                opts.values.setdefault(name, []).append(value)
            elif name in long_arg:
                opts.values.setdefault(name, []).append(args[i] if i < n else None)
                i += 1
            continue
        j = 1
        while j < len(arg):
            char = arg[j]
            name = "-" + char
            opts.flags.add(name)
            if char in short_arg:
                rest = arg[j + 1 :]
                if not rest:
                    rest_arg: Arg = args[i] if i < n else None
                    i += 1
                else:
                    rest_arg = rest
                opts.values.setdefault(name, []).append(rest_arg)
                break
            if char in short_optional:
                opts.values.setdefault(name, []).append(arg[j + 1 :])
                break
            j += 1
    return opts


def join(directory: Arg, name: Arg) -> Arg:
    """``directory/name`` when both are literal."""
    if directory is None or name is None:
        return None
    return name if directory in ("", ".") else posixpath.join(directory, name)


def basename(path: Arg) -> Arg:
    """The last component of ``path`` (trailing slashes ignored), as ``cp`` uses it."""
    if path is None:
        return None
    return posixpath.basename(path.rstrip("/")) or path


def command_key(name: str) -> str:
    """The lookup key of a command word: basename, lower case, no ``.exe``.

    Lower case because PowerShell cmdlets and ``cmd`` builtins are case
    insensitive and so are the default file systems of macOS and Windows
    (``RM -rf x`` runs ``rm`` there); a false match only costs a snapshot.
    """
    key = name.replace("\\", "/").rsplit("/", 1)[-1].lower()
    return key.removesuffix(".exe")
