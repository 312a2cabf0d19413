"""The plots, from results.json alone (matplotlib, the Agg backend: no display).

* ``curves-FIGURE.png``: log-log, each metric against the generated tree's
  file count, a line per peer, min-max as error bars;
* ``ratios-TREE.png``: earshot's median over each peer's, per metric, at
  100,000 files (or the largest generated tree run) and on the kernel tree;
* ``churn-TREE.png``: the store's size over the checkpoints of churn;
* ``fidelity.png``: what each peer left wrong or lost, per bad run.

Each carries the tree, the machine and the date at its foot.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.figure import Figure

from benchmarks.report import catalog
from benchmarks.report.markdown import SUBJECT, fmt, ratio
from benchmarks.suite.record import FidelityRow, Measurement, Results, Series

COLOURS = {
    "earshot": "#1b7f3b",
    "earshot-daemon": "#5fbf6f",
    "shadow-git": "#c0392b",
    "opencode": "#e67e22",
    "git-tuned": "#8e44ad",
    "file-backups": "#2c7fb8",
    "python-floor": "#888888",
    "restic": "#7f6a00",
}
NOT_PEERS = (catalog.DAEMON, "python-floor")  # earshot itself, and a floor: no ratio bars


def _foot(fig: Figure, results: Results, what: str) -> None:
    m = results.machine
    fig.text(
        0.01,
        0.005,
        f"{what} · {results.started[:10]} · {m.get('nproc')} cores, {m.get('cpu_model')}, "
        f"{m.get('work_dir_fs')} · {results.profile} run",
        fontsize=7,
        color="#555555",
    )


def _save(fig: Figure, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _scale(m: Measurement) -> tuple[float, str]:
    return (1 / 2**20, "MiB") if m.unit == "bytes" else (1.0, m.unit)


def curves(results: Results, out: Path) -> list[Path]:
    generated = {k: t.files for k, t in results.trees.items() if t.kind == "generated"}
    # figure -> metric -> peer -> [(files, measurement)]
    table: dict[str, dict[str, dict[str, list[tuple[int, Measurement]]]]] = defaultdict(
        lambda: defaultdict(lambda: defaultdict(list))
    )
    for m in results.measurements:
        # a log axis has no room for a slope that came out at or below zero
        if m.tree in generated and m.cache == "warm" and min(m.samples) > 0:
            table[m.figure][m.metric][m.peer].append((generated[m.tree], m))
    written = []
    for figure, metrics in table.items():
        shown = {k: v for k, v in metrics.items() if any(len(pts) > 1 for pts in v.values())}
        if not shown:
            continue
        cols = min(3, len(shown))
        rows = -(-len(shown) // cols)
        fig, axes = plt.subplots(rows, cols, figsize=(5 * cols, 3.8 * rows), squeeze=False)
        for ax, (metric, peers) in zip(
            axes.flat,
            sorted(shown.items(), key=lambda kv: catalog.metric_rank(kv[0])),
            strict=False,
        ):
            for peer, pts in sorted(peers.items(), key=lambda kv: catalog.peer_rank(kv[0])):
                pts.sort()
                factor, unit = _scale(pts[0][1])
                xs = [n for n, _ in pts]
                ys = [m.median * factor for _, m in pts]
                lo = [(m.median - min(m.samples)) * factor for _, m in pts]
                hi = [(max(m.samples) - m.median) * factor for _, m in pts]
                ax.errorbar(
                    xs,
                    ys,
                    yerr=[lo, hi],
                    marker="o",
                    capsize=3,
                    label=catalog.peer_label(peer),
                    color=COLOURS.get(peer),
                )
                ax.set_ylabel(unit)
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.set_xlabel("files in the tree")
            ax.set_title(catalog.title(metric), fontsize=10)
            ax.grid(True, which="both", alpha=0.3)
        for ax in list(axes.flat)[len(shown) :]:
            ax.axis("off")
        axes.flat[0].legend(fontsize=8)
        fig.suptitle(f"{figure}: against file count (generated trees)")
        fig.tight_layout(rect=(0, 0.03, 1, 0.97))
        _foot(fig, results, "generated trees")
        written.append(_save(fig, out / "plots" / f"curves-{figure}.png"))
    return written


#: What the ratio plot shows: what a person choosing a checkpointer asks first.
HEADLINE_FIGURES = ("snapshots", "churn", "calls", "hook_events")


def headline_trees(results: Results) -> list[str]:
    """100k generated (or the largest generated tree run), and the kernel tree."""
    # By the size asked for (the key), not the files made: 100,000 asked are 100,110 made.
    generated = sorted((t.files, k) for k, t in results.trees.items() if t.kind == "generated")
    keys = [k for _, k in generated if k == "generated-100000"] or [k for _, k in generated[-1:]]
    return keys + [k for k in results.trees if k == "kernel"]


def ratio_bars(results: Results, out: Path) -> list[Path]:
    written = []
    for tree in headline_trees(results):
        peers = sorted(
            {
                m.peer
                for m in results.measurements
                if m.tree == tree
                and m.peer not in (SUBJECT, *NOT_PEERS)
                and m.peer in catalog.PEER_ORDER
                and m.figure in HEADLINE_FIGURES
            },
            key=catalog.peer_rank,
        )
        by_metric: dict[tuple[str, str], dict[str, float | None]] = {}
        for m in results.measurements:
            if m.tree != tree or m.cache != "warm" or m.peer not in (SUBJECT, catalog.DAEMON):
                continue
            if m.figure not in HEADLINE_FIGURES:
                continue
            found = by_metric.setdefault((m.figure, m.metric), {})
            if m.peer == SUBJECT:
                found.update({p: ratio(results, m, p) for p in peers})
            else:  # earshot with its daemon, against the peer its target names
                found[catalog.DAEMON] = ratio(results, m, "shadow-git")
        rows = sorted(
            ((metric, r) for (_, metric), r in by_metric.items() if any(r.values())),
            key=lambda row: catalog.metric_rank(row[0]),
        )
        if not rows:
            continue
        if any(r.get(catalog.DAEMON) for _, r in rows):
            peers.append(catalog.DAEMON)
        fig, ax = plt.subplots(figsize=(10, 0.45 * len(rows) * max(1, len(peers) / 2) + 1.8))
        height = 0.8 / max(len(peers), 1)
        for i, peer in enumerate(peers):
            ys = [j + i * height for j in range(len(rows))]
            values = [r.get(peer) or 0 for _, r in rows]
            ax.barh(
                ys,
                values,
                height=height,
                label=(
                    "earshot, daemon / shadow git"
                    if peer == catalog.DAEMON
                    else f"earshot / {catalog.peer_label(peer)}"
                ),
                color=COLOURS.get(peer),
            )
        ax.axvline(1.0, color="black", linewidth=1)
        ax.set_yticks([j + 0.4 - height / 2 for j in range(len(rows))])
        ax.set_yticklabels([catalog.title(metric) for metric, _ in rows], fontsize=8)
        ax.invert_yaxis()
        ax.set_xscale("log")
        ax.set_xlabel("ratio of medians, earshot / peer (left of 1: earshot is faster or smaller)")
        info = results.trees[tree]
        ax.set_title(f"earshot against each peer: {tree} ({info.files:,} files)")
        ax.legend(fontsize=8, loc="lower right")
        fig.tight_layout(rect=(0, 0.03, 1, 1))
        _foot(fig, results, tree)
        written.append(_save(fig, out / "plots" / f"ratios-{tree}.png"))
    return written


def churn(results: Results, out: Path) -> list[Path]:
    by_tree: dict[str, list[Series]] = defaultdict(list)
    for s in results.series:
        if s.metric == "store_bytes":
            by_tree[s.tree].append(s)
    written = []
    for tree, series in by_tree.items():
        fig, ax = plt.subplots(figsize=(7, 4))
        for s in sorted(series, key=lambda s: catalog.peer_rank(s.peer)):
            ax.plot(
                s.x,
                [y / 2**20 for y in s.y],
                label=catalog.peer_label(s.peer),
                color=COLOURS.get(s.peer),
            )
        ax.set_xlabel("checkpoint (10 files edited and one added each)")
        ax.set_ylabel("store on disk, MiB")
        ax.set_title(f"The store over checkpoints of churn: {tree}")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
        fig.tight_layout(rect=(0, 0.03, 1, 1))
        _foot(fig, results, tree)
        written.append(_save(fig, out / "plots" / f"churn-{tree}.png"))
    return written


def fidelity(results: Results, out: Path) -> list[Path]:
    rows = results.fidelity
    if not rows:
        return []
    scenarios = list(dict.fromkeys(r.scenario for r in rows))
    peers = sorted({r.peer for r in rows}, key=catalog.peer_rank)
    grid = {(r.scenario, r.peer): r for r in rows}
    fig, ax = plt.subplots(figsize=(1.9 * len(peers) + 3, 0.7 * len(scenarios) + 1.6))

    def shade(r: FidelityRow | None) -> int:
        """0 all back; 1 files left wrong, nothing gone; 2 the person's work or content gone."""
        if r is None:
            return 0
        return 2 if r.persons_lost or r.bytes_lost else min(r.wrong, 1)

    ax.imshow(
        [[shade(grid.get((s, p))) for p in peers] for s in scenarios],
        cmap=matplotlib.colors.ListedColormap(["#d8f0d8", "#f6e3a1", "#f2a6a0"]),
        vmin=0,
        vmax=2,
        aspect="auto",
    )
    for i, s in enumerate(scenarios):
        for j, p in enumerate(peers):
            r = grid.get((s, p))
            text = (
                "-"
                if r is None
                else f"{r.wrong} wrong\n{r.persons_lost} person's lost\n"
                f"{fmt(r.bytes_lost, 'bytes')} gone"
            )
            ax.text(j, i, text, ha="center", va="center", fontsize=7)
    ax.set_xticks(range(len(peers)), [catalog.peer_label(p) for p in peers], fontsize=8)
    ax.set_yticks(range(len(scenarios)), scenarios, fontsize=8)
    ax.set_title("After its own restore: files left wrong, the person's files lost, content gone")
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    trees = ", ".join(dict.fromkeys(r.tree for r in rows))
    _foot(fig, results, trees)
    return [_save(fig, out / "plots" / "fidelity.png")]


def render(results: Results, out: Path) -> list[Path]:
    """Every plot the results allow; the paths written."""
    return [
        *ratio_bars(results, out),
        *curves(results, out),
        *churn(results, out),
        *fidelity(results, out),
    ]
