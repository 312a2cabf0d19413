"""The remote figure (benchmarks/figures/remote.py): its batch command, its check
of a clone, the trees it runs on, and one real run on a small tree."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from importlib.util import find_spec
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from benchmarks.figures import registry  # noqa: E402
from benchmarks.figures.remote import FIGURE, clone_defects, edit_command, ignored  # noqa: E402
from benchmarks.suite import plan, treestate  # noqa: E402


def test_the_batch_appends_the_same_line_to_every_file_whatever_its_name(tmp_path: Path) -> None:
    names = ["a.py", "dir with space/b's.txt", "pct%s.c", "back\\slash.h"]
    for rel in names:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_bytes(b"x = 1\n")
    command, line = edit_command(names, 7)
    subprocess.run(["sh", "-c", command], cwd=tmp_path, check=True)
    assert line == b"\n// remote batch 7\n"
    assert all((tmp_path / rel).read_bytes() == b"x = 1\n" + line for rel in names)


def test_a_clone_is_held_to_every_file_and_only_ignored_ones_may_be_missing(
    tmp_path: Path,
) -> None:
    src = tmp_path / "src"
    (src / "build").mkdir(parents=True)
    (src / ".gitignore").write_text("build/\n")
    (src / "main.py").write_text("print(1)\n")
    (src / "build" / "out.o").write_bytes(b"\0obj")
    (src / "link").symlink_to("main.py")
    want = treestate.capture(src)
    regenerable = ignored(src)
    assert regenerable == {"build/out.o"}

    clone = tmp_path / "clone"
    shutil.copytree(src, clone, symlinks=True)
    assert clone_defects(want, treestate.capture(clone), set()) == []
    shutil.rmtree(clone / "build")
    assert clone_defects(want, treestate.capture(clone), set()) == ["build/out.o"]
    assert clone_defects(want, treestate.capture(clone), regenerable) == []
    (clone / "main.py").write_text("print(2)\n")  # content
    assert clone_defects(want, treestate.capture(clone), regenerable) == ["main.py"]
    (clone / "main.py").write_text("print(1)\n")
    (clone / "main.py").chmod(0o755)  # mode
    assert clone_defects(want, treestate.capture(clone), regenerable) == ["main.py"]
    (clone / "main.py").chmod((src / "main.py").stat().st_mode & 0o777)
    (clone / "link").unlink()
    (clone / "link").symlink_to("elsewhere.py")  # a link's target
    (clone / "extra.txt").write_text("?\n")  # a path the source lacks
    assert clone_defects(want, treestate.capture(clone), regenerable) == ["extra.txt", "link"]
    (clone / "link").unlink()
    assert clone_defects(want, treestate.capture(clone), regenerable) == ["extra.txt", "link"]


def test_the_figure_is_registered_and_runs_on_generated_trees_up_to_100k() -> None:
    assert registry()["remote"] is FIGURE
    the_plan = plan.make("full", ["remote"], sizes=["10k", "100k", "300k"], trees=["kernel"])
    runs = [t.key for t in the_plan.trees if FIGURE.applies(t, the_plan)]
    assert runs == ["generated-10000", "generated-100000"]
    assert [FIGURE.repeats(t, the_plan) for t in the_plan.trees[:2]] == [5, 3]


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("restic") is None, reason="restic is not installed")
@pytest.mark.skipif(find_spec("moto") is None, reason="moto is not installed")
def test_a_real_run_pushes_and_clones_both_and_checks_the_clones(tmp_path: Path) -> None:
    out = tmp_path / "out"
    argv = [sys.executable, "-m", "benchmarks", "run", "--sizes", "300", "--only", "remote"]
    argv += ["--out", str(out), "--work", str(tmp_path / "work")]
    argv += ["--cache", str(tmp_path / "cache")]
    argv += ["--earshot", str(Path(sys.executable).parent / "earshot")]
    proc = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads((out / "results.json").read_text())
    assert doc["errors"] == [] and doc["figures_done"] == ["remote:generated-300"]
    got = {(m["metric"], m["peer"]): m["median"] for m in doc["measurements"]}
    for peer in ("earshot", "restic"):
        assert got[("remote_push_cold", peer)] > 0
        assert got[("remote_stored_cold", peer)] > 100_000  # the tree's ~10 MiB, compressed
        assert 0 < got[("remote_added_10", peer)] < got[("remote_stored_cold", peer)] / 10
        assert got[("remote_requests_10", peer)] > 0
    # restic restores the ignored build output too; earshot keeps it as existence only
    assert got[("remote_clone_files", "restic")] > got[("remote_clone_files", "earshot")] > 290
    assert got[("remote_clone_defects", "earshot")] == got[("remote_clone_defects", "restic")] == 0
    text = (out / "RESULTS.md").read_text()
    assert "| incremental push of a 10-file batch |" in text and "earshot / restic" in text
    assert not (tmp_path / "work" / "generated-300").exists()  # scratch and servers gone
