"""Scripted bad agent runs on a git repository, the same on every copy.

``make_repo(pristine, dest)`` turns a tree into a repository with history:
``git init``, a first commit of the whole tree (the old commit), then a
second one that edits 50 files, adds a directory and deletes 3 files. Then,
as a developer's checkout has them, files git ignores: a ``.env`` of
secrets, a local database ``db.sqlite3`` of 384 KiB, build output in
``dist/`` and a ``settings.local`` inside the directory the ``mv`` run moves.

``runs(repo)`` gives the runs, each a list of steps: an agent call (``bash``,
``write``, ``edit``) or the person's hand edit (``person``): a plain write to
disk between two calls, appending to a tracked file no call touches and
creating ``NOTES-mine.md``. Every run holds the hand edit, so every restore
is checked for what it does to work that is not the agent's.

Every choice is drawn from ``random.Random(SEED)`` over sorted paths, and
git's dates and names are fixed: the same tree gives the same runs.
"""

from __future__ import annotations

import os
import random
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks.suite import trees

SEED = 7
SECOND_EDITS = 50
SECOND_DELETES = 3
SED_FILES = 1000
MAX_TEXT = 256 * 1024
LOCAL_IGNORES = "\n# local, never committed\n.env\ndb.sqlite3\n*.local\n/dist/\n*.o\n"
PERSON_NOTES = "NOTES-mine.md"
ADDED_DIR = "added_in_second"


@dataclass(frozen=True)
class Step:
    """One agent call (``bash``, ``write``, ``edit``) or the person's hand edit."""

    tool: str  # "bash", "write", "edit", "person"
    arg: str = ""  # the command, or the path written or edited
    old: str = ""  # edit: the text replaced
    new: str = ""  # edit: its replacement; write: the content


@dataclass
class Repo:
    """The repository the runs start from, and what they aim at."""

    root: Path
    first: str  # the old commit's id
    tracked: list[str]  # tracked text files after the second commit, sorted
    person_file: str  # the tracked file the person edits by hand
    rm_dir: str
    mv_dir: str
    sed_list: Path  # the files the sed run rewrites, one a line, outside the tree
    edits: dict[str, tuple[str, str]] = field(default_factory=dict)  # path -> (old, new)


def git_env(home: Path) -> dict[str, str]:
    """git with no system or user configuration, fixed names and dates."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GIT_", "EARSHOT_"))}
    env.update(
        HOME=str(home),
        XDG_CONFIG_HOME=str(home / ".config"),
        GIT_CONFIG_NOSYSTEM="1",
        GIT_AUTHOR_NAME="Dev",
        GIT_AUTHOR_EMAIL="dev@example.invalid",
        GIT_COMMITTER_NAME="Dev",
        GIT_COMMITTER_EMAIL="dev@example.invalid",
        GIT_AUTHOR_DATE="2024-01-01T12:00:00Z",
        GIT_COMMITTER_DATE="2024-01-01T12:00:00Z",
        LC_ALL="C",
        SHELL="/bin/bash",
    )
    home.mkdir(parents=True, exist_ok=True)
    return env


def git(root: Path, env: dict[str, str], *args: str) -> str:
    proc = subprocess.run(
        ["git", *args], cwd=root, env=env, capture_output=True, text=True, check=False
    )
    if proc.returncode:
        raise RuntimeError(f"git {' '.join(args)} exited {proc.returncode}: {proc.stderr.strip()}")
    return proc.stdout


def _text(path: Path) -> str | None:
    """The file's text if it is a small UTF-8 text file, else None."""
    try:
        if path.is_symlink() or path.stat().st_size > MAX_TEXT:
            return None
        data = path.read_bytes()
    except OSError:
        return None
    if b"\0" in data:
        return None
    try:
        return data.decode()
    except UnicodeDecodeError:
        return None


def _unique_line(text: str) -> str | None:
    """A line long enough to name, found exactly once in ``text``."""
    for line in text.splitlines():
        if len(line.strip()) >= 12 and text.count(line) == 1:
            return line
    return None


def _dirs(paths: list[str], low: int, high: int) -> list[str]:
    """Directories holding between ``low`` and ``high`` of ``paths``, sorted."""
    counts: dict[str, int] = {}
    for p in paths:
        parts = p.split("/")[:-1]
        for i in range(1, len(parts) + 1):
            d = "/".join(parts[:i])
            counts[d] = counts.get(d, 0) + 1
    return sorted(d for d, n in counts.items() if low <= n <= high)


def _under(path: str, d: str) -> bool:
    return path.startswith(d + "/")


def make_repo(pristine: Path, dest: Path, lists: Path) -> Repo:
    """Copy ``pristine`` to ``dest`` and make it a repository with two commits."""
    trees.copy(pristine, dest)
    env = git_env(lists / "home")
    rng = random.Random(SEED)
    with (dest / ".gitignore").open("a") as f:
        f.write(LOCAL_IGNORES)
    git(dest, env, "init", "-q", "--initial-branch=main")
    for key in ("gc.auto", "maintenance.auto"):  # no gc left running in the background
        git(dest, env, "config", key, "0")
    git(dest, env, "add", "-A")
    git(dest, env, "commit", "-q", "--no-verify", "-m", "the old commit")
    first = git(dest, env, "rev-parse", "HEAD").strip()
    listed = sorted(git(dest, env, "ls-files", "-z").split("\0")[:-1])
    texts = {p: t for p in listed if "gitignore" not in p and (t := _text(dest / p)) is not None}
    names = sorted(texts)
    # The second commit: 50 files edited, a directory added, 3 files deleted.
    second = rng.sample(names, SECOND_EDITS + SECOND_DELETES)
    for rel in second[:SECOND_EDITS]:
        with (dest / rel).open("a") as f:
            f.write("\n# changed in the second commit\n")
    for rel in second[SECOND_EDITS:]:
        (dest / rel).unlink()
    added = dest / ADDED_DIR
    added.mkdir()
    for i in range(5):
        (added / f"part_{i}.txt").write_text(f"part {i} of what the second commit added\n" * 20)
    git(dest, env, "add", "-A")
    git(dest, env, "commit", "-q", "--no-verify", "-m", "the second commit")
    names = [n for n in names if n not in second[SECOND_EDITS:]]
    # What the runs aim at, each apart from the others.
    rm_dir = rng.choice(_dirs(names, 20, 2000) or _dirs(names, 2, 10**9))
    mv_dir = rng.choice(
        [d for d in _dirs(names, 5, 300) if not _under(d, rm_dir) and not _under(rm_dir, d)]
        or [d for d in _dirs(names, 1, 10**9) if d != rm_dir and not _under(d, rm_dir)]
    )
    free = [
        n
        for n in names
        if n not in second and not _under(n, rm_dir) and not _under(n, mv_dir) and "/" in n
    ]
    person_file = rng.choice(free)
    sed_files = sorted(
        rng.sample([n for n in names if n != person_file], min(SED_FILES, len(names) - 1))
    )
    sed_list = lists / "sed-files.txt"
    sed_list.write_text("".join(f"{n}\n" for n in sed_files))
    edits: dict[str, tuple[str, str]] = {}
    for rel in [n for n in free if n != person_file]:
        line = _unique_line(texts[rel]) if rel in texts else None
        if line is not None:
            edits[rel] = (line, line + "  # reworded by the agent")
        if len(edits) >= 6:
            break
    for d, why in ((rm_dir, "tidied before the rm"), (mv_dir, "fixed after the move")):
        inside = [n for n in names if _under(n, d) and n in texts and _unique_line(texts[n])]
        if inside:
            line = _unique_line(texts[inside[0]]) or ""
            edits[inside[0]] = (line, f"{line}  # {why}")
    # Files git ignores, as a developer's checkout holds them.
    (dest / ".env").write_text(
        "".join(f"SECRET_{i}={rng.getrandbits(128):032x}\n" for i in range(8))
    )
    (dest / "db.sqlite3").write_bytes(b"SQLite format 3\0" + rng.randbytes(384 * 1024 - 16))
    (dest / "dist").mkdir()
    for i in range(12):
        (dest / "dist" / f"bundle_{i}.js").write_text(f"var bundle{i}={rng.random()!r};\n" * 200)
    (dest / mv_dir / "settings.local").write_text(f"token={rng.getrandbits(64):016x}\n")
    return Repo(dest, first, names, person_file, rm_dir, mv_dir, sed_list, edits)


def person_edit(root: Path, repo: Repo) -> None:
    """The person's own work, written straight to disk between two agent calls."""
    with (root / repo.person_file).open("a") as f:
        f.write("\n# mine: keep the old retry loop until the load test is back\n" * 3)
    (root / PERSON_NOTES).write_text("# my notes\n\n- ask about the migration\n" * 10)


def person_paths(repo: Repo) -> list[str]:
    return [repo.person_file, PERSON_NOTES]


def _edit(repo: Repo, index: int) -> Step:
    outside = [p for p in repo.edits if not _under(p, repo.rm_dir) and not _under(p, repo.mv_dir)]
    rel = sorted(outside)[index]
    old, new = repo.edits[rel]
    return Step("edit", rel, old, new)


def runs(repo: Repo) -> dict[str, list[Step]]:
    """The bad runs, by name: agent calls, and the person's hand edit among them."""
    person = Step("person")
    rm_edit = [
        Step("edit", p, *repo.edits[p]) for p in sorted(repo.edits) if _under(p, repo.rm_dir)
    ]
    rng = random.Random(SEED + 1)
    sources = rng.sample(repo.tracked, min(20, len(repo.tracked)))
    sources = [s for s in sources if s != repo.person_file and "." in os.path.basename(s)]
    objects = " ".join(f"'{s}'" for s in sources)
    build = (
        'mkdir -p build/out && awk \'BEGIN { for (i = 0; i < 200; i++) { f = "build/out/obj_" i '
        '".o"; for (j = 0; j < 64; j++) print "object", i, j > f; close(f) } }\''
    )
    moved = repo.mv_dir + "_old"
    moved_files = sorted(p for p in repo.tracked if _under(p, repo.mv_dir))
    mv_edit = next((p for p in moved_files if p in repo.edits), None)
    mv_step = (
        Step("edit", moved + mv_edit[len(repo.mv_dir) :], *repo.edits[mv_edit])
        if mv_edit
        else Step("write", f"{moved}/MOVED.md", new="moved aside by the agent\n")
    )
    return {
        "rm -rf of a source directory": [
            Step("bash", f"ls {repo.rm_dir} | head -n 5"),
            *rm_edit,
            person,
            Step("bash", f"rm -rf {repo.rm_dir}"),
            Step("write", f"{repo.rm_dir}/README.md", new="rewritten from scratch\n"),
        ],
        "sed -i across many files": [
            Step("bash", "git status --short | head -n 5"),
            _edit(repo, 0),
            person,
            Step(
                "bash",
                f"xargs -d '\\n' sed -i -e '1i // reformatted' -e 's/e/3/g' < {repo.sed_list}",
            ),
            Step("bash", "git diff --stat | tail -n 1"),
        ],
        "git checkout of the old commit": [
            Step("bash", "git log --oneline | head -n 3"),
            person,
            Step("bash", f"git checkout -q {repo.first}"),
            _edit(repo, 1),
        ],
        "git clean -fdx": [
            Step("bash", "git status --short --ignored | head -n 5"),
            _edit(repo, 2),
            Step("bash", "git clean -fdxq"),
            person,
            Step("write", "scratch/plan.md", new="# plan\n\n1. start clean\n"),
        ],
        ".env and the local database deleted": [
            Step("bash", "wc -c .env db.sqlite3"),
            _edit(repo, 3),
            person,
            Step("bash", "rm -f .env db.sqlite3"),
            Step("bash", "printf 'SQLite format 3\\000' > db.sqlite3"),
        ],
        "mv of a directory": [
            Step("bash", f"ls {repo.mv_dir} | head -n 5"),
            person,
            Step("bash", f"mv {repo.mv_dir} {moved}"),
            mv_step,
            Step("write", f"{repo.mv_dir}/README.md", new="the new layout starts here\n"),
        ],
        "a build writing outputs": [
            _edit(repo, 4),
            Step("bash", build),
            person,
            Step("bash", f'for f in {objects}; do cp "$f" "${{f%.*}}.o"; done'),
        ],
        "the person's hand edit": [
            _edit(repo, 5),
            person,
            Step("write", f"{os.path.dirname(repo.person_file)}/added_by_agent.txt", new="new\n"),
            Step("bash", f"printf '\\n# touched\\n' >> '{_edit(repo, 0).arg}'"),
        ],
    }
