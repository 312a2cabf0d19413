"""Shared fixtures: a fixed Hypothesis profile, an isolated data home, a root, the real CLI."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from earshot_cli import Cli, one_line_error
from hypothesis import settings
from trees import files, listing

# Fixed and reproducible: the same examples on every run, no example database.
settings.register_profile("ci", max_examples=50, deadline=None, derandomize=True, database=None)
# The fuzz tests' long run (EARSHOT_FUZZ=long, the benchmarks' "fuzz" figure):
# forty times the examples, new ones each run; a failure prints the blob that
# reproduces it (@reproduce_failure).
settings.register_profile(
    "long", settings.get_profile("ci"), max_examples=2000, derandomize=False, print_blob=True
)
settings.load_profile(
    "long"
    if os.environ.get("EARSHOT_FUZZ") == "long"
    else os.environ.get("HYPOTHESIS_PROFILE", "ci")
)


#: Set by .ci/run: a skipped test proves nothing, so CI fails on any skip.
_NO_SKIPS = "EARSHOT_NO_SKIPS"


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if not os.environ.get(_NO_SKIPS):
        return
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    skipped = reporter.stats.get("skipped", []) if reporter is not None else []
    if skipped:
        for report in skipped:
            reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else report.longrepr
            print(f"\n{_NO_SKIPS}: {report.nodeid} was skipped: {reason}")
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


# CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH: with either, a process reads a
# chmod-000 file whatever its mode (root, as CI runs).
_DAC_CAPS = (1 << 1) | (1 << 2)
_CHILD = "EARSHOT_TEST_WITHOUT_DAC_OVERRIDE"


def _has_dac_override() -> bool:
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("CapEff:"):
                    return bool(int(line.split()[1], 16) & _DAC_CAPS)
    except OSError:
        pass
    return os.geteuid() == 0


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> bool | None:
    """A test marked ``without_dac_override`` that would run with the power to
    read any file is run again in a child whose capability bounding set lacks
    it (``setpriv``), so an unreadable file is unreadable even as root; the
    child's pass or fail is the test's."""
    if pyfuncitem.get_closest_marker("without_dac_override") is None:
        return None
    if not _has_dac_override():
        return None
    assert _CHILD not in os.environ, "setpriv left this child able to read any file"
    setpriv = shutil.which("setpriv")
    assert setpriv is not None, "running as root needs setpriv (util-linux) for this test"
    child = subprocess.run(
        [
            setpriv,
            "--bounding-set=-dac_override,-dac_read_search",
            "--inh-caps=-dac_override,-dac_read_search",
            "--",
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "-o",
            "addopts=",
            pyfuncitem.nodeid,
        ],
        cwd=pyfuncitem.config.rootpath,
        env={**os.environ, _CHILD: "1"},
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    assert child.returncode == 0 and "1 passed" in child.stdout, child.stdout + child.stderr
    return True


@pytest.fixture
def earshot_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """EARSHOT_HOME pointed at a fresh directory, so no test touches the real store."""
    home = tmp_path / "earshot-home"
    monkeypatch.setenv("EARSHOT_HOME", str(home))
    return home


@pytest.fixture(autouse=True)
def no_watch_daemon_unless_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    """Commands never start a watch daemon by themselves in tests.

    With EARSHOT_WATCH=auto (the default) every mutating command would start
    one, and leave it running after the test; tests that run through a
    daemon ask for it (``both_modes``, ``earshot watch``), and one test runs
    the default end to end (tests/cli/test_hosted.py).
    """
    monkeypatch.setenv("EARSHOT_WATCH", "never")


def run_git(root: Path, *args: str) -> str:
    """git in ``root`` with no user or system configuration, and no optional locks."""
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(root.parent),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.com",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.com",
        "LC_ALL": "C",
    }
    proc = subprocess.run(
        ["git", "--no-optional-locks", *args],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return proc.stdout


def digest_dir(top: Path) -> dict[str, str]:
    """Every entry under ``top``: kind, mode, mtime and a digest of its bytes."""
    out: dict[str, str] = {}
    for dirpath, dirnames, filenames in os.walk(top):
        for name in [*dirnames, *filenames]:
            path = Path(dirpath) / name
            st = path.lstat()
            rel = path.relative_to(top).as_posix()
            if path.is_symlink():
                out[rel] = f"link {os.readlink(path)}"
            elif path.is_dir():
                out[rel] = f"dir {st.st_mode:o}"
            else:
                digest = hashlib.sha256(path.read_bytes()).hexdigest()
                out[rel] = f"file {st.st_mode:o} {st.st_mtime_ns} {digest}"
    return out


@pytest.fixture
def git() -> Callable[..., str]:
    """``git(root, *args)``: run git in a test repository (the user's, in these tests)."""
    return run_git


@pytest.fixture
def dir_digest() -> Callable[[Path], dict[str, str]]:
    """``dir_digest(top)``: everything under ``top``, to prove it untouched."""
    return digest_dir


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """An empty root: the working tree a test records."""
    path = tmp_path / "root"
    path.mkdir()
    return path


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The data home, for the CLI and for what a test opens in-process."""
    path = tmp_path / "home"
    monkeypatch.setenv("EARSHOT_HOME", str(path))
    monkeypatch.delenv("EARSHOT_SESSION", raising=False)
    return path


#: A module marked so runs each test that uses ``cli`` twice: with the CLI
#: in-process, and through a watch daemon hosting the commands.
BOTH_MODES = "both_modes"


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    marks = metafunc.definition
    if (
        "cli" in metafunc.fixturenames
        and marks.get_closest_marker(BOTH_MODES)
        and not marks.get_closest_marker("no_watcher")
    ):
        metafunc.parametrize("cli", ["in-process", "daemon"], indirect=True)


@pytest.fixture
def cli(home: Path, root: Path, request: pytest.FixtureRequest) -> Iterator[Cli]:
    """The real ``earshot`` script on this test's home and root (tests/earshot_cli.py).

    In a module marked ``both_modes``, once more with the root's daemon
    running, so every command the daemon hosts runs through it.
    """
    runner = Cli(home, root)
    if getattr(request, "param", "in-process") != "daemon":
        yield runner
        return
    runner.run("watch")
    try:
        yield runner
    finally:
        runner.run("watch", "--stop", expect=None)


@pytest.fixture
def check_error() -> Callable[..., str]:
    """``check_error(ran, code=1)``: the one-line error contract; returns the line."""
    return one_line_error


@pytest.fixture
def tree() -> Callable[..., dict[str, tuple[object, ...]]]:
    """``tree(top, mtimes=False)``: everything under ``top``, to compare trees whole."""
    return listing


@pytest.fixture
def file_tree() -> Callable[[Path], dict[str, bytes]]:
    """``file_tree(top)``: the regular files under ``top`` and their bytes."""
    return files
