"""What each metric is called, and the target it is held to.

A target is a bound on the ratio of earshot's median to a peer's median on
the same tree in the same run (below 1: earshot is faster or smaller). A
figure that misses its target is shown as missed, never left out.
"""

from __future__ import annotations

from dataclasses import dataclass

PEER_ORDER = (
    "earshot",
    "earshot-daemon",
    "earshot-base",
    "shadow-git",
    "opencode",
    "git-tuned",
    "file-backups",
    "git",
    "cp-a",
    "claude-code",
    "hooks-true",
    "python-floor",
    "restic",
)
PEER_LABELS = {
    "earshot": "earshot",
    "earshot-daemon": "earshot, daemon",
    "earshot-base": "earshot, base (--base)",
    "shadow-git": "shadow git",
    "opencode": "OpenCode's git",
    "git-tuned": "git, tuned",
    "file-backups": "file backups",
    "git": "git ls-files",
    "cp-a": "cp -a",
    "claude-code": "Claude Code, no hooks",
    "hooks-true": "hooks running true",
    "python-floor": "python -c pass",
    "restic": "restic",
}
DAEMON = "earshot-daemon"  # earshot with its daemon: the subject of a daemon_target


@dataclass(frozen=True)
class Metric:
    title: str
    target: float | None = None  # max ratio earshot / target_peer
    target_peer: str = "shadow-git"
    daemon_target: float | None = None  # max ratio earshot-daemon / target_peer


METRICS: dict[str, Metric] = {
    "cold_snapshot": Metric("cold snapshot (fresh store)", 0.25),
    "cold_snapshot_cpu": Metric("cold snapshot, CPU time (user + system)"),
    "store_cold": Metric("store on disk after the cold snapshot", 0.7),
    "nochange_snapshot": Metric("snapshot, nothing changed", 1.0),
    "snapshot_10_changed": Metric("snapshot, 10 files changed", 1.0),
    "snapshot_1000_changed": Metric("snapshot, 1,000 files changed", 1.0),
    "restore_10": Metric("restore, 10 files differ", 1.0),
    "store_after_churn": Metric("store after the checkpoints of churn"),
    "gc": Metric("gc after the churn, every checkpoint kept"),
    "store_after_gc": Metric("store after the churn and gc"),
    "index_nochange": Metric("snapshot in a git repository, nothing changed"),
    "index_10_changed": Metric("snapshot in a git repository, 10 files changed"),
    "index_ignored_nochange": Metric("the same with 200 ignored *.o files, nothing changed"),
    "index_rewritten": Metric("the same after git's index was rewritten (touch)"),
    "paths": Metric("paths counted (files and symlinks)"),
    "tracked_ignored": Metric("tracked files a pattern ignores"),
    "kept_ignored": Metric("ignored files whose content earshot keeps besides"),
    "only_earshot": Metric("paths only earshot records (each a defect)"),
    "only_git": Metric("paths only git lists (each a defect)"),
    "kept_not_ignored": Metric("kept paths git does not ignore (each a defect)"),
    **{
        f"exec_{n}_writes": Metric(f"exec batch of {n:,} writes")
        for n in (500, 1_000, 2_000, 2_500, 5_000, 10_000)
    },
    **{
        f"undo_{n}_deletes": Metric(f"undo of a {n:,}-file delete")
        for n in (1_000, 2_000, 4_000, 12_500, 25_000, 50_000)
    },
    "python_floor": Metric("python3 -c 'import socket, json, subprocess' (the floor)"),
    "client_imports": Metric("python3 -c 'import earshot.cli.entry'"),
    "watch_status": Metric("earshot watch --status (in-process)"),
    "hosted_log": Metric("earshot log (hosted, reads)"),
    "hosted_write": Metric("earshot write F (hosted, a batch)"),
    "hosted_bash": Metric("earshot bash 'true' (hosted, a batch)"),
    "watcher_start": Metric("the in-process watcher's start"),
    "engine_write_file": Metric("overhead of a write_file batch, in-process watcher", 1.0),
    "engine_bash_true": Metric("overhead of bash 'true', in-process watcher", 1.0),
    "engine_bash_10": Metric("overhead of a bash writing 10 files, in-process watcher", 1.0),
    "chat_reply": Metric("earshot chat: a reply and its batch (slope)", 1.0),
    "chat_session": Metric("earshot chat: the short session, whole"),
    "hook_call": Metric("a Bash call: what the hooks add (no hooks: the call)", 1.0),
    "ui_session_doc": Metric("GET /api/sessions/ID"),
    "ui_first_render": Metric("the page's first render, to the last prompt"),
    "ui_live": Metric("a CLI batch shown live, from its command's end"),
    "git_fingerprint_big": Metric("git fingerprint, big repository (in-process)"),
    "git_fingerprint_big_stamps": Metric("entries stamped, big repository"),
    "git_fingerprint_small": Metric("git fingerprint, small repository (in-process)"),
    "git_fingerprint_small_stamps": Metric("entries stamped, small repository"),
    "powercut_states": Metric("power cuts: distinct crash states checked"),
    "powercut_violations": Metric("power cuts: violations"),
    "powercut_seconds": Metric("power cuts: the explorer's whole run"),
    "fuzz_examples": Metric("fuzzing: damaged inputs fed to the decoders (examples run)"),
    "fuzz_failures": Metric("fuzzing: failed fuzz tests"),
    "fuzz_seconds": Metric("fuzzing: the fuzz tests' whole run"),
    "soak_batches": Metric("soak: batches run by the sessions at once"),
    "soak_undos": Metric("soak: undos checked against the tree before their batches"),
    "soak_violations": Metric("soak: violations (an undo not exact, a leak, a leftover)"),
    "soak_seconds": Metric("soak: the whole run"),
    "soak_rss_start": Metric("soak: the daemon's RSS when it started"),
    "soak_rss_warm": Metric("soak: the daemon's RSS after warm-up"),
    "soak_rss_end": Metric("soak: the daemon's RSS at the end"),
    "soak_rss_growth": Metric("soak: the daemon's RSS growth from warm-up to the end"),
    "call_bash_true": Metric("earshot bash 'true'", 1.0, daemon_target=0.10),
    "call_write_one": Metric("a one-file earshot write", 1.0, daemon_target=0.10),
    "call_exec_ten": Metric("an exec batch of 10 writes", 1.0, daemon_target=0.10),
    "call_undo_ten": Metric("undo of a 10-file batch", 1.0, daemon_target=0.10),
    "event_call": Metric("PreToolUse + PostToolUse of one Bash call", daemon_target=0.10),
    "event_open": Metric("PreToolUse, a response's first (opens the batch)"),
    "event_pre": Metric("PreToolUse of a Bash call, a later one"),
    "event_post": Metric("PostToolUse of a Bash call"),
    "event_read": Metric("PreToolUse of a read-only tool"),
    "event_batch_end": Metric("PostToolBatch (closes the batch)"),
    "event_prompt": Metric("UserPromptSubmit"),
    "daemon_start": Metric("daemon start (earshot watch, until every watch is placed)"),
    "daemon_rss": Metric("daemon memory (RSS), after the calls"),
    "daemon_watches": Metric("inotify watches the daemon holds"),
    "session_load_context": Metric("session log: load + context"),
    "session_load": Metric("session log: load"),
    "session_context": Metric("session log: context"),
    "remote_push_cold": Metric("cold push of the tree (fresh remote; restic: backup)"),
    "remote_push_cold_cpu": Metric("cold push, CPU time (user + system)"),
    "remote_stored_cold": Metric("stored on the server after the cold push"),
    "remote_requests_cold": Metric("requests to the server, cold push"),
    "remote_push_10": Metric("incremental push of a 10-file batch"),
    "remote_added_10": Metric("added on the server by the incremental push"),
    "remote_requests_10": Metric("requests to the server, incremental push"),
    "remote_clone": Metric("clone into an empty directory (restic: restore), checked"),
    "remote_requests_clone": Metric("requests to the server, clone"),
    "remote_clone_files": Metric("files and links the clone holds, each checked"),
    "remote_clone_defects": Metric("clone: paths wrong, extra or missing (each a defect)"),
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
