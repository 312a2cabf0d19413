"""Version control and package managers for the destructive-command
heuristic: subcommands that rewrite the working tree, the install tree or a
lock file. See :mod:`.destructive` for the decisions.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field

from earshot.agent.shell.argv import Argv, Handler, Host, getopt

# --- version control -------------------------------------------------------------

_GIT_REASONS: dict[str, str] = {
    "reset": "git reset can discard staged and working-tree changes",
    "checkout": "git checkout can overwrite working-tree files",
    "clean": "git clean deletes untracked files",
    "restore": "git restore overwrites working-tree files",
    "stash": "git stash rewrites the working tree",
    "switch": "git switch can overwrite working-tree files",
    "rebase": "git rebase rewrites the working tree",
    "merge": "git merge modifies working-tree files",
    "pull": "git pull modifies working-tree files",
    "apply": "git apply modifies files",
    "am": "git am modifies files",
    "rm": "git rm deletes files",
    "mv": "git mv moves files",
    "cherry-pick": "git cherry-pick modifies working-tree files",
    "revert": "git revert modifies working-tree files",
    "bisect": "git bisect checks out other commits",
    "filter-branch": "git filter-branch rewrites history and the working tree",
    "checkout-index": "git checkout-index overwrites working-tree files",
    "read-tree": "git read-tree can overwrite working-tree files",
}


def _git(host: Host, argv: Argv, stdin: str | None) -> None:
    opts = getopt(
        argv[1:],
        "Cc",
        {"--git-dir", "--work-tree", "--namespace", "--super-prefix", "--config-env"},
        stop=True,
    )
    if not opts.operands:
        return
    sub, *args = opts.operands
    if sub is None:
        host.flag("git subcommand is not a literal")
        return
    first = args[0] if args else ""
    if sub == "clean":
        clean = getopt(args, "e", {"--exclude"})
        if clean.has("-n", "--dry-run"):
            return
        if clean.has("-x", "-X"):  # what git ignores goes too: record it first
            for path in clean.operands or ["."]:
                host.target(path)
    elif sub == "stash":
        if first in ("list", "show", "create"):
            return
    elif sub == "apply":
        if set(args) & {"--check", "--stat", "--numstat", "--summary"} and "--apply" not in args:
            return
    elif sub == "checkout":
        if first == "-b" and len(args) == 2:
            return  # a new branch at HEAD: no file changes
    elif sub == "switch":
        if first in ("-c", "--create") and len(args) == 2:
            return
    elif sub == "bisect":
        if first in ("log", "view", "visualize", "help"):
            return
    elif sub == "worktree":
        if first == "remove":
            host.flag("git worktree remove deletes a working tree")
        return
    elif sub == "submodule":
        rest = getopt(args, stop=True).operands
        if rest and rest[0] in ("update", "deinit"):
            host.flag(f"git submodule {rest[0]} overwrites submodule files")
        elif rest and rest[0] == "foreach":
            words = getopt(rest[1:], stop=True).operands
            script = None if None in words else " ".join(w for w in words if w is not None)
            host.run_script(script, "git submodule foreach")
        return
    elif sub == "sparse-checkout":
        if first in ("set", "add", "reapply", "disable", "init"):
            host.flag(f"git sparse-checkout {first} removes or restores files")
        return
    reason = _GIT_REASONS.get(sub)
    if reason is not None:
        host.flag(reason)


def _subcommands(
    table: Mapping[str, str], short_arg: str = "", long_arg: Collection[str] = ()
) -> Handler:
    """A tool whose first operand selects the action (hg, svn)."""

    def handle(host: Host, argv: Argv, stdin: str | None) -> None:
        opts = getopt(argv[1:], short_arg, long_arg, stop=True)
        if not opts.operands:
            return
        sub = opts.operands[0]
        if sub is None:
            host.flag(f"{argv[0]} subcommand is not a literal")
        elif sub in table:
            host.flag(f"{argv[0]} {sub} {table[sub]}")

    return handle


_HG = {
    **dict.fromkeys(("revert", "update", "up", "checkout", "co", "merge", "backout",
                     "graft", "import", "unshelve", "histedit", "rebase"),
                    "modifies working-tree files"),
    **dict.fromkeys(("purge", "clean", "rm", "remove", "strip", "shelve", "rollback"),
                    "deletes or discards files"),
    **dict.fromkeys(("mv", "move", "rename"), "moves files"),
}  # fmt: skip
_SVN = {
    **dict.fromkeys(("revert", "update", "up", "switch", "sw", "merge", "patch"),
                    "modifies working-tree files"),
    **dict.fromkeys(("delete", "del", "remove", "rm"), "deletes files"),
    **dict.fromkeys(("move", "mv", "rename", "ren"), "moves files"),
}  # fmt: skip


# --- package managers ------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Pkg:
    """How a package manager's command line selects an install-tree change."""

    subs: frozenset[str]
    nested: Mapping[str, frozenset[str]] = field(default_factory=dict)
    unless: Mapping[str, frozenset[str]] = field(default_factory=dict)
    runs: frozenset[str] = frozenset()  # "uv run CMD": CMD is classified
    bare: bool = False  # the tool alone installs ("yarn", "bundle")
    short_arg: str = ""
    long_arg: frozenset[str] = frozenset()


def _fs(*words: str) -> frozenset[str]:
    return frozenset(words)


_NPM_INSTALL = _fs("install", "i", "in", "ins", "inst", "insta", "instal", "isnt", "isnta",
                   "isntal", "isntall", "add", "ci", "clean-install", "ic", "install-clean",
                   "isntall-clean", "install-test", "it", "install-ci-test", "cit",
                   "uninstall", "un", "unlink", "remove", "rm", "r", "update", "up", "upgrade",
                   "udpate", "dedupe", "ddp", "prune", "link", "ln", "rebuild", "rb",
                   "shrinkwrap", "init")  # fmt: skip
_JS_LONG = _fs("--prefix", "--workspace", "--dir", "--cwd", "--filter", "--registry", "--cache")

_PKGS: dict[str, _Pkg] = {
    "npm": _Pkg(_NPM_INSTALL, {"audit": _fs("fix"), "pkg": _fs("set", "delete", "fix")},
                runs=_fs("exec", "x"), short_arg="Cw", long_arg=_JS_LONG),
    "pnpm": _Pkg(_NPM_INSTALL | _fs("import", "fetch", "patch-commit"),
                 {"audit": _fs("--fix")}, runs=_fs("exec", "dlx"), short_arg="CwF",
                 long_arg=_JS_LONG),
    "yarn": _Pkg(_fs("install", "add", "remove", "upgrade", "up", "upgrade-interactive",
                     "dedupe", "import", "link", "unlink", "autoclean"),
                 runs=_fs("dlx", "exec"), bare=True, long_arg=_JS_LONG),
    "bun": _Pkg(_fs("install", "i", "add", "a", "remove", "rm", "update", "upgrade", "link",
                    "unlink"), runs=_fs("x"), long_arg=_JS_LONG),
    "deno": _Pkg(_fs("install", "add", "remove", "uninstall", "fmt"),
                 unless={"fmt": _fs("--check")}),
    "pip": _Pkg(_fs("install", "uninstall"), unless={"install": _fs("--dry-run")},
                long_arg=_fs("--python")),
    "uv": _Pkg(_fs("add", "remove", "lock", "sync", "venv", "init"),
               {"pip": _fs("install", "uninstall", "sync", "compile"),
                "tool": _fs("install", "uninstall", "upgrade"),
                "python": _fs("install", "uninstall")},
               unless={"lock": _fs("--check", "--check-exists", "--dry-run"),
                       "sync": _fs("--check", "--dry-run")},
               runs=_fs("run"), long_arg=_fs("--directory", "--project", "--python",
                                             "--config-file", "--cache-dir")),
    "poetry": _Pkg(_fs("add", "remove", "lock", "update", "install", "sync"),
                   unless={"lock": _fs("--check"), "install": _fs("--dry-run"),
                           "update": _fs("--dry-run")}, runs=_fs("run"),
                   short_arg="CP", long_arg=_fs("--directory", "--project")),
    "pipenv": _Pkg(_fs("install", "uninstall", "lock", "update", "sync", "clean", "upgrade"),
                   runs=_fs("run")),
    "pdm": _Pkg(_fs("add", "remove", "lock", "update", "install", "sync"), runs=_fs("run"),
                short_arg="p", long_arg=_fs("--project")),
    "pipx": _Pkg(_fs("install", "uninstall", "upgrade", "upgrade-all", "reinstall",
                     "reinstall-all", "inject", "uninject"), runs=_fs("run")),
    "cargo": _Pkg(_fs("update", "add", "remove", "rm", "install", "uninstall", "clean", "fix",
                      "fmt", "generate-lockfile", "vendor"), unless={"fmt": _fs("--check")},
                  short_arg="Z", long_arg=_fs("--config", "--color")),
    "go": _Pkg(_fs("get", "clean", "fmt", "fix", "generate", "install"),
               {"mod": _fs("tidy", "vendor", "edit", "init"),
                "work": _fs("sync", "use", "edit", "init")}),
    "bundle": _Pkg(_fs("install", "update", "add", "remove", "lock", "clean"),
                   runs=_fs("exec"), bare=True),
    "gem": _Pkg(_fs("install", "uninstall", "update", "cleanup", "pristine")),
    "composer": _Pkg(_fs("install", "i", "update", "u", "upgrade", "require", "req", "remove",
                         "rm", "dump-autoload"), short_arg="d", long_arg=_fs("--working-dir")),
    "conda": _Pkg(_fs("install", "remove", "uninstall", "update", "upgrade", "create", "clean"),
                  {"env": _fs("create", "remove", "update")}, runs=_fs("run")),
    "apt": _Pkg(_fs("install", "remove", "purge", "upgrade", "dist-upgrade", "full-upgrade",
                    "autoremove", "reinstall"), short_arg="oct"),
    "dnf": _Pkg(_fs("install", "remove", "erase", "upgrade", "update", "reinstall",
                    "downgrade", "autoremove")),
    "zypper": _Pkg(_fs("install", "in", "remove", "rm", "update", "up", "dist-upgrade", "dup")),
    "apk": _Pkg(_fs("add", "del", "upgrade", "fix")),
    "brew": _Pkg(_fs("install", "uninstall", "remove", "rm", "upgrade", "reinstall", "cleanup",
                     "link", "unlink")),
    "snap": _Pkg(_fs("install", "remove", "refresh", "revert")),
    "dotnet": _Pkg(_fs("add", "remove", "restore", "clean", "format")),
}  # fmt: skip
for _alias, _name in (("pip3", "pip"), ("bundler", "bundle"), ("mamba", "conda"),
                      ("micromamba", "conda"), ("apt-get", "apt"), ("aptitude", "apt"),
                      ("yum", "dnf"), ("microdnf", "dnf")):  # fmt: skip
    _PKGS[_alias] = _PKGS[_name]


def _package_manager(host: Host, argv: Argv, stdin: str | None, spec: _Pkg) -> None:
    tool = argv[0]
    opts = getopt(argv[1:], spec.short_arg, spec.long_arg, stop=True)
    rest = [w for w in opts.operands if w is None or not w.startswith("+")]  # cargo +nightly
    if not rest:
        if spec.bare:
            host.flag(f"{tool} installs packages")
        return
    sub, *args = rest
    if sub is None:
        host.flag(f"{tool} subcommand is not a literal")
    elif sub in spec.subs:
        if not set(args) & spec.unless.get(sub, frozenset()):
            host.flag(f"{tool} {sub} changes installed packages or lock files")
    elif sub in spec.nested:
        words = getopt(args, stop=True).operands
        action = words[0] if words else ""
        if action is None or action in spec.nested[sub] or set(args) & spec.nested[sub]:
            label = " ".join(w for w in (tool, sub, action) if w)
            host.flag(f"{label} changes installed packages")
    elif sub in spec.runs:
        inner = getopt(args, "pw", {"--with", "--python", "--package", "--directory", "--env",
                                    "--project", "--extra", "--group"}, stop=True)  # fmt: skip
        if inner.operands:
            host.run_argv(inner.operands, stdin)


def _pacman(host: Host, argv: Argv, stdin: str | None) -> None:
    for arg in argv[1:]:
        if arg is not None and re.match(r"-[A-Za-z]*[SRU]", arg) and not arg.startswith("--"):
            host.flag("pacman changes installed packages")
            return


def _package_handler(spec: _Pkg) -> Handler:
    def handle(host: Host, argv: Argv, stdin: str | None) -> None:
        _package_manager(host, argv, stdin, spec)

    return handle


PACKAGE_HANDLERS: dict[str, Handler] = {
    "git": _git,
    "hg": _subcommands(_HG, "R", ("--repository", "--cwd", "--config")),
    "svn": _subcommands(_SVN),
    "pacman": _pacman,
    **{name: _package_handler(spec) for name, spec in _PKGS.items()},
}
_PIP = re.compile(r"pip[0-9.]+")


def versioned_pip(key: str) -> Handler | None:
    """The handler for ``pip3.12`` and the like, which no table can list."""
    return PACKAGE_HANDLERS["pip"] if _PIP.fullmatch(key) else None
