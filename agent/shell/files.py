"""File tools for the destructive-command heuristic: deleters, in-place
editors, copiers (checked against existing paths), archivers, build ``clean``
targets and formatters. See :mod:`.destructive` for the decisions.
"""

from __future__ import annotations

import re
from collections.abc import Collection

from earshot.agent.shell.argv import Arg, Argv, Handler, Host, basename, command_key, getopt, join

# --- commands that are destructive whatever their arguments -----------------

_ALWAYS: dict[str, str] = {
    "rm": "rm deletes files",
    "unlink": "unlink deletes a file",
    "rmdir": "rmdir removes directories",
    "shred": "shred destroys file contents",
    "truncate": "truncate cuts files short",
    "wipefs": "wipefs erases filesystem signatures",
    "mke2fs": "mke2fs formats a filesystem",
    "mkswap": "mkswap formats a device",
    "rimraf": "rimraf deletes files",
    "trash": "trash deletes files",
    "trash-put": "trash-put deletes files",
    "srm": "srm deletes files",
    # Permission bits are part of a snapshot's tree entries and a changed
    # owner can make files unreadable to the scanner; the old values exist
    # nowhere else, so every change (not only -R) gets a snapshot first.
    "chmod": "chmod changes permissions",
    "chown": "chown changes ownership",
    "chgrp": "chgrp changes group ownership",
}


#: Commands that delete (or cut short) their operands, and the short options of
#: each that take a value (the rest are flags).
_DELETERS: dict[str, str] = {
    "rm": "",
    "unlink": "",
    "rmdir": "",
    "shred": "ns",
    "truncate": "sr",
    "rimraf": "",
    "trash": "",
    "trash-put": "",
    "srm": "",
}


def deleted_operands(key: str, argv: Argv) -> list[Arg]:
    """The paths a deleting command names (``rm -rf a b`` -> a, b); [] for other commands."""
    short_arg = _DELETERS.get(key)
    if short_arg is None:
        return []
    return getopt(
        argv[1:], short_arg, {"--size", "--reference", "--iterations", "--random-source"}
    ).operands


# --- editing and copying tools ---------------------------------------------------


def _sed(host: Host, argv: Argv, stdin: str | None) -> None:
    opts = getopt(argv[1:], "efl", {"--expression", "--file", "--line-length"}, short_optional="i")
    if opts.has("-i", "--in-place"):
        host.flag("sed -i edits files in place")


def _copy_like(
    tool: str,
    short_arg: str,
    long_arg: Collection[str],
    *,
    safe_flags: Collection[str] = (),
    require: Collection[str] = (),
) -> Handler:
    """``cp``/``mv``/``install``/``ln``: flag only a destination that may exist.

    ``cp a dir/`` (or ``.``, or ``-t dir``) writes ``dir/a``; any other last
    operand is checked as written, even when it is a directory, because we
    cannot tell a directory from a file there (err broad).
    """

    def handle(host: Host, argv: Argv, stdin: str | None) -> None:
        opts = getopt(argv[1:], short_arg, long_arg)
        if opts.has(*safe_flags) or opts.last("--update")[1] in ("none", "none-fail"):
            return
        if require and not opts.has(*require):
            return
        operands = opts.operands
        has_dir, directory = opts.last("-t", "--target-directory")
        if has_dir:
            for source in operands:
                host.overwrite(tool, join(directory, basename(source)))
            return
        if len(operands) == 1 and tool == "ln":
            host.overwrite(tool, basename(operands[0]))  # links into "."
            return
        if len(operands) < 2:
            return
        *sources, dest = operands
        into_dir = dest is not None and (dest.endswith("/") or dest in (".", ".."))
        if into_dir and not opts.has("-T", "--no-target-directory"):
            for source in sources:
                host.overwrite(tool, join(dest, basename(source)))
        else:
            host.overwrite(tool, dest)

    return handle


def _tee(host: Host, argv: Argv, stdin: str | None) -> None:
    opts = getopt(argv[1:])
    if opts.has("-a", "--append"):
        return  # appending loses nothing, like >>
    for path in opts.operands:
        host.overwrite("tee", path)


def _sponge(host: Host, argv: Argv, stdin: str | None) -> None:
    opts = getopt(argv[1:])
    if opts.operands and not opts.has("-a"):
        host.overwrite("sponge", opts.operands[0])


def _sort(host: Host, argv: Argv, stdin: str | None) -> None:
    opts = getopt(argv[1:], "koStT", {"--output", "--key", "--buffer-size",
                                      "--field-separator", "--temporary-directory"})  # fmt: skip
    present, output = opts.last("-o", "--output")
    if present:
        host.overwrite("sort -o", output)


def _dd(host: Host, argv: Argv, stdin: str | None) -> None:
    for arg in argv[1:]:
        if arg is None:
            host.flag("dd has an operand that is not a literal")
        elif arg.startswith("of="):
            host.overwrite("dd", arg[3:])


def _find(host: Host, argv: Argv, stdin: str | None) -> None:
    args = argv[1:]
    i = 0
    while i < len(args):
        arg = args[i]
        i += 1
        if arg == "-delete":
            host.flag("find -delete deletes files")
            for start in _find_starts(args):
                host.target(start)
        elif arg in ("-fprint", "-fprint0", "-fprintf", "-fls"):
            host.overwrite(f"find {arg}", args[i] if i < len(args) else None)
        elif arg in ("-exec", "-execdir", "-ok", "-okdir"):
            command: list[Arg] = []
            while i < len(args) and args[i] != ";":
                word = args[i]
                i += 1
                if word == "+" and command and command[-1] is None:
                    break
                # {} becomes each found path: unknown.
                command.append(None if word is None or "{}" in word else word)
            i += 1
            host.run_argv(command, None)


def _find_starts(args: Argv) -> list[Arg]:
    """The start points of ``find`` (the operands before its expression), "." by default."""
    starts: list[Arg] = []
    for arg in args:
        if arg is not None and (arg.startswith("-") or arg in ("(", "!", ",")):
            break
        starts.append(arg)
    return starts or ["."]


_RSYNC_ARG = frozenset(
    {"--exclude", "--include", "--filter", "--rsh", "--rsync-path", "--partial-dir",
     "--backup-dir", "--suffix", "--chmod", "--chown", "--exclude-from", "--include-from",
     "--files-from", "--log-file", "--password-file", "--port", "--timeout", "--bwlimit",
     "--compare-dest", "--copy-dest", "--link-dest", "--temp-dir", "--max-size", "--min-size",
     "--modify-window", "--out-format", "--info", "--debug", "--iconv", "--usermap",
     "--groupmap", "--max-delete", "--compress-level", "--skip-compress", "--protocol"}
)  # fmt: skip


def _is_remote(path: Arg) -> bool:
    """``host:path`` or ``rsync://``: not the user's working tree."""
    if path is None:
        return False
    head = path.split("/", 1)[0]
    return "://" in path or (":" in head and not re.match(r"^[A-Za-z]:$", head))


def _rsync(host: Host, argv: Argv, stdin: str | None) -> None:
    opts = getopt(argv[1:], "efTBM", _RSYNC_ARG)
    if opts.has("-n", "--dry-run", "--list-only"):
        return
    for name in opts.flags:
        if name.startswith("--delete") or name in ("--remove-source-files", "--del"):
            host.flag(f"rsync {name} deletes files")
            return
    if len(opts.operands) >= 2 and not _is_remote(opts.operands[-1]):
        host.overwrite("rsync", opts.operands[-1])


def _scp(host: Host, argv: Argv, stdin: str | None) -> None:
    opts = getopt(argv[1:], "cFiJlLoPSDX")
    if len(opts.operands) < 2 or _is_remote(opts.operands[-1]):
        return
    *sources, dest = opts.operands
    if dest is not None and (dest.endswith("/") or dest in (".", "..")):
        for source in sources:
            local = source.split(":", 1)[-1] if _is_remote(source) and source else source
            host.overwrite("scp", join(dest, basename(local)))
    else:
        host.overwrite("scp", dest)


def _curl(host: Host, argv: Argv, stdin: str | None) -> None:
    opts = getopt(
        argv[1:],
        "AbcCdDeEFHKmorQTuUwxXYyz",
        {"--output", "--dump-header", "--cookie-jar", "--data", "--header", "--request",
         "--user", "--user-agent", "--referer", "--cookie", "--form", "--config", "--max-time",
         "--range", "--upload-file", "--write-out", "--proxy", "--output-dir"},
    )  # fmt: skip
    directory = opts.last("--output-dir")[1] if opts.has("--output-dir") else ""
    for name in ("-o", "--output", "-D", "--dump-header", "-c", "--cookie-jar"):
        for path in opts.values.get(name, ()):
            host.overwrite("curl", join(directory, path))
    if opts.has("-O", "--remote-name", "--remote-name-all"):
        # The file is named after the last component of the URL's path.
        for url in opts.operands:
            remote = None if url is None else basename(url.split("?", 1)[0])
            host.overwrite("curl -O", join(directory, remote))


def _wget(host: Host, argv: Argv, stdin: str | None) -> None:
    opts = getopt(argv[1:], "ABDIOPQRTUXYaeilotw", {"--output-document", "--output-file"})
    for name in ("-O", "--output-document", "-o", "--output-file"):
        for path in opts.values.get(name, ()):
            host.overwrite(f"wget {name}", path)


def _tar(host: Host, argv: Argv, stdin: str | None) -> None:
    args = list(argv[1:])
    if args and args[0] is not None and not args[0].startswith("-"):
        # Old style "tar xzf a.tgz": the first word is a bundle of letters.
        letters = args[0]
        args = ["-" + letters, *args[1:]] if "f" not in letters else [
            "-" + letters.replace("f", ""), "-f", *args[1:]
        ]  # fmt: skip
    opts = getopt(args, "fCTXbHKLNVg", {"--file", "--directory", "--files-from", "--exclude"})
    if opts.has("--delete"):
        host.flag("tar --delete rewrites the archive")
    if opts.has("-x", "--extract", "--get"):
        if not opts.has("-O", "--to-stdout", "-k", "--keep-old-files", "--skip-old-files"):
            host.flag("tar -x overwrites files")
    elif opts.has("-c", "--create"):
        present, archive = opts.last("-f", "--file")
        if present:
            host.overwrite("tar -c", archive)


def _unzip(host: Host, argv: Argv, stdin: str | None) -> None:
    opts = getopt(argv[1:], "dx")
    if not opts.has("-l", "-t", "-v", "-Z", "-p", "-n", "-z"):
        host.flag("unzip overwrites files")


def _compressor(keeps_input: bool) -> Handler:
    """gzip and friends replace their input files (unless -c/-k/...)."""

    def handle(host: Host, argv: Argv, stdin: str | None) -> None:
        opts = getopt(argv[1:], "S", {"--suffix"})
        tool = argv[0]
        if opts.has("--rm"):
            host.flag(f"{tool} --rm deletes its input files")
        elif keeps_input or not opts.operands or opts.operands == ["-"]:
            if opts.has("-f", "--force") and opts.operands and not opts.has("-c", "--stdout"):
                host.flag(f"{tool} -f overwrites existing files")
        elif not opts.has("-c", "--stdout", "--to-stdout", "-k", "--keep", "-l", "--list",
                          "-t", "--test"):  # fmt: skip
            host.flag(f"{tool} replaces its input files")

    return handle


def _sevenzip(host: Host, argv: Argv, stdin: str | None) -> None:
    if len(argv) > 1 and argv[1] in ("x", "e", "d", "rn"):
        host.flag(f"7z {argv[1]} overwrites or deletes files")


def _patch(host: Host, argv: Argv, stdin: str | None) -> None:
    if not any(a in ("--dry-run", "--check", "-C", "--help", "--version") for a in argv[1:]):
        host.flag("patch modifies files")


def _rename(host: Host, argv: Argv, stdin: str | None) -> None:
    if not any(a in ("-n", "--no-act", "--nono", "--dry-run", "--just-print") for a in argv[1:]):
        host.flag(f"{argv[0]} renames files")


# --- build tools: "clean" targets --------------------------------------------------


def _clean_targets(short_arg: str, long_arg: Collection[str] = ()) -> Handler:
    """``make clean`` (and distclean, mrproper...) delete build outputs.

    Outputs are usually regenerable, but not always (generated files checked
    in, hand-edited build trees), and a snapshot is cheap.
    """

    def handle(host: Host, argv: Argv, stdin: str | None) -> None:
        opts = getopt(argv[1:], short_arg, long_arg)
        for target in opts.operands:
            if target is None:
                continue
            if "clean" in target or target in ("mrproper", "clobber"):
                host.flag(f"{argv[0]} {target} deletes build outputs")
                return

    return handle


# --- formatters: rewrite source files in place -----------------------------------

#: tool -> options that make it write (absent: it writes unless told to check).
_WRITE_IF: dict[str, frozenset[str]] = {
    "autopep8": frozenset({"-i", "--in-place"}),
    "autoflake": frozenset({"-i", "--in-place"}),
    "yapf": frozenset({"-i", "--in-place"}),
    "gofmt": frozenset({"-w"}),
    "goimports": frozenset({"-w"}),
    "prettier": frozenset({"-w", "--write"}),
    "eslint": frozenset({"--fix"}),
    "stylelint": frozenset({"--fix"}),
    "clang-format": frozenset({"-i"}),
    "shfmt": frozenset({"-w", "--write"}),
}
_WRITE_UNLESS: dict[str, frozenset[str]] = {
    "black": frozenset({"--check", "--diff", "--version", "--help"}),
    "isort": frozenset({"--check", "--check-only", "-c", "--diff", "--version", "--help"}),
    "rustfmt": frozenset({"--check", "--version", "--help"}),
}


def _formatter(host: Host, argv: Argv, stdin: str | None) -> None:
    tool = command_key(argv[0] or "")
    words = {w for w in argv[1:] if w is not None}
    # Single-letter flags may be bundled ("gofmt -lw").
    letters = {"-" + c for w in words if re.fullmatch(r"-[A-Za-z]+", w) for c in w[1:]}
    if tool in _WRITE_IF:
        if (words | letters) & _WRITE_IF[tool]:
            host.flag(f"{tool} rewrites files in place")
    elif not words & _WRITE_UNLESS[tool] and getopt(argv[1:]).operands:
        host.flag(f"{tool} rewrites files in place")


def _ruff(host: Host, argv: Argv, stdin: str | None) -> None:
    words = set(argv[1:])
    if "format" in words and not words & {"--check", "--diff"}:
        host.flag("ruff format rewrites files in place")
    elif "--fix" in words or "--unsafe-fixes" in words:
        host.flag("ruff --fix rewrites files in place")


FILE_HANDLERS: dict[str, Handler] = {
    "sed": _sed,
    "gsed": _sed,
    "cp": _copy_like("cp", "St", ("--target-directory", "--suffix"),
                     safe_flags=("-n", "--no-clobber")),
    "mv": _copy_like("mv", "St", ("--target-directory", "--suffix"),
                     safe_flags=("-n", "--no-clobber")),
    "install": _copy_like("install", "gmoSt", ("--target-directory", "--suffix", "--mode",
                                               "--owner", "--group"),
                          safe_flags=("-d", "--directory")),
    "ln": _copy_like("ln", "St", ("--target-directory", "--suffix"),
                     require=("-f", "--force")),
    "tee": _tee,
    "sponge": _sponge,
    "sort": _sort,
    "dd": _dd,
    "find": _find,
    "rsync": _rsync,
    "scp": _scp,
    "curl": _curl,
    "wget": _wget,
    "tar": _tar,
    "bsdtar": _tar,
    "unzip": _unzip,
    **dict.fromkeys(("gzip", "gunzip", "bzip2", "bunzip2", "xz", "unxz", "lzma", "unlzma"),
                    _compressor(False)),
    **dict.fromkeys(("zstd", "unzstd"), _compressor(True)),
    **dict.fromkeys(("7z", "7za", "7zz"), _sevenzip),
    "patch": _patch,
    **dict.fromkeys(("rename", "prename", "perl-rename", "file-rename"), _rename),
    **dict.fromkeys(("make", "gmake"),
                    _clean_targets("CfIowW", ("--directory", "--file", "--makefile"))),
    "mvn": _clean_targets("fPDl"),
    **dict.fromkeys(("gradle", "gradlew"), _clean_targets("pDx")),
    "ninja": _clean_targets("Cfjlkd"),
    "ruff": _ruff,
    **dict.fromkeys((*_WRITE_IF, *_WRITE_UNLESS), _formatter),
}  # fmt: skip


def always_destructive(key: str) -> str | None:
    """The reason a command is destructive whatever its arguments, if it is."""
    reason = _ALWAYS.get(key)
    if reason is None and key.startswith("mkfs"):
        reason = f"{key} formats a filesystem"
    return reason
