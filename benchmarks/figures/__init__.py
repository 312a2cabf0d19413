"""The suite's figures, by name: each module measures one family of figures.

A figure module holds ``FIGURE``, an object with ``name``, ``title``,
``applies(tree, plan)``, ``weight(tree, plan)`` and ``run(ctx, tree)``
(benchmarks/suite/runner.py ``Figure``). The order here is the run's order.
"""

from __future__ import annotations

from importlib import import_module

from benchmarks.suite.runner import Figure

MODULES = (
    # what the figures are: snapshots and stores, calls and undo,
    # hooks, the daemon, the session log, undo fidelity
    "snapshots",
    "churn",
    "calls",
    "hook_events",
    "daemon",
    "session_log",
    "fidelity",
    # what earlier issues measured, kept as figures of the suite
    "index_cost",
    "git_view",
    "linear",
    "client",
    "engine_watch",
    "chat",
    "hooks",
    "ui",
    "git_fingerprint",
    # what past kill -9 holds: the power-cut explorer's count
    "powercut",
    # sessions at once through the daemon, for long: undos, memory, leftovers
    "soak",
    # damaged input fed to every decoder: the fuzz tests' long profile
    "fuzz",
    # the S3 remote: cold push, incremental push, clone, against restic
    "remote",
)


def registry() -> dict[str, Figure]:
    """Every figure, in run order."""
    figures: dict[str, Figure] = {}
    for module in MODULES:
        figure: Figure = import_module(f"benchmarks.figures.{module}").FIGURE
        figures[figure.name] = figure
    return figures
