"""A project: one root and its store, with the operations the CLI offers.

``Project`` ties the pieces together: scanning into snapshots, listing and
resolving them, restoring, and the intents that make an interrupted restore
(or any other mutating operation) visible to, and finished by, the next
command.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, replace
from pathlib import Path

from . import faults, schema
from .apply import Applier, RestoreResult, remove_temp_files, verify_plan
from .backend import WriteBatch
from .diff import Change, diff_trees
from .digest import Digest, check_prefix, short, to_hex
from .entrykey import counts_as_file
from .errors import EarshotError
from .fsck import FsckReport, check_store
from .gc import GcReport, collect_garbage
from .intents import Held, Intents, end_intent
from .keep import KeepIgnored, Lift
from .logs import get_logger
from .lookup import lookup
from .objects import ObjectStore, ObjectWriter
from .paths import checkpoints_dir, data_home, real_root
from .progress import QUIET, Progress
from .recording import (
    ScanOptions,
    ScanReport,
    max_file_size_from_env,
    touch_marker,
)
from .restage import relative_path, restage_paths
from .restore import (
    DeleteRule,
    RestorePlan,
    delete_everything,
    keep_everything,
    plan_restore,
)
from .scan import Scanner
from .snapshot import Snapshot
from .stats import StoreStats, store_stats
from .tree import Kind, Unrecorded

log = get_logger("earshot.cas")


#: Why an existence-only file was not read that a restore records first, forced,
#: before writing over it (a file over the size limit is never written over).
READ_WHEN_FORCED = frozenset({Unrecorded.IGNORED, Unrecorded.EXCLUDED, Unrecorded.BUILD})


class NoSuchSnapshot(EarshotError):
    """No snapshot matches the id given."""

    def __init__(self, text: str) -> None:
        super().__init__(f"no snapshot {text!r} in this project (see 'earshot snapshots')")
        self.text = text


class AmbiguousId(EarshotError):
    """A prefix that matches several snapshots."""

    def __init__(self, text: str, count: int) -> None:
        super().__init__(f"{text!r} matches {count} snapshots; give more hex digits")
        self.text = text


class NotADirectory(EarshotError):
    """The root given is not a directory."""

    def __init__(self, root: str) -> None:
        super().__init__(f"{root} is not a directory")


@dataclass(frozen=True, slots=True)
class Recorded:
    """The result of recording the root."""

    digest: Digest
    snapshot: Snapshot
    report: ScanReport
    #: True when nothing changed since the previous snapshot, which is reused.
    reused: bool


@dataclass(frozen=True, slots=True)
class Restored:
    """The result of a restore: the plan, what was done, and the state before it."""

    plan: RestorePlan
    result: RestoreResult | None
    #: The state recorded before; None for a dry run, which records nothing.
    before: Recorded | None


def _count_base(writer: ObjectWriter, base: Digest) -> tuple[int, int]:
    """Files and bytes under ``base``, as recorded with every snapshot of that tree.

    A scoped restage must not walk the tree to keep its counts: every
    snapshot's tree has its counts in the ``counts`` table. Only a tree no
    snapshot recorded (none of earshot's callers) is counted from the store.
    """
    counted = schema.get_counts(writer.batch, base)
    if counted is not None:
        return counted
    log.debug("counting a tree no snapshot recorded", tree=short(base))
    files = size = 0
    stack = [base]
    while stack:
        for entry in writer.read_tree(stack.pop()):
            if entry.kind is Kind.DIR and entry.digest is not None:
                stack.append(entry.digest)
            elif counts_as_file(entry):
                files += 1
                size += entry.size
    return files, size


class Project:
    """One root and the store that records it."""

    def __init__(
        self,
        root: str | os.PathLike[str],
        home: Path | None = None,
        extra_tables: tuple[str, ...] = (),
        options: ScanOptions | None = None,
    ) -> None:
        real = real_root(root)
        if not real.is_dir():
            raise NotADirectory(str(root))
        self.root = real
        self.home = home or data_home()
        self.store_dir = checkpoints_dir(real, self.home)
        self.store = ObjectStore.open(self.store_dir, schema.CORE_TABLES + extra_tables)
        self.intents = Intents(self.store.backend, self.store_dir / "intents")
        self.options = options or ScanOptions(
            max_file_size=max_file_size_from_env(), keep=KeepIgnored.from_env()
        )
        home_real = os.path.realpath(self.home)
        if home_real == str(real) or home_real.startswith(str(real) + os.sep):
            # The data dir lies inside the root: never record it. When it *is*
            # the root, what earshot owns there is what to leave out.
            own = (
                [home_real]
                if home_real != str(real)
                else [
                    os.path.join(home_real, "checkpoints"),
                    os.path.join(home_real, "sessions"),
                ]
            )
            self.options = replace(self.options, exclude_dirs=frozenset(own))

    def close(self) -> None:
        self.store.close()

    def __enter__(self) -> Project:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- recording --------------------------------------------------------

    def scan(self, writer: ObjectWriter, progress: Progress = QUIET) -> tuple[Digest, ScanReport]:
        """Record the whole root into ``writer``; return its tree and the report."""
        progress.stage("scanning")
        scanner = Scanner(self.root, writer, self.options, progress)
        tree = scanner.scan_root(self.store_dir / "scan.marker")
        return tree, scanner.report

    def snapshot(
        self, note: str = "", session: str | None = None, progress: Progress = QUIET
    ) -> Recorded:
        """Record the root as a snapshot (a full restage), reusing the last if unchanged."""
        return self.record(None, note=note, session=session, progress=progress)

    def restage(self, paths: Iterable[str], note: str = "", session: str | None = None) -> Recorded:
        """Record only the named paths on top of the head snapshot (a scoped restage)."""
        return self.record(list(paths), note=note, session=session)

    def record(
        self,
        paths: list[str] | None,
        base: Digest | None = None,
        note: str = "",
        session: str | None = None,
        listed: bool = True,
        progress: Progress = QUIET,
        also: Callable[[WriteBatch], None] | None = None,
        forced: Collection[str] = (),
        lifted: Collection[str] = (),
    ) -> Recorded:
        """Record the root: all of it (``paths`` None), or the named paths on ``base``.

        ``base`` is a tree (default: the head snapshot's). With no base at all
        a scoped restage has nothing to build on and records everything.
        ``listed`` snapshots appear in ``snapshots()``; the agent layer keeps
        its own per batch. The duration of a full restage is kept in the
        store: the snapshot policy budgets by it. ``also`` adds writes to the
        transaction that commits the snapshot (an intent's end, say).
        ``progress`` hears of the walk, or of each path a scoped restage reads.
        ``forced`` paths are recorded whatever the ignore rules and the size
        limit say (what an agent's write_file or edit named, what an undo or
        restore is about to change): after a full scan they are
        restaged on top of it; in a scoped restage they are among the paths.
        ``lifted`` paths (a destructive command's targets; a scoped restage
        only) are recorded with all below them past the limits, within
        ``keep.Lift``'s budget.
        """
        rels = None if paths is None else [relative_path(str(self.root), p) for p in paths]
        force = frozenset(relative_path(str(self.root), p) for p in forced)
        with self.store.writer() as writer:
            if base is None and rels is not None:
                head = self.head(writer)
                base = writer.read_snapshot(head).tree if head is not None else None
            if rels is None or base is None:
                start = time.perf_counter_ns()
                tree, report = self.scan(writer, progress)
                faults.point("full-walk-done")  # read, not yet committed: a test edits here
                elapsed = time.perf_counter_ns() - start
                schema.put_full_cost(writer.batch, elapsed)
                schema.put_linked(writer.batch, report.linked)
                if force:
                    tree, extra = self._restage(
                        writer, tree, sorted(force), force, counted=False, progress=progress
                    )
                    report.files += extra.files
                    report.content_bytes += extra.content_bytes
            else:
                lift = frozenset(relative_path(str(self.root), p) for p in lifted)
                paths = sorted(set(rels) | force | lift)
                tree, report = self._restage(writer, base, paths, force, lift, progress=progress)
                known = schema.get_linked(writer.batch)
                if known is not None and not set(report.linked) <= set(known):
                    schema.put_linked(writer.batch, known + report.linked)
            if also is not None:
                also(writer.batch)
            recorded = self.commit_tree(writer, tree, report, note, session, listed)
        log.info(
            "recorded",
            scope="full" if rels is None or base is None else f"{len(rels)} paths",
            snapshot=short(recorded.digest),
            reused=recorded.reused,
            files=report.files,
            files_read=report.files_read,
            bytes_read=report.bytes_read,
            unrecorded=len(report.unrecorded),
        )
        return recorded

    def _restage(
        self,
        writer: ObjectWriter,
        base: Digest,
        rels: list[str],
        forced: frozenset[str],
        lifted: frozenset[str] = frozenset(),
        counted: bool = True,
        progress: Progress = QUIET,
    ) -> tuple[Digest, ScanReport]:
        """A scoped restage of ``rels`` on ``base``; with ``counted``, counts made whole."""
        scanner = Scanner(self.root, writer, self.options)
        scanner.unlimited = forced
        if lifted:
            scanner.lifted, scanner.lift = lifted, Lift.from_env(self.options.keep)
        scanner.trust_before_ns = touch_marker(self.store_dir / "scan.marker")
        scanner.trust_before_ns -= self.options.racy_margin_ns
        base_files, base_bytes = _count_base(writer, base) if counted else (0, 0)
        tree, gone_files, gone_bytes = restage_paths(scanner, base, rels, forced, progress)
        report = scanner.report
        report.files += base_files - gone_files
        report.content_bytes += base_bytes - gone_bytes
        return tree, report

    def linked_paths(self) -> list[str] | None:
        """Recorded files with other hard links, as the last full scan (and the
        scoped restages since) found them; None before any full scan."""
        with self.store.backend.read() as view:
            return schema.get_linked(view)

    def full_restage_cost_ns(self) -> int | None:
        """How long the last full restage of this root took, if one was made."""
        with self.store.backend.read() as view:
            return schema.get_full_cost(view)

    def commit_tree(
        self,
        writer: ObjectWriter,
        tree: Digest,
        report: ScanReport,
        note: str = "",
        session: str | None = None,
        listed: bool = True,
    ) -> Recorded:
        """Make a recorded tree a snapshot, unless the head already has that tree."""
        head = self.head(writer)
        if head is not None:
            head_snap = writer.read_snapshot(head)
            if head_snap.tree == tree and (not listed or self._is_listed(writer, head, head_snap)):
                return Recorded(head, head_snap, report, reused=True)
        snap = Snapshot(
            tree=tree,
            time_ns=time.time_ns(),
            root=str(self.root),
            note=note,
            session=session,
            files=report.files,
            content_bytes=report.content_bytes,
            unrecorded=len(report.unrecorded),
        )
        digest = writer.put_snapshot(snap)
        writer.finish()
        if listed:
            schema.list_snapshot(writer.batch, digest, snap.time_ns)
        schema.put_head(writer.batch, digest)
        schema.put_counts(writer.batch, tree, snap.files, snap.content_bytes)
        return Recorded(digest, snap, report, reused=False)

    @staticmethod
    def _is_listed(writer: ObjectWriter, digest: Digest, snap: Snapshot) -> bool:
        return schema.is_listed(writer.batch, digest, snap.time_ns)

    # -- listing and naming -------------------------------------------------

    @staticmethod
    def head(view: ObjectWriter | None = None) -> Digest | None:
        return schema.get_head(view.batch) if view is not None else None

    def head_snapshot(self) -> Digest | None:
        with self.store.backend.read() as view:
            return schema.get_head(view)

    def snapshots(self) -> list[tuple[Digest, Snapshot]]:
        """Every listed snapshot, newest first."""
        with self.store.reader() as reader:
            listed = [d for _, d in schema.listed_snapshots(reader.view)]
            out = [(d, reader.read_snapshot(d)) for d in listed]
        out.reverse()
        return out

    def resolve(self, text: str) -> Digest:
        """A snapshot from its full id or a unique prefix of at least 8 hex digits."""
        prefix = check_prefix(text)
        with self.store.backend.read() as view:
            matches = {d for _, d in schema.listed_snapshots(view) if d.hex().startswith(prefix)}
        if not matches:
            raise NoSuchSnapshot(text)
        if len(matches) > 1:
            raise AmbiguousId(text, len(matches))
        return Digest(matches.pop())

    def read_snapshot(self, digest: Digest) -> Snapshot:
        with self.store.reader() as reader:
            return reader.read_snapshot(digest)

    def forget(self, digests: list[Digest]) -> int:
        """Unlist snapshots (their objects go at the next gc); return how many."""
        wanted = set(digests)
        with self.store.writer() as writer:
            gone = [(t, d) for t, d in schema.listed_snapshots(writer.batch) if d in wanted]
            for time_ns, digest in gone:
                schema.unlist_snapshot(writer.batch, digest, time_ns)
            if self.head(writer) in wanted:
                remaining = [d for _, d in schema.listed_snapshots(writer.batch)]
                schema.put_head(writer.batch, remaining[-1] if remaining else None)
        return len(gone)

    def gc(
        self,
        extra_roots: Callable[[], Iterable[Digest]] | None = None,
        compact: bool = False,
        progress: Progress = QUIET,
        extra_blobs: Callable[[], Iterable[Digest]] = tuple,
    ) -> GcReport:
        """Collect everything no listed snapshot (or ``extra_roots()``) reaches,
        and no blob ``extra_blobs()`` names.

        All are read once the store is held alone (``collect_garbage``).
        """

        def keep() -> list[Digest]:
            extra = list(extra_roots()) if extra_roots is not None else []
            return [d for d, _ in self.snapshots()] + extra

        return collect_garbage(
            self.store, keep, compact=compact, progress=progress, keep_blobs=extra_blobs
        )

    def fsck(self, progress: Progress = QUIET) -> FsckReport:
        return check_store(self.store, progress)

    def stats(self) -> StoreStats:
        return store_stats(self.store)

    def current_tree(self, progress: Progress = QUIET) -> Digest:
        """The root as it is now, recorded as objects but not as a snapshot.

        For looking (diff, dry runs): the head and the snapshot list stay as
        they were.
        """
        with self.store.writer() as writer:
            tree, _report = self.scan(writer, progress)
        return tree

    def diff(self, old: Digest, new: Digest | None = None) -> list[Change]:
        """Changes from snapshot ``old`` to ``new`` (default: the root as it is now)."""
        current = self.current_tree() if new is None else self.read_snapshot(new).tree
        with self.store.reader() as reader:
            return list(diff_trees(reader, reader.read_snapshot(old).tree, current))

    # -- restoring ----------------------------------------------------------

    def restore(
        self,
        target: Digest,
        may_delete: DeleteRule = keep_everything,
        dry_run: bool = False,
        progress: Progress = QUIET,
        note: str | None = None,
        *,
        before: Recorded | None = None,
    ) -> Restored:
        """Bring the root to ``target``; record the state before, so it can be undone.

        ``before``: the current state, when the caller has just recorded it
        (a watcher's scoped restage); else a full walk records it here.
        A dry run plans against the root as it is and records no snapshot.
        After a real restore the head is the state it left, recorded by a
        scoped restage of what it touched. An intent (kind ``restore``) is
        committed before the tree is touched and ended with that record: a
        restore cut off at any instant is finished by ``finish_restore``.
        """
        with self.store.reader() as reader:
            target_snap = reader.read_snapshot(target)
        if dry_run:
            current = self.current_tree(progress)
            with self.store.reader() as reader:
                plan = plan_restore(reader, current, target_snap.tree, may_delete, str(self.root))
            return Restored(plan, None, None)
        if before is None:
            before = self.snapshot(note or f"before restore to {short(target)}", progress=progress)
        return self._restore_from(target, target_snap, before, may_delete, None, progress)

    def _unrecorded_targets(self, plan: RestorePlan, before: Recorded) -> list[str]:
        """The paths ``plan`` writes, or leaves alone only for want of their content,
        whose content ``before``'s tree does not hold: on disk but not in it, or
        in it as an existence-only file a forced record reads (ignored over the
        limits, excluded, build output: the rules changed since the target)."""
        hidden = []
        with self.store.reader() as reader:
            for path, _ in plan.writes:
                if os.path.lexists(os.path.join(self.root, path)) and (
                    lookup(reader, before.snapshot.tree, path) is None
                ):
                    hidden.append(path)
            for path, _why in plan.skipped:
                entry = lookup(reader, before.snapshot.tree, path)
                if (
                    entry is not None
                    and entry.kind is Kind.UNRECORDED
                    and entry.reason in READ_WHEN_FORCED
                    and not (entry.ident is not None and entry.ident.is_dir)
                ):
                    hidden.append(path)
        return hidden

    def finish_restore(self, held: Held, progress: Progress = QUIET) -> Restored:
        """Finish a restore whose process died (an intent of kind ``restore``, claimed).

        Its temp files are removed; then the restore runs again from the
        tree as it is now, which is recorded first (listed: it may hold edits
        made since the kill), and ends the same intent.
        """
        doc = held.intent.doc
        remove_temp_files(str(self.root), list(doc.get("dirs", [])), held.id)
        target = Digest(bytes.fromhex(str(doc["target"])))
        rule = delete_everything if doc.get("force") else keep_everything
        with self.store.reader() as reader:
            target_snap = reader.read_snapshot(target)
        before = self.snapshot(
            f"before finishing an interrupted restore to {short(target)}", progress=progress
        )
        return self._restore_from(target, target_snap, before, rule, held, progress)

    def _restore_from(
        self,
        target: Digest,
        target_snap: Snapshot,
        before: Recorded,
        may_delete: DeleteRule,
        held: Held | None,
        progress: Progress = QUIET,
    ) -> Restored:
        with self.store.reader() as reader:
            plan = plan_restore(
                reader, before.snapshot.tree, target_snap.tree, may_delete, str(self.root)
            )
        hidden = self._unrecorded_targets(plan, before)
        if hidden:
            # Paths the restore writes that are on disk but not in the state
            # before (ignored now, say a .env added to .gitignore since): record
            # them too, so the state before holds what the restore overwrites.
            first = before
            before = self.record(
                hidden,
                base=before.snapshot.tree,
                note=before.snapshot.note,
                forced=hidden,
            )
            if not first.reused and first.digest != before.digest:
                self.forget([first.digest])
            with self.store.reader() as reader:
                plan = plan_restore(
                    reader, before.snapshot.tree, target_snap.tree, may_delete, str(self.root)
                )
        with self.store.reader() as reader:
            if plan.empty:
                if held is not None:
                    self.intents.drop(held)
                return Restored(plan, RestoreResult(), before)
            verify_plan(reader, plan)  # a corrupt store stops here, before the intent
        dirs = sorted({p.rpartition("/")[0] for p, _ in plan.writes + plan.mkdirs})
        doc = {
            "target": to_hex(target),
            "force": may_delete is delete_everything,
            "before": to_hex(before.digest),
            "dirs": dirs,
        }
        if held is None:
            held = self.intents.begin("restore", doc)
        try:
            log.info(
                "restoring",
                target=short(target),
                writes=len(plan.writes),
                deletes=len(plan.deletes),
                mkdirs=len(plan.mkdirs),
                rmdirs=len(plan.rmdirs),
                skipped=len(plan.skipped),
            )
            with self.store.reader() as reader:
                applier = Applier(str(self.root), reader, held.id, progress)
                result = applier.apply(plan, verified=True, label="restoring")
            touched = [p for p, _ in plan.writes + plan.mkdirs + plan.deletes + plan.chmods]
            touched += plan.rmdirs
            intent = held.intent
            self.record(
                sorted(set(touched)),
                base=before.snapshot.tree,
                listed=False,
                also=lambda txn: end_intent(txn, intent),
                progress=progress,
            )
        except BaseException:
            held.close()  # the intent stays: the next command finishes the restore
            raise
        held.release()
        return Restored(plan, result, before)
