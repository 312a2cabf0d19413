"""PowerShell and ``cmd.exe`` rules of the destructive-command heuristic.

There is no PowerShell or batch grammar here: the text given to ``pwsh -c`` or
``cmd /c`` is cut into statements with a small tokenizer that knows quotes,
separators and redirections, and the first word of each statement is looked
up. Anything a statement does not clearly name is handed back to the POSIX
rules (``pwsh -c "git clean -fdx"``), so the two shells share one table.
"""

from __future__ import annotations

import base64
import binascii
import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from earshot.agent.shell.argv import Arg, Argv, Handler, Host

#: Cmdlets and aliases that delete, move or overwrite, whatever the arguments.
#: (``rm``, ``rmdir``, ``mv`` and ``cp`` are PowerShell aliases too, but are
#: real POSIX commands first and go through the POSIX rules.)
_PS_ALWAYS: dict[str, str] = {
    **dict.fromkeys(("remove-item", "ri", "del", "erase", "rd"), "Remove-Item deletes files"),
    **dict.fromkeys(("move-item", "mi", "move"), "Move-Item moves files"),
    **dict.fromkeys(("set-content", "sc"), "Set-Content overwrites files"),
    **dict.fromkeys(("clear-content", "clc"), "Clear-Content empties files"),
    **dict.fromkeys(("rename-item", "rni", "ren"), "Rename-Item renames files"),
    **dict.fromkeys(("copy-item", "cpi", "copy"), "Copy-Item can overwrite files"),
    "clear-item": "Clear-Item empties items",
    "remove-itemproperty": "Remove-ItemProperty deletes properties",
}
#: Short aliases that mean nothing special to a POSIX shell are only trusted
#: inside PowerShell text; a bare ``cli`` on Linux is likely something else.
_PS_ONLY = {"cli": "Clear-Item empties items"}
_CMD_BUILTINS: dict[str, str] = {
    **dict.fromkeys(("del", "erase"), "deletes files"),
    **dict.fromkeys(("rd", "rmdir"), "removes directories"),
    **dict.fromkeys(("move", "ren", "rename"), "moves files"),
    **dict.fromkeys(("copy", "xcopy", "robocopy"), "can overwrite files"),
    "format": "formats a volume",
}
_SAFE_TARGETS = ("$null", "nul", "nul:", "con", "con:")
_CMD_REDIRECT = re.compile(r'(\d?)(>>?)(&\d)?\s*("[^"]*"|[^\s>]*)')


def _is_param(word: Arg, name: str, shortest: int) -> bool:
    """PowerShell accepts any unambiguous prefix of a parameter name."""
    if word is None or not word.startswith("-") or len(word) - 1 < shortest:
        return False
    return name.startswith(word[1:].lower().rstrip(":"))


def powershell_cmdlet(host: Host, key: str, argv: Argv, *, in_powershell: bool = False) -> None:
    """Flag destructive cmdlets named by ``key`` (a lower-case command word)."""
    reason = _PS_ALWAYS.get(key) or (_PS_ONLY.get(key) if in_powershell else None)
    if reason is not None:
        host.flag(reason)
        return
    args = argv[1:]
    if key in ("out-file", "tee-object"):
        if not any(_is_param(a, "append", 2) for a in args):
            target = _named_or_positional(args, ("filepath", "literalpath", "path"))
            host.overwrite(key.title(), target)
    elif key in ("new-item", "ni") and any(_is_param(a, "force", 2) for a in args):
        host.flag("New-Item -Force overwrites files")
    elif key in ("invoke-expression", "iex"):
        text = args[0] if len(args) == 1 else None
        scan_powershell(host, text, "Invoke-Expression")


def _named_or_positional(args: Argv, names: tuple[str, ...]) -> Arg:
    """The value of the first named parameter in ``names``, else the first positional."""
    for i, arg in enumerate(args):
        if any(_is_param(arg, name, 1) for name in names):
            return args[i + 1] if i + 1 < len(args) else None
    for arg in args:
        if arg is None or not arg.startswith("-"):
            return arg
    return None


# --- PowerShell text -----------------------------------------------------------

_PS_SEPARATORS = "\n;{}()|"


def _ps_statements(text: str, subexpressions: list[str]) -> list[list[Arg]]:
    """Cut PowerShell source into statements of words (``None``: not literal).

    Redirections are kept as words (``>``, ``2>``, ``>>``) for the caller.
    The code of ``$(...)`` inside double quotes is appended to
    ``subexpressions`` so it can be scanned too.
    """
    statements: list[list[Arg]] = []
    words: list[Arg] = []
    word = ""
    literal = True
    in_word = False
    i = 0
    n = len(text)

    def end_word() -> None:
        nonlocal word, literal, in_word
        if in_word:
            # $null is the one variable a redirect target may safely be.
            words.append(word if literal or word.lower() == "$null" else None)
        word, literal, in_word = "", True, False

    def end_statement() -> None:
        end_word()
        if words:
            statements.append(list(words))
        words.clear()

    while i < n:
        char = text[i]
        if char in " \t\r":
            end_word()
        elif char == "#" and not in_word:
            while i < n and text[i] != "\n":
                i += 1
            continue
        elif char in _PS_SEPARATORS or text.startswith(("&&", "||"), i):
            end_statement()
            if text.startswith(("&&", "||"), i):
                i += 1
        elif char == "&" and not in_word:
            end_statement()
            words.append("&")  # call operator: what follows is invoked
        elif char == ">" or (char in "123456*" and text.startswith(">", i + 1) and not in_word):
            end_word()
            start = i
            while i < n and text[i] in "123456*>&":
                i += 1
            words.append(text[start:i])
            continue
        elif char == "'":
            end = i + 1
            while end < n and not (text[end] == "'" and not text.startswith("''", end)):
                end += 2 if text.startswith("''", end) else 1
            word += text[i + 1 : end].replace("''", "'")
            in_word = True
            i = end
        elif char == '"':
            end = i + 1
            while end < n and text[end] != '"':
                end += 2 if text[end] == "`" else 1
            body = text[i + 1 : end]
            for match in re.finditer(r"\$\(", body):
                subexpressions.append(body[match.end() :])
            word += body
            literal = literal and "$" not in body
            in_word = True
            i = end
        elif char == "`" and i + 1 < n:
            word += text[i + 1]
            in_word = True
            i += 1
        elif char == "$" and text.startswith("$(", i):
            end_statement()
        else:
            if char == "$":
                literal = False
            word += char
            in_word = True
        i += 1
    end_statement()
    return statements


def scan_powershell(host: Host, text: Arg, origin: str, depth: int = 0) -> None:
    """Classify PowerShell source, statement by statement."""
    if text is None:
        host.flag(f"{origin} runs PowerShell code that is not a literal")
        return
    if depth > 8:
        host.flag(f"{origin} nests too deeply to inspect")
        return
    subexpressions: list[str] = []
    for words in _ps_statements(text, subexpressions):
        _ps_statement(host, words, origin, depth)
    for code in subexpressions:
        scan_powershell(host, code, origin, depth + 1)


def _ps_statement(host: Host, words: list[Arg], origin: str, depth: int) -> None:
    command: list[Arg] = []
    i = 0
    while i < len(words):
        word = words[i]
        if word is not None and re.fullmatch(r"[1-6*]?>>?(&[1-6])?", word):
            target = words[i + 1] if i + 1 < len(words) and "&" not in word else ""
            i += 2 if target != "" else 1
            truncates = ">>" not in word and "&" not in word
            if truncates and (target is None or target.lower() not in _SAFE_TARGETS):
                host.overwrite(f"PowerShell redirect {word}", target)
            continue
        command.append(word)
        i += 1
    invoked = bool(command) and command[0] == "&"
    if invoked:
        command = command[1:]
    # "$x = Remove-Item a": the right-hand side is a command.
    if len(command) >= 2 and command[1] in ("=", "+=", "-="):
        command = command[2:]
    if not command:
        return
    name = command[0]
    if name is None:
        if invoked:
            host.flag(f"{origin} invokes a command that is not a literal")
        return  # a variable expression prints its value
    key = name.replace("\\", "/").rsplit("/", 1)[-1].lower().removesuffix(".exe")
    if (
        key in _PS_ALWAYS
        or key in _PS_ONLY
        or key in ("out-file", "tee-object", "new-item", "ni", "invoke-expression", "iex")
    ):
        powershell_cmdlet(host, key, command, in_powershell=True)
    elif key == ".":
        return  # dot-sourcing a script file: not read, like "source"
    else:
        host.run_argv(command, None)


def _powershell(host: Host, argv: Argv, stdin: str | None) -> None:
    """``pwsh``/``powershell`` command lines: find -Command or -EncodedCommand."""
    tool = argv[0] or "pwsh"
    windows_powershell = "powershell" in tool.lower()
    args = argv[1:]
    i = 0
    while i < len(args):
        arg = args[i]
        i += 1
        if arg is None:
            host.flag(f"{tool} has an argument that is not a literal")
            return
        if not arg.startswith(("-", "/")):
            if not windows_powershell and arg.lower().endswith(".ps1"):
                return  # pwsh's first positional is -File: a script we do not read
            text = None if None in args[i - 1 :] else " ".join(a for a in args[i - 1 :] if a)
            scan_powershell(host, text, tool)
            return
        name = arg[1:].lower()
        if name in ("c", "command") or (len(name) >= 3 and "command".startswith(name)):
            rest = args[i:]
            if rest == ["-"]:
                break  # commands from stdin
            text = None if None in rest else " ".join(a for a in rest if a)
            scan_powershell(host, text, f"{tool} -Command")
            return
        if name in ("e", "ec") or (len(name) >= 2 and "encodedcommand".startswith(name)):
            scan_powershell(host, _decode(args[i] if i < len(args) else None), f"{tool} -ec")
            return
        if name in ("f", "file") or (len(name) >= 2 and "file".startswith(name)):
            if i < len(args) and args[i] == "-":
                break
            return  # a script file: not read
        if name in ("v", "version", "help", "?", "h"):
            return
        if name in ("ex", "executionpolicy", "wd", "workingdirectory", "w", "windowstyle",
                    "configurationname", "outputformat", "of", "inputformat", "if",
                    "settingsfile", "custompipename", "psconsolefile"):  # fmt: skip
            i += 1
    if stdin is None:
        host.run_script(None, f"{tool} reading commands from stdin")
    else:
        scan_powershell(host, stdin, tool)


def _decode(encoded: Arg) -> Arg:
    """-EncodedCommand is base64 of UTF-16LE; undecodable means unknown."""
    if encoded is None:
        return None
    try:
        return base64.b64decode(encoded, validate=True).decode("utf-16-le")
    except (binascii.Error, UnicodeDecodeError, ValueError):
        return None


# --- cmd.exe -------------------------------------------------------------------


def scan_cmd(host: Host, text: Arg, origin: str) -> None:
    """Classify ``cmd /c`` text: statements split at ``&``, ``|``, parentheses."""
    if text is None:
        host.flag(f"{origin} runs a command that is not a literal")
        return
    statement: list[str] = []
    quoted = False
    statements: list[str] = []
    for char in text.replace("^&", "\0").replace("^|", "\1"):
        if char == '"':
            quoted = not quoted
        if not quoted and char in "&|()\n":
            statements.append("".join(statement))
            statement = []
        else:
            statement.append(char)
    statements.append("".join(statement))
    for raw in statements:
        _cmd_statement(host, raw.replace("\0", "&").replace("\1", "|"), origin)


def _cmd_statement(host: Host, text: str, origin: str) -> None:
    # Redirections first: "dir > out.txt", not "2>nul", ">>log", ">&2".
    for match in _CMD_REDIRECT.finditer(text):
        if match.group(2) == ">" and not match.group(3):
            target = match.group(4).strip('"')
            if target.lower() not in _SAFE_TARGETS:
                host.overwrite("cmd redirect >", target)
    bare = _CMD_REDIRECT.sub(" ", text)
    words = re.findall(r'"[^"]*"|[^\s"]+', bare)
    words = [w.strip('"') for w in words]
    while words and words[0].lower() in ("call", "start", "@"):
        words = words[1:]
    if not words:
        return
    name = words[0].lstrip("@")
    key = name.replace("\\", "/").rsplit("/", 1)[-1].lower().removesuffix(".exe")
    if key in _CMD_BUILTINS:
        host.flag(f"cmd {key} {_CMD_BUILTINS[key]}")
    else:
        host.run_argv([name, *words[1:]], None)


def _cmd(host: Host, argv: Argv, stdin: str | None) -> None:
    args = argv[1:]
    for i, arg in enumerate(args):
        if arg is None:
            host.flag("cmd has an argument that is not a literal")
            return
        # "//c" is how MSYS/Git Bash users keep /c from becoming a path.
        switch = arg.lower().lstrip("/")
        if arg.startswith("/") and switch in ("c", "k", "r"):
            rest = args[i + 1 :]
            scan_cmd(host, None if None in rest else " ".join(a for a in rest if a), "cmd /c")
            return
    if stdin is None:
        host.run_script(None, "cmd reading commands from stdin")
    else:
        scan_cmd(host, stdin, "cmd")


WINDOWS_HANDLERS: dict[str, Handler] = {
    "pwsh": _powershell,
    "powershell": _powershell,
    "pwsh-preview": _powershell,
    "cmd": _cmd,
}
