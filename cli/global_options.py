"""Options every command takes, written before the command as git allows.

``earshot --json log`` and ``earshot --root ../proj undo`` mean what
``earshot log --json`` and ``earshot undo --root ../proj`` mean: the options
in ``MOVABLE`` found between ``earshot`` and the command's name are moved
to just after the name, where the command's own parser reads them. The
options of ``earshot`` itself (``--version``, ``--help``, the chat's
``--continue``, ``--resume ID``, ``--model``) stay where they are.

``--no-pager`` is taken out of the line when it comes before the command
(as git takes it) and, for the paged commands alone (``diff``, ``log``,
``tree``, ``transcript``: none takes free text), anywhere before ``--``; ``earshot.cli.pager``
reads it. Elsewhere it is left alone: ``earshot edit f --old x --new
--no-pager`` means that text.

Standard library only: the thin client (``earshot.cli.entry``) runs this
before it knows whether a daemon serves the call.
"""

from __future__ import annotations

#: Flags that take no value.
_FLAGS = frozenset({"--json", "-v", "-vv", "-vvv", "--verbose"})
#: Options that take one value (``--root X`` or ``--root=X``).
_VALUED = frozenset({"--root", "--session"})
#: Options of ``earshot`` alone, with whether each takes a value.
_OWN = {"--version": False, "-h": False, "--help": False, "--continue": False}
_OWN_VALUED = frozenset({"--resume", "--model"})

NO_PAGER = "--no-pager"


#: Commands that are groups of commands (``earshot remote add``): the moved
#: options go after the group's command.
GROUPS = frozenset({"remote"})

#: The commands whose output is paged (``earshot.cli.pager``).
PAGED = frozenset({"diff", "log", "tree", "transcript"})


def parsed(argv: list[str]) -> tuple[list[str], bool]:
    """``argv`` (without the program name) as the command's parser wants it, and
    whether ``--no-pager`` was given."""
    argv, no_pager = _leading_no_pager(argv)
    argv = hoisted(argv)
    if argv and argv[0] in PAGED:
        end = argv.index("--") if "--" in argv else len(argv)
        kept = [a for a in argv[:end] if a != NO_PAGER]
        no_pager = no_pager or len(kept) != end
        argv = [*kept, *argv[end:]]
    return argv, no_pager


def _leading_no_pager(argv: list[str]) -> tuple[list[str], bool]:
    """``--no-pager`` among the options before the command, taken out."""
    i = 0
    while i < len(argv) and argv[i].startswith("-") and argv[i] != "--":
        if argv[i] == NO_PAGER:
            return [*argv[:i], *argv[i + 1 :]], True
        valued = argv[i] in _VALUED or argv[i] in _OWN_VALUED
        i += 2 if valued else 1
    return argv, False


def without_command(argv: list[str]) -> str | None:
    """The command options written with no command after them (``earshot --json``),
    named for a usage error; None when a command follows, or none was given."""
    given = []
    i = 0
    while i < len(argv) and argv[i] != "--":
        arg = argv[i]
        name = arg.partition("=")[0]
        if arg in _FLAGS:
            given.append(arg)
        elif name in _VALUED:
            given.append(name)
            i += 0 if "=" in arg else 1
        elif arg in _OWN or name in _OWN_VALUED:
            i += 1 if name in _OWN_VALUED and "=" not in arg else 0
        else:
            return None
        i += 1
    return ", ".join(given) or None


def hoisted(argv: list[str]) -> list[str]:
    """``argv`` (without the program name) with leading command options moved after the command.

    A line with no command after the options is returned as given, so
    click says what is wrong with it.
    """
    own: list[str] = []
    moved: list[str] = []
    i = 0
    while i < len(argv):
        arg = argv[i]
        name = arg.partition("=")[0]
        if arg in _FLAGS:
            moved.append(arg)
        elif name in _VALUED:
            if "=" in arg:
                moved.append(arg)
            elif i + 1 < len(argv):
                moved += argv[i : i + 2]
                i += 1
            else:
                return argv
        elif arg in _OWN:
            own.append(arg)
        elif name in _OWN_VALUED:
            if "=" in arg or i + 1 >= len(argv):
                own.append(arg)
            else:
                own += argv[i : i + 2]
                i += 1
        else:
            break
        i += 1
    if i >= len(argv) or argv[i].startswith("-") or not moved:
        return argv
    if argv[i] in GROUPS and i + 1 < len(argv) and not argv[i + 1].startswith("-"):
        # A group's options are its commands': after the command's name.
        return [*own, argv[i], argv[i + 1], *moved, *argv[i + 2 :]]
    return [*own, argv[i], *moved, *argv[i + 1 :]]
