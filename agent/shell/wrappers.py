"""Wrappers, shells and interpreters for the destructive-command heuristic.

Wrappers (``sudo``, ``env``, ``xargs``, ``timeout``...) hand the command they
run back to the host; shells (``bash -c``), ``eval``, ``trap`` and the like
hand back shell source to parse again; interpreters are only sniffed for
obvious deletions in inline code. See :mod:`.destructive` for the decisions.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Collection

from earshot.agent.shell.argv import SAME_DIR, Arg, Argv, Handler, Host, command_key, getopt

# --- wrappers: the real command follows some options -------------------------


def _run_rest(host: Host, rest: Argv, stdin: str | None, chdir: Arg = SAME_DIR) -> None:
    """Classify ``rest`` as a command after skipping ``NAME=value`` words."""
    i = 0
    while i < len(rest):
        word = rest[i]
        if word is None or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", word, re.S):
            break
        i += 1
    if i < len(rest):
        host.run_argv(rest[i:], stdin, chdir)


def _wrapper(
    short_arg: str = "",
    long_arg: Collection[str] = (),
    *,
    no_command: Collection[str] = (),
    shell_flags: Collection[str] = (),
) -> Handler:
    """A handler for ``wrapper [options] command...``.

    ``no_command`` options mean the remaining words are not a command
    (``command -v rm``, ``ionice -p PID``); ``shell_flags`` start a login shell
    reading stdin when no command follows (``sudo -s``).
    """

    def handle(host: Host, argv: Argv, stdin: str | None) -> None:
        opts = getopt(argv[1:], short_arg, long_arg, stop=True)
        if opts.has(*no_command):
            return
        if opts.operands:
            _run_rest(host, opts.operands, stdin)
        elif opts.has(*shell_flags):
            host.run_script(stdin, f"{argv[0]} shell reading stdin")

    return handle


def _sudo(host: Host, argv: Argv, stdin: str | None) -> None:
    opts = getopt(
        argv[1:],
        "CDghpRrTtUu",
        {"--user", "--group", "--prompt", "--close-from", "--chdir", "--host", "--role",
         "--type", "--other-user", "--command-timeout", "--chroot"},
        stop=True,
    )  # fmt: skip
    if opts.has("-e", "--edit"):
        host.flag("sudo -e edits files")
        return
    if opts.has("-l", "--list", "-v", "--validate", "-K", "--remove-timestamp", "-V"):
        return  # no command runs ("sudo -k cmd" does run cmd)
    present, directory = opts.last("-D", "--chdir")
    if opts.operands:
        _run_rest(host, opts.operands, stdin, directory if present else SAME_DIR)
    elif opts.has("-s", "--shell", "-i", "--login"):
        host.run_script(stdin, "sudo shell reading stdin")


def _env(host: Host, argv: Argv, stdin: str | None) -> None:
    opts = getopt(argv[1:], "uCS", {"--unset", "--chdir", "--split-string"}, stop=True)
    rest: list[Arg] = list(opts.operands)
    present, split = opts.last("-S", "--split-string")
    if present:
        # env -S 'rm -rf x' splits its argument into words (shebang lines).
        try:
            words: list[Arg] = list(shlex.split(split)) if split is not None else [None]
        except ValueError:
            words = [None]
        rest = words + rest
    if rest and rest[0] == "-":  # "env -" is "env -i"
        rest = rest[1:]
    has_dir, directory = opts.last("-C", "--chdir")
    _run_rest(host, rest, stdin, directory if has_dir else SAME_DIR)


def _xargs(host: Host, argv: Argv, stdin: str | None) -> None:
    opts = getopt(
        argv[1:],
        "adEILnPs",
        {"--arg-file", "--delimiter", "--max-args", "--max-procs", "--max-chars",
         "--process-slot-var"},
        short_optional="iel",
        stop=True,
    )  # fmt: skip
    command = list(opts.operands) or ["echo"]
    replace: Arg = ""
    if opts.has("-I"):
        replace = opts.last("-I")[1]
    elif opts.has("-i"):
        replace = opts.last("-i")[1] or "{}"
    elif opts.has("--replace"):
        replace = opts.last("--replace")[1] or "{}"
    # The words xargs reads from stdin are unknown: they replace the
    # placeholder, or are appended as extra arguments.
    if replace is None:
        command = [None if i else word for i, word in enumerate(command)]
    elif replace:
        command = [None if word is None or replace in word else word for word in command]
    else:
        command.append(None)
    host.run_argv(command, None)


def _parallel(host: Host, argv: Argv, stdin: str | None) -> None:
    opts = getopt(
        argv[1:],
        "jSIEaL",
        {"--jobs", "--sshlogin", "--arg-file", "--colsep", "--delay", "--timeout",
         "--joblog", "--results", "--tmpdir", "--workdir", "--wd", "--max-args",
         "--basefile", "--env"},
        stop=True,
    )  # fmt: skip
    words: list[Arg] = []
    for word in opts.operands:
        if word in (":::", "::::", ":::+", "::::+"):
            break
        words.append(word)
    if not words:
        host.run_script(None, "parallel reading commands from stdin")
        return
    # GNU parallel hands the joined command to a shell.
    script = None if None in words else " ".join(w for w in words if w is not None)
    host.run_script(script, "parallel")


def _timeout(host: Host, argv: Argv, stdin: str | None) -> None:
    opts = getopt(argv[1:], "sk", {"--signal", "--kill-after"}, stop=True)
    _run_rest(host, opts.operands[1:], stdin)  # the first operand is the duration


def _nice(host: Host, argv: Argv, stdin: str | None) -> None:
    args = list(argv[1:])
    if args and args[0] is not None and re.fullmatch(r"-\d+", args[0]):
        args = args[1:]  # old-style "nice -5 cmd"
    opts = getopt(args, "n", {"--adjustment"}, stop=True)
    _run_rest(host, opts.operands, stdin)


def _time(host: Host, argv: Argv, stdin: str | None) -> None:
    opts = getopt(argv[1:], "fo", {"--format", "--output"}, stop=True)
    present, output = opts.last("-o", "--output")
    if present and not opts.has("-a", "--append"):
        host.overwrite("time -o", output)
    _run_rest(host, opts.operands, stdin)


def _watch(host: Host, argv: Argv, stdin: str | None) -> None:
    opts = getopt(argv[1:], "nq", {"--interval", "--equexit"}, stop=True)
    words = opts.operands
    if not words:
        return
    if opts.has("-x", "--exec"):
        host.run_argv(words, None)
        return
    # Without -x, watch passes its joined arguments to "sh -c".
    host.run_script(None if None in words else " ".join(w for w in words if w), "watch")


def _flock(host: Host, argv: Argv, stdin: str | None) -> None:
    opts = getopt(argv[1:], "wEc", {"--timeout", "--conflict-exit-code", "--command"}, stop=True)
    present, script = opts.last("-c", "--command")
    rest = opts.operands[1:]  # after the lock file
    if not present and rest and rest[0] in ("-c", "--command"):
        present, script = True, rest[1] if len(rest) > 1 else None
    if present:
        host.run_script(script, "flock -c")
    elif rest:
        host.run_argv(rest, stdin)


def _su(host: Host, argv: Argv, stdin: str | None) -> None:
    opts = getopt(
        argv[1:],
        "cgGsw",
        {"--command", "--group", "--supp-group", "--shell", "--whitelist-environment",
         "--session-command"},
    )  # fmt: skip
    present, script = opts.last("-c", "--command", "--session-command")
    if present:
        host.run_script(script, "su -c")
    else:
        host.run_script(stdin, "su shell reading stdin")


def _npx(host: Host, argv: Argv, stdin: str | None) -> None:
    opts = getopt(argv[1:], "pc", {"--package", "--call"}, stop=True)
    present, script = opts.last("-c", "--call")
    if present:
        host.run_script(script, f"{argv[0]} -c")
    else:
        host.run_argv(opts.operands, stdin)


# --- shells and interpreters ---------------------------------------------------

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


WRAPPER_HANDLERS: dict[str, Handler] = {
    "sudo": _sudo,
    "doas": _wrapper("uC", shell_flags=("-s",)),
    "env": _env,
    "xargs": _xargs,
    "parallel": _parallel,
    "command": _wrapper(no_command=("-v", "-V")),
    "builtin": _wrapper(),
    "exec": _wrapper("a"),
    "nice": _nice,
    "ionice": _wrapper("cnpPu", no_command=("-p", "-P", "-u")),
    "nohup": _wrapper(),
    "timeout": _timeout,
    "time": _time,
    "stdbuf": _wrapper("ioe", ("--input", "--output", "--error")),
    "chronic": _wrapper(),
    "setsid": _wrapper(),
    "unbuffer": _wrapper(),
    "nocache": _wrapper(),
    "coproc": _wrapper(),
    "busybox": _wrapper(),
    "watch": _watch,
    "flock": _flock,
    "su": _su,
    "runuser": _su,
    "npx": _npx,
    "pnpx": _npx,
    "bunx": _npx,
    "uvx": _npx,
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
