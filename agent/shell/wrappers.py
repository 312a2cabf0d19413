"""Wrappers for the destructive-command heuristic: the real command follows some options.

Wrappers (``sudo``, ``env``, ``xargs``, ``timeout``...) hand the command they
run back to the host, after their own options; a few (``parallel``, ``watch``,
``flock -c``, ``su -c``, ``npx -c``) hand back shell source to parse again.
Shells and interpreters are in :mod:`.interpreters`. See :mod:`.destructive`
for the decisions.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Collection

from earshot.agent.shell.argv import SAME_DIR, Arg, Argv, Handler, Host, getopt

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
}
