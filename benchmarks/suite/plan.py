"""What a run measures: its trees, repeats and figures.

``--quick`` is the smoke test CI runs: the 10,000-file generated tree, one
repeat, 10 checkpoints of churn; it proves every figure runs and the report
builds, and its timings mean little. ``--full`` makes the published figures:
the generated tree at 10k, 100k, 300k and 1M files and the four real trees,
five repeats. ``--only``, ``--sizes`` and ``--trees`` narrow either: the
sizes alone or the real trees alone, both when both are named.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from benchmarks.suite.trees import TreeSpec, parse, parse_size

QUICK_SIZES = (10_000,)
FULL_SIZES = (10_000, 100_000, 300_000, 1_000_000)
REAL_TREES = ("kernel", "node_modules", "venv", "binary")


@dataclass
class Plan:
    """One run's shape."""

    profile: str  # "quick" or "full"
    trees: list[TreeSpec]
    figures: list[str]
    repeat: int  # timed repeats per figure
    cold_repeat: int  # cold snapshots per repeat (each into a fresh store)
    churn: int  # checkpoints in the churn figure
    drop_caches: bool  # also time cold-cache figures where the cache can be dropped
    args: dict[str, object] = field(default_factory=dict)

    @property
    def quick(self) -> bool:
        return self.profile == "quick"


def make(
    profile: str,
    figures: list[str],
    only: list[str] | None = None,
    sizes: list[str] | None = None,
    trees: list[str] | None = None,
    repeat: int | None = None,
    drop_caches: bool = True,
) -> Plan:
    """The plan for ``profile``, narrowed by the options."""
    quick = profile == "quick"
    if only:
        unknown = sorted(set(only) - set(figures))
        if unknown:
            raise ValueError(f"no figure {', '.join(unknown)}; there are: {', '.join(figures)}")
        figures = [f for f in figures if f in only]
    if sizes is not None:
        size_list = [parse_size(s) for s in sizes]
    else:
        size_list = list(QUICK_SIZES if quick else FULL_SIZES)
    specs = [parse(f"generated-{n}") for n in size_list]
    if trees is not None:
        specs = [parse(t) for t in trees] if sizes is None else specs + [parse(t) for t in trees]
    elif sizes is None and not quick:
        specs += [parse(t) for t in REAL_TREES]  # the sizes alone, when they are named
    return Plan(
        profile=profile,
        trees=specs,
        figures=figures,
        repeat=repeat or (1 if quick else 5),
        cold_repeat=1,  # one per repeat: a cold git snapshot of 100k files takes ~25 s
        churn=10 if quick else 100,
        drop_caches=drop_caches and not quick,
    )
