"""What each metric is called, and the target it is held to.

A target is a bound on the ratio of earshot's median to a peer's median on
the same tree in the same run (below 1: earshot is faster or smaller). A
figure that misses its target is shown as missed, never left out.
"""

from __future__ import annotations

from dataclasses import dataclass

PEER_ORDER = ("earshot", "earshot-daemon", "shadow-git", "opencode", "git-tuned", "file-backups")
PEER_LABELS = {
    "earshot": "earshot",
    "earshot-daemon": "earshot, daemon",
    "shadow-git": "shadow git",
    "opencode": "OpenCode's git",
    "git-tuned": "git, tuned",
    "file-backups": "file backups",
}


@dataclass(frozen=True)
class Metric:
    title: str
    target: float | None = None  # max ratio earshot / target_peer
    target_peer: str = "shadow-git"


METRICS: dict[str, Metric] = {
    "cold_snapshot": Metric("cold snapshot (fresh store)", 0.25),
    "store_cold": Metric("store on disk after the cold snapshot", 0.7),
    "nochange_snapshot": Metric("snapshot, nothing changed", 1.0),
    "snapshot_10_changed": Metric("snapshot, 10 files changed", 1.0),
    "snapshot_1000_changed": Metric("snapshot, 1,000 files changed", 1.0),
    "restore_10": Metric("restore, 10 files differ", 1.0),
    "store_after_churn": Metric("store after the checkpoints of churn"),
    "gc": Metric("gc after the churn, every checkpoint kept"),
    "store_after_gc": Metric("store after the churn and gc"),
}


def title(metric: str) -> str:
    return METRICS[metric].title if metric in METRICS else metric.replace("_", " ")


def peer_label(peer: str) -> str:
    return PEER_LABELS.get(peer, peer)


def peer_rank(peer: str) -> int:
    return PEER_ORDER.index(peer) if peer in PEER_ORDER else len(PEER_ORDER)


def metric_rank(metric: str) -> int:
    keys = list(METRICS)
    return keys.index(metric) if metric in keys else len(keys)
