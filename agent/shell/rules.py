"""Per-command rules of the destructive-command heuristic: the dispatcher.

:func:`classify_argv` receives one simple command as an argument vector (see
:mod:`.argv`) and reports through a :class:`~.argv.Host`: rules
flag what is destructive, check write targets, and hand wrapped commands and
embedded scripts back to the host, which classifies them like the top level.
The rules live in :mod:`.wrappers`, :mod:`.interpreters`, :mod:`.files`,
:mod:`.packages` and :mod:`.windows`; the decisions they encode
are listed in :mod:`.destructive`.
"""

from __future__ import annotations

from earshot.agent.shell.argv import Argv, Handler, Host, command_key
from earshot.agent.shell.files import FILE_HANDLERS, always_destructive, deleted_operands
from earshot.agent.shell.interpreters import INTERPRETER_HANDLERS, python_handler
from earshot.agent.shell.packages import PACKAGE_HANDLERS, versioned_pip
from earshot.agent.shell.windows import WINDOWS_HANDLERS, powershell_cmdlet
from earshot.agent.shell.wrappers import WRAPPER_HANDLERS

_HANDLERS: dict[str, Handler] = {
    **WRAPPER_HANDLERS,
    **INTERPRETER_HANDLERS,
    **FILE_HANDLERS,
    **PACKAGE_HANDLERS,
    **WINDOWS_HANDLERS,
}


def classify_argv(host: Host, argv: Argv, stdin: str | None) -> None:
    """Classify one simple command whose first word is a literal."""
    name = argv[0]
    assert name is not None, "the host flags non-literal command words itself"
    key = command_key(name)
    reason = always_destructive(key)
    if reason is not None:
        host.flag(reason)
        for path in deleted_operands(key, argv):
            host.target(path)
        return
    handler = _HANDLERS.get(key) or versioned_pip(key) or python_handler(key)
    if handler is not None:
        handler(host, argv, stdin)
    else:
        powershell_cmdlet(host, key, argv)
