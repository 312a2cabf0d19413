"""The benchmark suite's frame: its plan, its results file, its report and its
comparison of two runs, and one real run of the snapshot figure on a small tree."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from benchmarks.report import compare, render  # noqa: E402
from benchmarks.suite import plan  # noqa: E402
from benchmarks.suite.progress import Progress  # noqa: E402
from benchmarks.suite.record import (  # noqa: E402
    FidelityRow,
    Results,
    Series,
    TreeInfo,
    load,
    merge,
)
from benchmarks.suite.trees import parse_size  # noqa: E402

PNG = b"\x89PNG\r\n\x1a\n"


def test_sizes_read_as_a_person_writes_them() -> None:
    assert [parse_size(s) for s in ("10000", "10k", "1M", "300_000", "2.5k")] == [
        10_000,
        10_000,
        1_000_000,
        300_000,
        2_500,
    ]
    for bad in ("abc", "0", "-5", ""):
        with pytest.raises(ValueError, match="not a tree size"):
            parse_size(bad)


def test_the_profiles_and_their_narrowing() -> None:
    figures = ["snapshots", "churn"]
    quick = plan.make("quick", figures)
    assert [t.key for t in quick.trees] == ["generated-10000"]
    assert (quick.repeat, quick.churn, quick.drop_caches) == (1, 10, False)
    full = plan.make("full", figures)
    assert [t.key for t in full.trees][-4:] == ["kernel", "node_modules", "venv", "binary"]
    assert len(full.trees) == 8 and full.churn == 100 and full.repeat == 5
    assert [t.key for t in plan.make("full", figures, trees=["kernel"]).trees] == ["kernel"]
    assert [t.key for t in plan.make("full", figures, sizes=["10k"]).trees] == ["generated-10000"]
    both = plan.make("quick", figures, sizes=["1k"], trees=["venv"])
    assert [t.key for t in both.trees] == ["generated-1000", "venv"]
    assert plan.make("quick", figures, only=["churn"]).figures == ["churn"]
    with pytest.raises(ValueError, match="no figure nosuch; there are: snapshots, churn"):
        plan.make("quick", figures, only=["nosuch"])


def _results(earshot_cold: float) -> Results:
    res = Results("full", {"nproc": 2, "cpu_model": "test", "work_dir_fs": "ext4"}, {})
    res.trees["generated-100000"] = TreeInfo(
        "generated-100000", "generated", 100_000, 2**30, 2, "t"
    )
    res.trees["generated-10000"] = TreeInfo("generated-10000", "generated", 10_000, 2**27, 2, "t")
    for tree, scale in (("generated-10000", 1), ("generated-100000", 10)):
        for value in (earshot_cold * scale, earshot_cold * scale * 1.1):
            res.measure("snapshots", "cold_snapshot", tree, "earshot", value)
            res.measure("snapshots", "nochange_snapshot", tree, "earshot", 0.2 * scale)
        for value in (10.0 * scale, 11.0 * scale):
            res.measure("snapshots", "cold_snapshot", tree, "shadow-git", value)
            res.measure("snapshots", "nochange_snapshot", tree, "shadow-git", 0.1 * scale)
    res.series.append(
        Series(
            "churn",
            "store_bytes",
            "generated-10000",
            "earshot",
            "checkpoint",
            "bytes",
            [0, 1],
            [2**20, 2**21],
        )
    )
    res.fidelity.append(
        FidelityRow(
            "generated-10000", "rm -rf src", "shadow-git", 100, 90, 10, 1, 512, "x", changed=100
        )
    )
    res.fidelity.append(FidelityRow("generated-10000", "rm -rf src", "earshot", 100, 100, 0, 0, 0))
    return res


def test_results_survive_the_file(tmp_path: Path) -> None:
    res = _results(1.0)
    res.save(tmp_path)
    again = load(tmp_path)
    assert again.to_json() == res.to_json()
    doc = json.loads((tmp_path / "results.json").read_text())
    cold = next(m for m in doc["measurements"] if m["metric"] == "cold_snapshot")
    assert (cold["median"], cold["min"], cold["max"], cold["samples"]) == (
        1.05,
        1.0,
        1.1,
        [1.0, 1.1],
    )


def test_the_report_is_built_from_the_json_alone_and_shows_a_missed_target(tmp_path: Path) -> None:
    _results(2.0).save(tmp_path)  # cold 2.1 / 10.5 = 0.2: met; no change 2.0: missed
    written = render(tmp_path)
    text = (tmp_path / "RESULTS.md").read_text()
    assert (
        "| cold snapshot (fresh store) | generated, 100,000 files "
        "| 0.20 (shadow git) | <= 0.25 | met |" in text
    )
    assert (
        "| snapshot, nothing changed | generated, 100,000 files "
        "| 2.00 (shadow git) | <= 1.0 | **missed** |" in text
    )
    assert "| 2.10 s (2.00 s-2.20 s) | 10.50 s (10.00 s-11.00 s) | 0.20 |" in text
    assert "| generated-10000 | rm -rf src | shadow git | 100 | 90 | 10 | 1 | 512 |" in text
    names = sorted(p.name for p in written if p.suffix == ".png")
    assert names == [
        "churn-generated-10000.png",
        "curves-snapshots.png",
        "fidelity.png",
        "ratios-generated-100000.png",
    ]
    for png in written[1:]:
        assert png.read_bytes().startswith(PNG)
        assert f"]({png.relative_to(tmp_path)})" in text


def test_compare_shows_what_moved_past_its_noise(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _results(1.0).save(tmp_path / "old")
    _results(1.5).save(tmp_path / "new")  # earshot's cold: [1.0-1.1] then [1.5-1.65]
    assert compare.compare(tmp_path / "old", tmp_path / "new") == 0
    out = capsys.readouterr().out
    moved = [line for line in out.splitlines() if line.startswith("cold snapshot")]
    assert len(moved) == 2 and all("earshot" in line and "+50.0%" in line for line in moved)
    assert "nothing changed" not in out
    assert out.rstrip().endswith("2 figures moved past their noise")
    assert compare.compare(tmp_path / "old", tmp_path / "nowhere") == 1


def test_the_progress_line_says_what_runs_and_what_is_left() -> None:
    stream = io.StringIO()
    progress = Progress(10.0, stream)
    progress.begin("snapshots · 10,000 generated files", 4.0)
    progress.step("cold snapshot, earshot")
    progress.end()
    progress.begin("churn · 10,000 generated files", 6.0)
    lines = stream.getvalue().splitlines()
    # nothing done yet: nothing to scale by
    assert lines[1] == (
        "[0:00 elapsed, ? left,   0%] snapshots · 10,000 generated files · cold snapshot, earshot"
    )
    assert " 40%] churn · 10,000 generated files" in lines[2] and ", ~" in lines[2]


@pytest.mark.slow
def test_a_real_run_of_the_snapshot_figure_writes_every_figure_and_its_report(
    tmp_path: Path,
) -> None:
    out = tmp_path / "out"
    argv = [sys.executable, "-m", "benchmarks", "run", "--sizes", "300"]
    options = ["--only", "snapshots", "--out", str(out), "--work", str(tmp_path / "work")]
    options += ["--cache", str(tmp_path / "cache")]
    options += ["--earshot", str(Path(sys.executable).parent / "earshot")]
    proc = subprocess.run([*argv, *options], cwd=REPO, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads((out / "results.json").read_text())
    assert doc["errors"] == [] and doc["figures_done"] == ["snapshots:generated-300"]
    got = {(m["metric"], m["peer"]) for m in doc["measurements"]}
    metrics = [
        "cold_snapshot",
        "cold_snapshot_cpu",
        "store_cold",
        "nochange_snapshot",
        "snapshot_10_changed",
        "snapshot_1000_changed",
        "restore_10",
    ]
    peers = ["earshot", "shadow-git", "opencode", "git-tuned"]
    assert got == {(m, p) for m in metrics for p in peers}
    assert "· repeat 1/1: cold snapshot, earshot" in proc.stderr and "left" in proc.stderr
    assert (out / "RESULTS.md").read_text().count("| restore, 10 files differ |") == 2
    assert not (tmp_path / "work" / "generated-300").exists()  # scratch removed

    again = subprocess.run(
        [*argv, "200", "--resume", *options], cwd=REPO, capture_output=True, text=True, check=False
    )
    assert again.returncode == 0, again.stderr
    doc = json.loads((out / "results.json").read_text())
    assert doc["figures_done"] == ["snapshots:generated-300", "snapshots:generated-200"]
    assert len(doc["parts"]) == 2 and "300 generated files" not in again.stderr
    cold = [m for m in doc["measurements"] if m["metric"] == "cold_snapshot"]
    assert {m["tree"] for m in cold} == {"generated-300", "generated-200"}
    assert all(len(m["samples"]) == 1 for m in cold)  # the first sitting's kept, not re-run


def test_runs_made_in_parts_merge_into_one_and_a_figure_measured_twice_is_refused() -> None:
    snapshots, churn = _results(1.0), _results(1.0)
    snapshots.figures_done, churn.figures_done = ["snapshots:generated-10000"], ["churn:x"]
    churn.measurements = [m for m in churn.measurements if m.metric == "nochange_snapshot"]
    churn.trees = {"x": TreeInfo("x", "kernel", 1, 1, 1, "t")}
    merged = merge([snapshots, churn])
    assert merged.figures_done == ["snapshots:generated-10000", "churn:x"]
    assert set(merged.trees) == {"generated-10000", "generated-100000", "x"}
    assert len(merged.measurements) == len(snapshots.measurements) + 4
    assert len(merged.fidelity) == 4
    with pytest.raises(ValueError, match="measured in two runs: snapshots:generated-10000"):
        merge([snapshots, snapshots])
    elsewhere = _results(1.0)
    elsewhere.machine["hostname"], snapshots.machine["hostname"] = "a", "b"
    with pytest.raises(ValueError, match="different machines"):
        merge([snapshots, elsewhere])
    moved = _results(1.0)  # the same name on other hardware
    moved.machine["hostname"] = "b"
    moved.machine["cpu_model"], snapshots.machine["cpu_model"] = "AMD EPYC", "Intel Xeon"
    moved.figures_done = ["churn:y"]
    with pytest.raises(ValueError, match="different machines"):
        merge([snapshots, moved])


def test_a_restore_that_leaves_an_edit_behind_is_caught(tmp_path: Path) -> None:
    from benchmarks.suite import edits

    for i in range(20):
        (tmp_path / f"f{i}.txt").write_text(f"file {i}\n")
    pool = edits.candidates(tmp_path)
    assert pool == sorted(f"f{i}.txt" for i in range(20))
    before = edits.edit(tmp_path, pool, 3, seed=7)
    assert len(before) == 3
    with pytest.raises(AssertionError, match="left 3 files wrong"):
        edits.check_restored(tmp_path, before, "peer")
    for rel, data in before.items():
        (tmp_path / rel).write_bytes(data)
    edits.check_restored(tmp_path, before, "peer")  # put back: no complaint


def test_tree_makes_the_suites_tree_and_never_into_a_directory_that_exists(
    tmp_path: Path,
) -> None:
    argv = [sys.executable, "-m", "benchmarks", "tree", "generated-300", str(tmp_path / "t")]
    made = subprocess.run([*argv, "--describe"], cwd=REPO, capture_output=True, text=True)
    assert made.returncode == 0, made.stderr
    shown = json.loads(made.stdout)
    on_disk = [p for p in (tmp_path / "t").rglob("*") if not p.is_dir() or p.is_symlink()]
    assert shown["bytes"] > 0 and shown["gitignore_files"] >= 1
    assert len(on_disk) >= 300 and "text_files" in shown  # the generator's own counts too
    again = subprocess.run(argv, cwd=REPO, capture_output=True, text=True)
    assert again.returncode == 1 and "exists" in again.stderr
    unknown = [sys.executable, "-m", "benchmarks", "tree", "nope", str(tmp_path / "u")]
    bad = subprocess.run(unknown, cwd=REPO, capture_output=True, text=True)
    assert bad.returncode == 1 and not (tmp_path / "u").exists()


def test_the_headline_ratios_are_at_100k_when_a_larger_tree_was_run_too() -> None:
    from benchmarks.report.plots import headline_trees

    res = Results("full", {}, {})
    for key, files in (("generated-100000", 100_110), ("generated-300000", 300_331)):
        res.trees[key] = TreeInfo(key, "generated", files, 1, 1, "t")
    res.trees["kernel"] = TreeInfo("kernel", "kernel", 78_624, 1, 306, "t")
    assert headline_trees(res) == ["generated-100000", "kernel"]
    del res.trees["generated-100000"]
    assert headline_trees(res) == ["generated-300000", "kernel"]
