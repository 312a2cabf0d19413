"""Decide, before an agent's shell command runs, whether it may destroy data.

A destructive command gets a full snapshot first; anything else relies on the
watcher and the restage after the command. A false positive costs one
snapshot, a false negative loses undo coverage, so every doubt resolves to
"destructive".

Approach
--------
The command is parsed with tree-sitter-bash, a real shell grammar, never
matched with regular expressions as a whole string. The syntax tree is walked
and every simple command found anywhere is classified: in pipelines and
``&&``/``||``/``;`` lists, subshells, ``{ }`` groups, ``$(...)`` and backticks,
process substitutions, function bodies (even if never called), if/for/while/
case bodies, ``[[ ]]`` tests, assignments and redirect targets. Quoted
strings are data (``echo "rm -rf /"`` is safe) unless a shell will run them.

For each simple command the literal words are recovered by :mod:`.words`
(quotes and escapes removed; a word with an expansion becomes "unknown") and
looked up in a curated table (:mod:`.rules` dispatches to :mod:`.wrappers`,
:mod:`.interpreters`, :mod:`.files`, :mod:`.packages` and :mod:`.windows`):

* Wrappers are unwrapped and the wrapped command classified: ``sudo``,
  ``doas``, ``env`` (assignments, ``-u``, ``-C``, ``-S``), ``xargs``,
  ``parallel``, ``command``, ``builtin``, ``exec``, ``nice``, ``ionice``,
  ``nohup``, ``timeout``, ``time``, ``stdbuf``, ``chronic``, ``setsid``,
  ``watch``, ``flock``, ``npx``, ``uv run``, ``poetry run``... Words xargs or
  ``find -exec`` will insert are unknown.
* Shell source is parsed again: ``bash/sh/zsh/... -c STRING``, ``su -c``,
  ``eval`` (its words joined), ``trap`` handlers, ``watch``, ``find -exec sh
  -c``, and a shell reading a heredoc or here-string. PowerShell (``pwsh -c``,
  ``powershell -Command``, ``-EncodedCommand``) and ``cmd /c`` text is cut
  into statements by a small tokenizer (there is no grammar for them here)
  and their destructive cmdlets, aliases and builtins are looked up; other
  statements go back through the POSIX table.
* Write targets are checked with ``path_exists``: output redirects and the
  destinations of ``cp``, ``mv``, ``install``, ``ln -f``, ``tee``, ``dd
  of=``, ``rsync``, ``scp``, ``sort -o``, ``curl -o``, ``wget -O``, ``tar
  -cf``. Relative paths are resolved against the ``cd``/``pushd`` seen so
  far (a ``cd`` into a directory that does not exist fails and changes
  nothing); a subshell's directory change is undone after it, and one inside
  a branch, loop, function or ``&&``/``||`` list leaves the directory
  unknown after that construct. Without ``path_exists``, or for a target
  that is not a literal, contains a glob, a brace or ``~``, or lies under an
  unknown directory, the write is destructive.

Decisions
---------
* ``>>``, ``&>>``, ``tee -a``, ``Add-Content``, ``Out-File -Append`` are NOT
  destructive: appending never loses a byte of the previous content, which
  stays a prefix of the file, and the restage records the new state.
  ``>``, ``>|``, ``&>``, ``>&file`` and ``2>`` onto a file that may exist
  are destructive; ``/dev/null``, ``/dev/stdout``, ``/dev/stderr``,
  ``/dev/tty``, ``/dev/fd/N``, ``-`` and fd duplications (``2>&1``, ``>&2``,
  ``>&-``) are not.
* ``cp``, ``mv``, ``install``, ``ln -f``, ``tee`` are destructive only onto a
  path that may exist (``mv`` onto a fresh name loses nothing: the content
  moves). ``cp a dir/`` checks ``dir/a``; a last operand without a trailing
  slash is checked as written, even when it is an existing directory
  (we cannot tell, so it errs broad). ``-n``/``--no-clobber`` is safe.
* ``chmod``, ``chown``, ``chgrp`` are always destructive, not only with
  ``-R``: snapshots record permission bits, and a changed owner can make a
  file unreadable to the scanner, so the old state must be captured first.
* ``make clean`` (and ``distclean``, ``mrproper``, any target containing
  "clean"; also mvn, gradle, ninja) is destructive; other targets are not
  (recipes are not read).
* Package managers are destructive when they change the install tree or a
  lock file (npm/pnpm/yarn/bun install/add/remove/update/ci, pip and
  ``python -m pip`` install/uninstall, uv add/lock/sync/venv, poetry, cargo
  update/add/clean/fmt, go get/mod tidy, bundle, gem, composer, conda,
  system package managers). Running scripts (``npm test``) is not.
* In-place editors and formatters are destructive: ``sed -i``, ``perl -i``,
  ``ruby -i``, ``gawk -i inplace``, ``black``, ``isort``, ``ruff format``,
  ``ruff --fix``, ``prettier --write``, ``gofmt -w``, ``eslint --fix``...
  unless a check/diff flag is given.
* git: reset, checkout, clean, restore, stash, switch, rebase, merge, pull,
  apply, am, rm, mv, cherry-pick, revert, bisect, ``worktree remove``,
  ``submodule update``... are destructive, with narrow exemptions that
  provably touch no file (``stash list``, ``clean -n``, ``apply --check``,
  ``checkout -b NAME``, ``switch -c NAME``). hg and svn have similar lists.
* Heredocs: a shell reading a heredoc or here-string has its text parsed as
  a script. A shell reading any other stdin (a pipe, ``< file``, the
  terminal: ``curl ... | sh``, ``bash -s``) is destructive, since the script
  cannot be seen. ``bash script.sh``, ``./script.sh`` and ``source f`` run a
  file that is not read: not destructive, like other interpreters.
* Interpreters (``python script.py``, ``python -c``, ``node -e``, ``perl -e``)
  are NOT destructive by this heuristic: their effects are covered by the
  watcher and the restage. As a courtesy, inline code (``-c``/``-e`` or a
  heredoc) with an obvious deletion or overwrite (``shutil.rmtree``,
  ``os.remove``, ``open(..., "w")``, ``fs.rmSync``, ``unlink``) is flagged.
* Always destructive: text tree-sitter cannot parse (ERROR or MISSING nodes:
  unbalanced quotes, but also the odd valid construct such as extglob
  ``!(*.py)``), a command word that is not a literal (``$x -rf a``,
  ``"$CMD"``, ``${RM}``, ``$(which rm) a``) or that the shell still expands
  (``/bin/r?``), ``eval`` or ``bash -c`` of non-literal text, undecodable
  ``-EncodedCommand``, nesting deeper than :data:`MAX_DEPTH` (or than
  Python's recursion limit, e.g. thousands of ``&&``). Command names are
  matched case-insensitively and without directory or ``.exe``
  (``/bin/rm``, ``\\rm``, ``RM``, ``rm.exe``).

Limits
------
Scripts in files, Makefile recipes, npm scripts, git hooks and aliases,
interpreter code beyond the courtesy check, ``sed`` scripts' own ``w FILE``
commands, awk's ``print > FILE``, and commands run on other machines
or containers (``ssh host rm x``, ``docker run``, even with a bind mount) are
not inspected. Aliases and functions defined in the user's shell are
unknown; a function defined in the same command is classified by its body.
Unknown commands are not destructive, or every command would be.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable
from dataclasses import dataclass

from tree_sitter import Node

from earshot.agent.shell.argv import SAME_DIR, Arg, Argv
from earshot.agent.shell.rules import classify_argv
from earshot.agent.shell.words import literal, parse, stdin_text, text

__all__ = ["MAX_DEPTH", "Verdict", "classify"]

#: Nesting of re-parsed scripts and wrappers beyond which we give up (destructive).
MAX_DEPTH = 16

#: Write targets that never hold user data.
_SAFE_TARGETS = frozenset(
    {"/dev/null", "/dev/stdout", "/dev/stderr", "/dev/tty", "/dev/zero", "/dev/full", "-"}
)
_SAFE_TARGET_RE = re.compile(r"/dev/fd/\d+|/proc/self/fd/\d+")
#: Characters that make a path name something we cannot check with path_exists.
_UNCHECKABLE = re.compile(r"[*?\[{]|^~")
#: A command word the shell may still expand (glob, brace), "[" aside.
_EXPANDING_NAME = re.compile(r"[*?{]|\[.+\]")
#: Redirect operators that truncate their target. ">>" and "&>>" append.
_TRUNCATING = frozenset({">", ">|", "&>", ">&"})
#: Nodes whose commands run in a child shell: a cd inside does not leak out.
_SCOPED = frozenset({"subshell", "command_substitution", "process_substitution"})
#: Nodes whose bodies may or may not run: a cd inside leaves the directory unknown.
_CONDITIONAL = frozenset(
    {"if_statement", "while_statement", "for_statement", "c_style_for_statement",
     "case_statement", "function_definition"}
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class Verdict:
    """Whether a command may destroy data, and human-readable reasons if so.

    ``targets``: the paths it may delete or overwrite, each with what lies
    below it, as written relative to where the command starts (``.`` for
    there itself); a glob stays one (``data/*.db``), to be matched against
    the names there. Only what can be told: a path under a directory that
    cannot be known is left out.
    """

    destructive: bool
    reasons: tuple[str, ...]
    targets: tuple[str, ...] = ()


class _Walker:
    """Walks syntax trees, collecting reasons; the Host of the command rules."""

    def __init__(self, path_exists: Callable[[str], bool] | None) -> None:
        self.reasons: list[str] = []
        self.targets: list[str] = []
        self.path_exists = path_exists
        #: Directory of the command being classified, relative to the original
        #: cwd ("" = unchanged); None once we cannot tell.
        self.cwd: str | None = ""
        #: What ``$PWD`` stands for in a path (the directory the walker is in);
        #: None: an expansion like any other (the command sets PWD).
        self.pwd: str | None = "."
        self.depth = 0

    # -- Host interface --------------------------------------------------------

    def flag(self, reason: str) -> None:
        if reason not in self.reasons:
            self.reasons.append(reason)

    def overwrite(self, tool: str, path: Arg) -> None:
        if path is None:
            self.flag(f"{tool} writes to a path that is not a literal")
            return
        if path in _SAFE_TARGETS or _SAFE_TARGET_RE.fullmatch(path):
            return
        exists = self._exists(path)
        if exists is None:
            self.flag(f"{tool} may overwrite {path}")
        elif exists:
            self.flag(f"{tool} overwrites {path}")
        if exists is not False:
            self.target(path)

    def target(self, path: Arg) -> None:
        if path is None or self.cwd is None:
            return
        if self.pwd is not None and (path == "~+" or path.startswith("~+/")):
            path = self.pwd + path[2:]  # bash's ~+ is $PWD
        for target in _as_targets(path):
            if not target.startswith("/") and self.cwd:
                target = posixpath.join(self.cwd, target)
            target = posixpath.normpath(target)
            if target not in self.targets:
                self.targets.append(target)

    def run_argv(self, argv: Argv, stdin: str | None, chdir: Arg = SAME_DIR) -> None:
        if not argv:
            return
        if argv[0] is None:
            self.flag("command name is not a literal")
            return
        if self.depth >= MAX_DEPTH:
            self.flag("command nests too deeply to inspect")
            return
        saved = self.cwd
        self.depth += 1
        try:
            if chdir != SAME_DIR:
                self.chdir(chdir)
            classify_argv(self, argv, stdin)
        finally:
            self.depth -= 1
            if chdir != SAME_DIR:
                self.cwd = saved

    def run_script(self, script: Arg, origin: str, *, same_shell: bool = False) -> None:
        if script is None:
            self.flag(f"{origin}: script cannot be inspected")
            return
        if self.depth >= MAX_DEPTH:
            self.flag(f"{origin}: nested too deeply to inspect")
            return
        root = parse(script)
        if root.has_error:
            self.flag(f"{origin}: script does not parse")
            return
        saved = self.cwd
        self.depth += 1
        try:
            self.walk(root)
        finally:
            self.depth -= 1
            if not same_shell:  # a child shell's cd does not leak out
                self.cwd = saved

    def chdir(self, path: Arg) -> None:
        if path is None or self.cwd is None or _UNCHECKABLE.search(path):
            self.cwd = None
            return
        if self._exists(path) is False:
            return  # cd fails and the shell stays where it is
        if path.startswith("/"):
            self.cwd = path
        else:
            self.cwd = posixpath.join(self.cwd, path) if self.cwd else path

    def _exists(self, path: str) -> bool | None:
        """Whether ``path`` exists before the command runs; None if unknown."""
        if self.path_exists is None or _UNCHECKABLE.search(path):
            return None
        if not path.startswith("/"):
            if self.cwd is None:
                return None
            if self.cwd:
                path = posixpath.join(self.cwd, path)
        try:
            return bool(self.path_exists(path))
        except OSError:
            return None

    # -- tree walking ------------------------------------------------------------

    def walk(self, node: Node) -> None:
        kind = node.type
        if kind == "command":
            self._command(node)
        elif kind == "file_redirect":
            self._redirect(node)
        elif kind in _SCOPED:
            saved = self.cwd
            self._children(node)
            self.cwd = saved
            return
        elif kind == "pipeline":
            # Every stage runs in its own subshell.
            for child in node.children:
                saved = self.cwd
                self.walk(child)
                self.cwd = saved
            return
        elif kind in _CONDITIONAL:
            before = self.cwd
            self._children(node)
            if self.cwd != before:
                self.cwd = None
            return
        elif kind == "list":
            # "a && b": b runs only if a succeeded, so a's cd holds for b;
            # "a || b": b runs only if a failed, so a's cd may not have
            # happened. After the list either may be true.
            before = self.cwd
            for child in node.children:
                if child.type == "||" and self.cwd != before:
                    self.cwd = None
                self.walk(child)
            if self.cwd != before:
                self.cwd = None
            return
        self._children(node)

    def _children(self, node: Node) -> None:
        for child in node.children:
            self.walk(child)

    def _command(self, node: Node) -> None:
        name = node.child_by_field_name("name")
        argv: list[Arg] = []
        if name is not None:
            argv.append(literal(name))
        for i, child in enumerate(node.children):
            if node.field_name_for_child(i) == "argument":
                argv.append(literal(child, self.pwd) if child.is_named else None)
        if name is not None and argv[0] is None:
            self.flag(f"command word {text(name)} is not a literal")
        elif argv and argv[0] is not None and _EXPANDING_NAME.search(argv[0]):
            # A glob or brace expansion ({rm,-rf,x}) picks the command at run time.
            self.flag(f"command word {text(name) if name else argv[0]} expands at run time")
        elif argv:
            self.run_argv(argv, stdin_text(node))
        # Substitutions in the words, assignments and redirects run too.
        self._children(node)

    def _redirect(self, node: Node) -> None:
        operator = ""
        descriptor = ""
        for child in node.children:
            if child.type == "file_descriptor":
                descriptor = text(child)
            elif not child.is_named:
                operator = child.type
                break
        destination = node.child_by_field_name("destination")
        if operator not in _TRUNCATING or destination is None:
            return  # input, append, or closing a descriptor
        if operator == ">&" and destination.type == "number":
            return  # duplicating a descriptor: 2>&1, >&2
        self.overwrite(f"redirect {descriptor}{operator}", literal(destination))


def _as_targets(path: str) -> list[str]:
    """A path as targets: as written, globs kept (``data/*.db``), brace expansions
    expanded (``{a,b}/x`` -> ``a/x``, ``b/x``); none for ``~`` (someone's home)."""
    if path.startswith("~"):
        return []
    match = _BRACE.search(path)
    if match is None:
        return [path]
    head, tail = path[: match.start()], path[match.end() :]
    return [t for alt in match[1].split(",") for t in _as_targets(head + alt + tail)][:64]


#: The first brace expansion without a nested one, and its alternatives.
_BRACE = re.compile(r"\{([^{}]*,[^{}]*)\}")


def classify(command: str, path_exists: Callable[[str], bool] | None = None) -> Verdict:
    """Classify a shell command line before it runs.

    ``path_exists`` answers whether a path, as written in the command and
    relative to the command's starting directory, exists now; without it,
    every write onto a path counts as destructive.
    """
    if not command.strip():
        return Verdict(False, ())
    root = parse(command)
    if root.has_error:
        return Verdict(True, ("the command does not parse as a shell command",))
    walker = _Walker(path_exists)
    # $PWD is the directory the walker is in ("."), unless the command sets it.
    walker.pwd = None if "PWD=" in command else "."
    try:
        walker.walk(root)
    except RecursionError:
        walker.flag("the command nests too deeply to inspect")
    return Verdict(bool(walker.reasons), tuple(walker.reasons), tuple(walker.targets))
