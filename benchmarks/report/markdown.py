"""RESULTS.md from a run's results.json: the targets, a table per figure and
tree, the fidelity table, the plots, and the machine, date and tree of each."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

from benchmarks.report import catalog
from benchmarks.suite.record import Measurement, Results, TreeInfo

SUBJECT = "earshot"


def fmt(value: float, unit: str) -> str:
    """Seconds as ms or s; bytes as KiB, MiB or GiB; anything else as it is."""
    if unit == "s":
        return f"{value * 1000:.1f} ms" if value < 0.1 else f"{value:.2f} s"
    if unit == "bytes":
        for size, name in ((2**30, "GiB"), (2**20, "MiB"), (2**10, "KiB")):
            if value >= size:
                return f"{value / size:,.1f} {name}"
        return f"{value:.0f} B"
    if unit == "MiB":
        return f"{value:,.1f} MiB"
    if float(value).is_integer():
        return f"{value:,.0f}"
    return f"{value:,.4g}"


def cell(m: Measurement) -> str:
    low, high = fmt(min(m.samples), m.unit), fmt(max(m.samples), m.unit)
    if low == high:
        return fmt(m.median, m.unit)
    return f"{fmt(m.median, m.unit)} ({low}-{high})"


def tree_line(info: TreeInfo) -> str:
    return (
        f"{info.files:,} files, {info.bytes / 2**20:,.0f} MiB, {info.gitignores} .gitignore "
        f"files; {info.source}"
    )


def tree_title(key: str, info: TreeInfo | None) -> str:
    if info and info.kind == "generated":
        return f"generated, {info.files:,} files"
    return key


def ratio(results: Results, m: Measurement, peer: str) -> float | None:
    """earshot's median over ``peer``'s, same figure, metric, tree and cache."""
    for other in results.measurements:
        if (other.figure, other.metric, other.tree, other.cache, other.peer) == (
            m.figure,
            m.metric,
            m.tree,
            m.cache,
            peer,
        ):
            return m.median / other.median if other.median else None
    return None


def group(results: Results) -> dict[tuple[str, str], dict[tuple[str, str], dict[str, Measurement]]]:
    """figure, tree -> (metric, cache) -> peer -> measurement."""
    out: dict[tuple[str, str], dict[tuple[str, str], dict[str, Measurement]]] = defaultdict(
        lambda: defaultdict(dict)
    )
    for m in results.measurements:
        out[(m.figure, m.tree)][(m.metric, m.cache)][m.peer] = m
    return out


def targets_table(results: Results) -> list[str]:
    rows = ["| figure | tree | earshot / peer | target | |", "|---|---|---|---|---|"]
    found = False
    for m in sorted(results.measurements, key=lambda m: (catalog.metric_rank(m.metric), m.tree)):
        spec = catalog.METRICS.get(m.metric)
        if spec is None or m.cache != "warm":
            continue
        bound = {SUBJECT: spec.target, catalog.DAEMON: spec.daemon_target}.get(m.peer)
        if bound is None:
            continue
        value = ratio(results, m, spec.target_peer)
        if value is None:
            continue
        found = True
        met = "met" if value <= bound else "**missed**"
        name = catalog.title(m.metric)
        if spec.daemon_target is not None and spec.target is not None:
            name += ", with the daemon" if m.peer == catalog.DAEMON else ", no daemon"
        rows.append(
            f"| {name} | {tree_title(m.tree, results.trees.get(m.tree))} "
            f"| {value:.2f} ({catalog.peer_label(spec.target_peer)}) | <= {bound} | {met} |"
        )
    return rows if found else []


def figure_tables(results: Results, titles: dict[str, str]) -> list[str]:
    lines: list[str] = []
    grouped = group(results)
    for figure in dict.fromkeys(m.figure for m in results.measurements):
        lines += ["", f"## {titles.get(figure, figure)}", ""]
        for (fig, tree), metrics in grouped.items():
            if fig != figure:
                continue
            info = results.trees.get(tree)
            peers = sorted({p for by in metrics.values() for p in by}, key=catalog.peer_rank)
            others = [p for p in peers if p not in (SUBJECT, catalog.DAEMON)]
            others = others if SUBJECT in peers else []
            # earshot with its daemon, against the peer its targets name
            daemon_vs = "shadow-git" if {catalog.DAEMON, "shadow-git"} <= set(peers) else None
            lines += [f"### {tree_title(tree, info)}", ""]
            if info:
                lines += [tree_line(info), ""]
            head = ["figure", *(catalog.peer_label(p) for p in peers)]
            head += [f"earshot / {catalog.peer_label(p)}" for p in others]
            if daemon_vs:
                daemon_label = catalog.peer_label(catalog.DAEMON)
                head.append(f"{daemon_label} / {catalog.peer_label(daemon_vs)}")
            lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
            for (metric, cache), by_peer in sorted(
                metrics.items(), key=lambda kv: (catalog.metric_rank(kv[0][0]), kv[0][1] != "warm")
            ):
                name = catalog.title(metric) + (", page cache dropped" if cache == "cold" else "")
                row = [name, *(cell(by_peer[p]) if p in by_peer else "-" for p in peers)]
                mine = by_peer.get(SUBJECT)
                for p in others:
                    value = ratio(results, mine, p) if mine else None
                    row.append(f"{value:.2f}" if value is not None else "-")
                if daemon_vs:
                    daemon = by_peer.get(catalog.DAEMON)
                    value = ratio(results, daemon, daemon_vs) if daemon else None
                    row.append(f"{value:.2f}" if value is not None else "-")
                lines.append("| " + " | ".join(row) + " |")
            notes = {m.note for by in metrics.values() for m in by.values() if m.note}
            lines += ["", *sorted(notes)] if notes else []
            lines.append("")
    return lines


def fidelity_table(results: Results) -> list[str]:
    if not results.fidelity:
        return []
    lines = [
        "",
        "## Undo fidelity: what each approach gives back after a bad agent run",
        "",
        "Each scripted run starts from the repository as it was made; then each peer undoes it",
        "its own way. *Changed*: files the run changed, deleted or created; *restored*: of",
        "those, the ones back as they were; *left wrong*: files not as they should be after the",
        "restore (content, mode, missing, or left behind); *person's lost*: files of the",
        "person's (edited or made by hand during the run) that the restore deleted or",
        "overwrote; *bytes lost*: content in no file of the tree and no object of its",
        'repository (benchmarks/README.md, "Undo fidelity").',
        "",
        "| tree | run | peer | changed | restored | left wrong | person's lost | bytes lost |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in results.fidelity:
        lines.append(
            f"| {row.tree} | {row.scenario} | {catalog.peer_label(row.peer)} | {row.changed:,} "
            f"| {row.restored:,} | {row.wrong:,} | {row.persons_lost:,} | {row.bytes_lost:,} |"
        )
    details = [
        f"- {r.scenario}, {catalog.peer_label(r.peer)}: {r.detail}"
        for r in results.fidelity
        if r.detail
    ]
    return lines + (["", *details] if details else [])


def machine_block(results: Results) -> list[str]:
    m = results.machine
    lines = ["", "## The machine", ""]
    lines += [f"- {key}: {value}" for key, value in m.items()]
    return lines


def render(results: Results, plots: list[Path], out: Path, titles: dict[str, str]) -> str:
    """The whole RESULTS.md."""
    m = results.machine
    lines = [
        "# Benchmark results",
        "",
        f"Made by `python -m benchmarks run` ({results.profile}), {results.started} to "
        f"{results.finished or 'cut short'}, on {m.get('nproc')} cores of "
        f"{m.get('cpu_model')}, {m.get('work_dir_fs')}; load average "
        f"{_load(m.get('loadavg_start'))} at the start, {_load(m.get('loadavg_end'))} at the end.",
        "Every figure: median (min-max) of its repeats; ratios are earshot's median over the",
        "peer's, on identical copies of the tree in the same run (below 1: earshot is faster",
        "or smaller). The page cache is warm unless a row says it was dropped.",
        "`python -m benchmarks report DIR` re-renders this file from results.json.",
    ]
    if len(results.parts) > 1:
        lines += ["", f"Made in {len(results.parts)} sittings (`--resume`):"]
        lines += [
            f"- {p['started']} to {p.get('finished') or 'cut short'}, load average "
            f"{_load(p.get('loadavg_start'))} to {_load(p.get('loadavg_end'))}: "
            f"{_options(p.get('args', {}))}"
            for p in results.parts
        ]
    headline = [p for p in plots if p.name.startswith("ratios-")]
    if headline:
        lines += ["", f"![earshot against each peer]({headline[0].relative_to(out)})"]
    targets = targets_table(results)
    if targets:
        lines += ["", "## Against the targets", "", *targets]
    lines += figure_tables(results, titles)
    lines += fidelity_table(results)
    others = [p for p in plots if p not in headline[:1]]
    if others:
        lines += ["", "## Plots", ""]
        lines += [f"![{p.stem}]({p.relative_to(out)})" for p in others]
    if results.errors:
        lines += ["", "## What failed", ""]
        lines += [f"- {e['figure']} on {e['tree']}: {e['message']}" for e in results.errors]
    lines += machine_block(results)
    return "\n".join(lines) + "\n"


def _options(args: dict[str, object]) -> str:
    keys = ("profile", "only", "sizes", "trees", "repeat")
    return ", ".join(f"{k} {args[k]}" for k in keys if args.get(k)) or "defaults"


def _load(value: object) -> str:
    if isinstance(value, list) and value:
        return f"{value[0]:.2f}"
    return "?"
