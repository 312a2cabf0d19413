"""What ``earshot doctor`` checks, each a ``Check``: ok, warning or failed, and the fix.

A hook that does not run fails silently inside the agent (it goes on, and
records nothing), so each check asks the thing itself: the installed hook
command is run as the agent runs it, with the probe event; Codex's config
is read for the trust its hooks need; the daemon is asked; the store is
glanced at; the limits are read from the kernel.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from earshot.agent.hooks.probe import probe_failure
from earshot.agent.hooks.settings import (
    capped_entries,
    installed,
    our_commands,
    personal_file,
    settings_file,
)
from earshot.cas.errors import EarshotError

from .install_files import CodexConfig, Settings
from .settings_io import SettingsError

OK, WARNING, FAILED = "ok", "warning", "failed"
_NAMES = {"claude": "Claude Code", "codex": "Codex CLI", "gemini": "Gemini CLI"}


@dataclass(frozen=True, slots=True)
class Check:
    """One check's verdict: one line, and what to do when it is not ok."""

    name: str
    status: str
    detail: str
    fix: str | None = None


@dataclass(frozen=True, slots=True)
class HookFile:
    """A settings file holding earshot's hooks of an agent, read."""

    agent: str
    user: bool
    settings: Settings


def hook_files(
    agent: str, root: str, user: bool | None = None
) -> tuple[list[HookFile], list[Check]]:
    """The agent's settings files (the project's and the person's, or those of
    ``user``'s scope) that hold earshot's hooks; one earshot cannot read is a
    failed check."""
    home = os.path.expanduser("~")
    candidates = [(False, settings_file(agent, "project", root, home, None))]
    if (personal := personal_file(agent, root)) is not None:
        candidates.insert(0, (False, personal))
    mine = settings_file(agent, "user", root, home, os.environ.get("CODEX_HOME"))
    candidates.append((True, mine))
    found, checks = [], []
    for is_user, path in candidates:
        if user is not None and is_user != user:
            continue
        try:
            settings = Settings.read(Path(path), None if is_user else Path(root))
        except EarshotError as exc:
            checks.append(Check(f"{agent} hooks", FAILED, str(exc), "fix or move the file away"))
            continue
        if installed(settings.doc, agent):
            found.append(HookFile(agent, is_user, settings))
    return found, checks


def _many(n: int, one: str, more: str) -> str:
    return f"{n} {one if n == 1 else more}"


def _install(agent: str, user: bool, more: str = "") -> str:
    return f"earshot install {agent}{' --user' if user else ''}{more}"


def hook_checks(
    agent: str, root: str, probed: frozenset[str] = frozenset(), user: bool | None = None
) -> list[Check]:
    """Each file's earshot hooks of ``agent`` (of ``user``'s scope, if given): do
    they run (``probed``: command lines known to), are their timeouts within
    what the agent allows, and (Codex) are they trusted."""
    files, checks = hook_files(agent, root, user)
    for hook in files:
        path = hook.settings.path
        name = f"{agent} hooks"
        for line in our_commands(hook.settings.doc, agent):
            why = None if line in probed else probe_failure(line, agent, root)
            if why is not None:
                fix = _install(agent, hook.user) + " (or --command PATH to an earshot that runs)"
                checks.append(Check(name, FAILED, f"{path}: the hook command {why}", fix))
                break
        else:
            checks.append(Check(name, OK, f"{path}: earshot's hooks run"))
        for event, asked, cap in capped_entries(hook.settings.doc, agent):
            checks.append(
                Check(
                    name,
                    WARNING,
                    f"{path}: {event} asks {asked} s; {_NAMES[agent]} allows {cap} s",
                    _install(agent, hook.user),
                )
            )
        if agent == "codex":
            checks.append(codex_trust_check(hook, root))
    if agent == "claude":
        names = {h.settings.path.name for h in files if not h.user}
        if {"settings.json", "settings.local.json"} <= names:
            checks.append(
                Check(
                    "claude hooks",
                    WARNING,
                    "earshot's hooks are in both settings.json and settings.local.json: "
                    "each event runs twice",
                    "earshot install claude (keeps them in settings.local.json alone)",
                )
            )
    return checks


def codex_trust_check(hook: HookFile, root: str) -> Check:
    """Whether Codex runs the hooks of ``hook``'s file: each trusted, and a
    project's file in a trusted project."""
    from earshot.agent.hooks.codex_config import ConfigShape, codex_trust, kept_level, missing

    trust = codex_trust(str(hook.settings.real.resolve()), hook.settings.doc)
    project = None if hook.user else os.path.realpath(root)
    try:
        config = CodexConfig.read()
        lacking = missing(config.text, trust, project)
        level = kept_level(config.text, project)
    except (SettingsError, ConfigShape) as exc:
        return Check("codex trust", FAILED, str(exc), "fix Codex's config.toml")
    if not lacking:
        return Check("codex trust", OK, f"{config.path}: earshot's hooks are trusted")
    hooks = sum(1 for x in lacking if x.startswith("[hooks."))
    if level is not None and project is not None:
        then = f"; then {_install('codex', False, ' --trust')}" if hooks else ""
        return Check(
            "codex trust",
            FAILED,
            kept_trust_line(config.path, project, level),
            f'set trust_level = "trusted" under [projects."{project}"] in {config.path}, '
            f"if you trust the project{then}",
        )
    what = []
    if hooks:
        what.append(f"{hooks} of earshot's hooks {'is' if hooks == 1 else 'are'} not trusted")
    if project is not None and len(lacking) > hooks:
        what.append("the project is not trusted")
    return Check(
        "codex trust",
        FAILED,
        f"{config.path}: {' and '.join(what)}: Codex runs none of earshot's hooks here "
        "('codex exec' skips them without a word)",
        _install("codex", hook.user, " --trust"),
    )


def kept_trust_line(config: Path, project: str, level: object) -> str:
    """What to change by hand when the person's config says the project is not trusted."""
    return (
        f'{config} sets projects."{project}".trust_level = {json.dumps(level)}, which earshot '
        "leaves as you set it: Codex runs none of this project's hooks until you change it "
        'to "trusted" by hand'
    )


def daemon_check(root: str) -> tuple[Check, dict[str, object] | None]:
    """Whether the root's watch daemon answers (none running is fine: the next
    recorded event starts one); its status when it does."""
    from earshot.agent.watch import client

    paths = client.daemon_paths(root)
    status = client.daemon_status(paths)
    if status is not None:
        return Check("daemon", OK, f"the watch daemon of {paths.root} answers"), status
    if client.daemon_pid(paths) is not None:  # its lock is held
        return (
            Check(
                "daemon",
                FAILED,
                f"a watch daemon of {paths.root} runs but does not answer (see {paths.log})",
                "earshot watch --stop (the next recorded event starts a new one)",
            ),
            None,
        )
    mode = client.watch_mode() if os.environ.get(client.ENV_MODE) else "auto"
    detail = "no watch daemon runs" + (
        "; the next recorded event starts one" if mode != "never" else " (EARSHOT_WATCH=never)"
    )
    return Check("daemon", OK, detail), None


def _proc_int(name: str) -> int | None:
    try:
        with open(f"/proc/sys/fs/inotify/{name}") as f:
            return int(f.read())
    except (OSError, ValueError):
        return None


def _count_dirs(root: str, limit: int) -> int:
    """Directories under ``root`` (the watcher's upper bound), counting stops past ``limit``."""
    count = 0
    for _top, dirs, _files in os.walk(root):
        dirs[:] = [d for d in dirs if d != ".git"]
        count += 1
        if count > limit:
            break
    return count


def inotify_check(root: str, status: dict[str, object] | None) -> Check:
    """The tree's directories against fs.inotify.max_user_watches (one watch each),
    and fs.inotify.max_user_instances (one per watched root)."""
    watches = _proc_int("max_user_watches")
    instances = _proc_int("max_user_instances")
    if watches is None:
        return Check("inotify", WARNING, "no inotify limits to read (not Linux?)")
    watched = status.get("watched_dirs") if status else None
    dirs = watched if isinstance(watched, int) else _count_dirs(root, watches)
    fix = "sudo sysctl fs.inotify.max_user_watches=524288 (and in /etc/sysctl.d/ to keep it)"
    if dirs > watches:
        return Check(
            "inotify",
            FAILED,
            f"{dirs} directories, fs.inotify.max_user_watches = {watches}: the daemon "
            "cannot watch the tree (each command then rescans it)",
            fix,
        )
    if dirs * 2 > watches:
        return Check(
            "inotify",
            WARNING,
            f"{dirs} directories use over half of fs.inotify.max_user_watches ({watches})",
            fix,
        )
    if instances is not None and instances < 8:
        return Check(
            "inotify",
            WARNING,
            f"fs.inotify.max_user_instances = {instances}: few roots can be watched at once",
            "sudo sysctl fs.inotify.max_user_instances=128",
        )
    return Check(
        "inotify",
        OK,
        f"{_many(dirs, 'directory', 'directories')}; max_user_watches {watches}, "
        f"max_user_instances {instances}",
    )


def store_check(root: str) -> Check:
    """A quick check of the root's store (``earshot fsck --quick``)."""
    from earshot.cas.paths import checkpoints_dir, data_home

    store = checkpoints_dir(os.path.realpath(root), data_home())
    if not store.exists():
        return Check("store", OK, "no store yet (the first recorded event makes it)")
    from earshot.agent.core.records import TABLES, check_records
    from earshot.cas.fsck import check_quick
    from earshot.cas.project import Project

    try:
        with Project(root, extra_tables=TABLES) as project:
            report = check_quick(project.store)
            with project.store.backend.read() as view:
                _count, problems = check_records(view)
    except EarshotError as exc:
        return Check("store", FAILED, str(exc), "earshot fsck")
    report.problems.extend(problems)
    if report.problems:
        first = report.problems[0]
        more = f" (and {len(report.problems) - 1} more)" if len(report.problems) > 1 else ""
        return Check("store", FAILED, f"{first}{more}", "earshot fsck (--repair where it says)")
    snapshots = _many(report.snapshots, "snapshot", "snapshots")
    return Check("store", OK, f"{snapshots}; records sealed and whole")


#: Below these, a snapshot of a changed tree may not fit.
LOW_BYTES = 1 << 30
NO_BYTES = 100 << 20


def disk_check(root: str) -> Check:
    """Free space on the filesystem of earshot's data home."""
    from earshot.cas.paths import data_home
    from earshot.cli.render import human_bytes

    where = data_home()
    while not where.exists() and where != where.parent:
        where = where.parent
    usage = shutil.disk_usage(where)
    free = f"{human_bytes(usage.free)} free on {where}'s filesystem"
    fix = "free some space, or set EARSHOT_HOME to a roomier filesystem"
    if usage.free < NO_BYTES:
        return Check("disk", FAILED, free + ": recording will fail", fix)
    if usage.free < LOW_BYTES or usage.free * 20 < usage.total:
        return Check("disk", WARNING, free, fix + " ('earshot gc' drops what nothing needs)")
    return Check("disk", OK, free)
