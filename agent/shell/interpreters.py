"""Shells and interpreters for the destructive-command heuristic.

Shells (``bash -c``, a shell reading a heredoc), ``eval``, ``trap`` and the
like hand shell source back to the host to parse again; ``cd``, ``pushd`` and
``popd`` move the directory relative paths resolve against; interpreters
(``python``, ``node``, ``perl``, ``awk``...) are only sniffed for obvious
deletions in inline code, and flagged when they edit files in place. See
:mod:`.destructive` for the decisions.
"""

from __future__ import annotations

import re

from earshot.agent.shell.argv import Arg, Argv, Handler, Host, command_key, getopt

_SHELLS = frozenset(
    {"sh", "bash", "rbash", "zsh", "dash", "ksh", "mksh", "pdksh", "ash", "yash", "posh",
     "fish", "csh", "tcsh"}
)  # fmt: skip


def _shell(host: Host, argv: Argv, stdin: str | None) -> None:
    """``bash -c STRING`` is parsed again; a script from stdin must be visible."""
    name = argv[0]
    command_mode = False
    stdin_mode = False
    i = 1
    while i < len(argv):
        arg = argv[i]
        if arg is None or arg[:1] not in ("-", "+") or arg in ("-", "+"):
            break
        i += 1
        if arg == "--":
            break
        if arg.startswith("--"):
            if arg in ("--rcfile", "--init-file"):
                i += 1
            elif arg.startswith("--init-command"):  # fish runs it before anything else
                if "=" in arg:
                    host.run_script(arg.partition("=")[2], f"{name} --init-command")
                else:
                    host.run_script(argv[i] if i < len(argv) else None, f"{name} --init-command")
                    i += 1
            elif arg == "--command" or arg.startswith("--command="):
                command_mode = True
                if "=" in arg:
                    host.run_script(arg.partition("=")[2], f"{name} --command")
                    return
            continue
        letters = arg[1:]
        if arg[0] == "-" and "c" in letters:
            command_mode = True
        if name == "fish" and arg[0] == "-" and "C" in letters:
            host.run_script(argv[i] if i < len(argv) else None, "fish -C")
            i += 1
        if arg[0] == "-" and "s" in letters:
            stdin_mode = True
        # -o/-O (and +o/+O) take an option name as the next word.
        i += letters.count("o") + letters.count("O")
    operands = argv[i:]
    if command_mode:
        if operands:
            host.run_script(operands[0], f"{name} -c")
    elif stdin_mode or not operands:
        host.run_script(stdin, f"{name} reading stdin")
    # else: "bash script.sh" runs a file we do not read, like "python x.py".


# Obvious deletions or overwrites in one-line interpreter code. This is a
# courtesy, not a parse: code is covered by the watcher and the restage.
_CODE_WRITES = re.compile(
    r"rmtree|\bos\.(remove|unlink|rmdir|removedirs|rename|replace|truncate)\b"
    r"|\.(unlink|rmdir|write_text|write_bytes)\(|shutil\.move"
    r"|\bopen\([^)]*,\s*(mode\s*=\s*)?[rbt]*['\"][rbt]*[wx+]"
    r"|\bfs\.(rm|rmdir|unlink|writeFile|truncate|rename|copyFile)(Sync)?\b"
    r"|\.(rm|rmdir|unlink|writeFile|truncate|rename|copyFile)Sync\("
    r"|\bunlink\b|FileUtils\.(rm|mv|remove)|File\.(delete|write)",
)


def _check_code(host: Host, tool: str, code: Arg) -> None:
    if code is not None and _CODE_WRITES.search(code):
        host.flag(f"{tool} code deletes or overwrites files")


def _python(host: Host, argv: Argv, stdin: str | None) -> None:
    # Options end at -c CODE, -m MODULE or the script: what follows is theirs.
    tool = command_key(argv[0] or "python")
    i = 1
    while i < len(argv):
        arg = argv[i]
        i += 1
        if arg == "--":
            arg = argv[i] if i < len(argv) else "-"
        if arg is None or not arg.startswith("-") or arg == "-":
            if arg == "-":
                _check_code(host, tool, stdin)
            return  # else a script file, which is not read
        for j in range(1, len(arg)):
            char = arg[j]
            if char in "cmWXQ":
                value: Arg = arg[j + 1 :] or (argv[i] if i < len(argv) else None)
                if not arg[j + 1 :]:
                    i += 1
                if char == "c":
                    _check_code(host, f"{tool} -c", value)
                    return
                if char == "m":
                    _python_module(host, value, argv[i:], stdin)
                    return
                break
    _check_code(host, tool, stdin)  # no script: the code comes from stdin


def _python_module(host: Host, module: Arg, args: Argv, stdin: str | None) -> None:
    if module in ("pip", "black", "isort", "autopep8", "autoflake", "yapf"):
        host.run_argv([module, *args], stdin)
    elif module == "venv" and "--clear" in args:
        host.flag("python -m venv --clear deletes the environment")


def _node(host: Host, argv: Argv, stdin: str | None) -> None:
    opts = getopt(argv[1:], "epr", {"--eval", "--print", "--require"}, stop=True)
    tool = command_key(argv[0] or "node")
    for name in ("-e", "--eval", "-p", "--print"):
        for code in opts.values.get(name, ()):
            _check_code(host, f"{tool} -e", code)


def _perl_like(host: Host, argv: Argv, stdin: str | None) -> None:
    """``perl -i``/``-pi``/``ruby -i`` edit files in place; ``-e`` code is only sniffed."""
    tool = command_key(argv[0] or "perl")
    i = 1
    while i < len(argv):
        arg = argv[i]
        i += 1
        if arg is None or not arg.startswith("-") or arg in ("-", "--"):
            break
        for j in range(1, len(arg)):
            char = arg[j]
            if char == "i":
                host.flag(f"{tool} -i edits files in place")
                return
            if char in "eE":
                code: Arg = arg[j + 1 :] or (argv[i] if i < len(argv) else None)
                if not arg[j + 1 :]:
                    i += 1
                _check_code(host, f"{tool} -e", code)
                break
            if char in "IMmxCdDVFKWrl0":
                if not arg[j + 1 :] and char in "Ir":
                    i += 1  # "-I dir", "ruby -r lib"
                break


def _awk(host: Host, argv: Argv, stdin: str | None) -> None:
    opts = getopt(argv[1:], "fvFiEel", {"--include", "--file", "--assign", "--field-separator"})
    for name in ("-i", "--include"):
        if any(v is None or v.startswith("inplace") for v in opts.values.get(name, ())):
            host.flag(f"{argv[0]} -i inplace edits files in place")
            return


def _eval(host: Host, argv: Argv, stdin: str | None) -> None:
    words = argv[1:]
    script = None if None in words else " ".join(w for w in words if w is not None)
    host.run_script(script, "eval", same_shell=True)


def _trap(host: Host, argv: Argv, stdin: str | None) -> None:
    words = [w for w in argv[1:] if w != "--"]
    if len(words) >= 2 and words[0] not in ("-", "-p", "-l", ""):
        host.run_script(words[0], "trap handler")


def _cd(host: Host, argv: Argv, stdin: str | None) -> None:
    opts = getopt(argv[1:])
    target = opts.operands[0] if opts.operands else None  # bare "cd" goes home
    if target is not None and (target == "-" or re.fullmatch(r"[+-]\d+", target)):
        target = None  # back to $OLDPWD, or a pushd stack rotation
    host.chdir(target)


def _popd(host: Host, argv: Argv, stdin: str | None) -> None:
    host.chdir(None)


INTERPRETER_HANDLERS: dict[str, Handler] = {
    "eval": _eval,
    "trap": _trap,
    "cd": _cd,
    "pushd": _cd,
    "popd": _popd,
    "node": _node,
    "nodejs": _node,
    "perl": _perl_like,
    "ruby": _perl_like,
    "awk": _awk,
    "gawk": _awk,
    **dict.fromkeys(_SHELLS, _shell),
}

_PYTHON = re.compile(r"(python|pypy)[0-9.]*")


def python_handler(key: str) -> Handler | None:
    """The handler for ``python3.12`` and friends, by pattern."""
    return _python if _PYTHON.fullmatch(key) else None
