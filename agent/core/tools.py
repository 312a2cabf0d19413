"""The tools a batch runs, one kind at a time: reads, runs of writes, commands.

Each returns the call's result and adds the ledger lines it made; what is
restaged before and after follows the policy (``policy.Restager``). A write
or edit writes through a temp file in the target's directory (tagged with
the batch's intent, so a killed batch's temp files are found) and notes the
digest it wrote: recovery proves by it that the call made the file.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import replace

from earshot.agent.core.batch import BY_RESTAGE, Change
from earshot.agent.core.calls import (
    Bash,
    Call,
    CallResult,
    EditFile,
    ReadFile,
    WriteFile,
    describe,
    edit,
    error_text,
)
from earshot.agent.core.command import CommandRunner, run_command, shell_argv
from earshot.agent.core.external_calls import relative_targets
from earshot.agent.core.files import prepare_call, read_text_file, write_text_file
from earshot.agent.core.ledger import state_at, tree_changes
from earshot.agent.core.policy import Restager
from earshot.cas import faults
from earshot.cas.apply import sync_file_system_at
from earshot.cas.digest import blob_digest
from earshot.cas.errors import EarshotError
from earshot.cas.intents import Held
from earshot.cas.logs import get_logger
from earshot.cas.project import Project
from earshot.cas.restage import relative_path

log = get_logger("earshot.agent")

_NOT_UNDOABLE = "{0}: written, but not recorded ({1}): undo cannot take this write back"
_OLD_NOT_HELD = (
    "{0}: written over content earshot did not hold ({1}): undo cannot bring the old content back"
)

Classifier = Callable[[str, Callable[[str], bool]], bool]


def default_classifier(command: str, exists: Callable[[str], bool]) -> bool:
    # The shell grammar (~30 ms to load) loads only when a command is judged.
    from earshot.agent.shell.destructive import classify

    return classify(command, exists).destructive


class Tools:
    """Runs the calls of a batch in one root, under one policy."""

    def __init__(
        self,
        project: Project,
        policy: Restager,
        classifier: Classifier,
        runner: CommandRunner = run_command,
    ) -> None:
        self.project = project
        self.root = str(project.root)
        self.policy = policy
        self.classifier = classifier
        self.runner = runner

    def write_run(
        self, run: list[tuple[int, Call | CallResult]], held: Held, ledger: list[Change]
    ) -> tuple[list[CallResult], dict[str, int]]:
        """Write and edit calls in a row (reads between them too): restaged once after.

        ``run`` holds prepared calls, or the results of calls refused already.
        Returns the results and the paths written, with the call that wrote each.
        """
        pre = self.policy.belief.tree
        results: list[CallResult] = []
        wrote: dict[str, int] = {}
        for index, call in run:
            if isinstance(call, CallResult):
                results.append(call)
                continue
            tool = describe(call)["tool"]
            if isinstance(call, ReadFile):
                results.append(self.read(index, call))
                continue
            assert isinstance(call, WriteFile | EditFile)
            try:
                rel = relative_path(self.root, call.path)
                if isinstance(call, EditFile):
                    old = read_text_file(self.root, call.path).decode("utf-8", "surrogateescape")
                    new = edit(old, call.old, call.new, call.all)
                    data = new.encode("utf-8", "surrogateescape")
                else:
                    data = call.content
                write_text_file(self.root, rel, data, temp_tag=held.id)
            except (OSError, EarshotError, ValueError) as exc:
                results.append(CallResult(index, tool, False, error=error_text(exc)))
                continue
            held.note(call=index, path=rel, digest=blob_digest(data).hex())
            faults.point("batch-write")
            wrote[rel] = index
            results.append(CallResult(index, tool, True))
        if not wrote:
            return results, wrote
        # Durable before anything records them: a power cut must not leave a
        # batch saying a file holds bytes that never reached the disk, or its
        # temp file beside it never renamed in. One syncfs for the run.
        sync_file_system_at(self.root)
        self.policy.after_writes(set(wrote))
        post = self.policy.belief.tree
        for rel, index in wrote.items():
            before, after = state_at(self.project, pre, rel), state_at(self.project, post, rel)
            if before != after:
                ledger.append(Change(rel, before, after, index))
            warning = None
            if before is not None and not before.recorded:
                warning = _OLD_NOT_HELD.format(rel, before.reason)
            elif after is not None and not after.recorded:
                warning = _NOT_UNDOABLE.format(rel, after.reason)
            if warning is not None:
                at = next(i for i, r in enumerate(results) if r.index == index)
                results[at] = replace(results[at], warning=warning)
        return results, wrote

    def bash(
        self,
        index: int,
        command: str,
        *,
        destructive: Callable[[], bool],
        ledger: list[Change],
        held: Held,
        capture: bool,
    ) -> tuple[CallResult, bool, int | None]:
        """Run a command; returns its result, whether it was folded, and a signal received."""
        pre = self.policy.belief
        try:
            ran = self.runner(
                shell_argv(command),
                self.root,
                capture,
                on_start=lambda pgid, start: held.note(call=index, pgid=pgid, start=start),
            )
        except OSError as exc:  # the shell itself could not start
            return CallResult(index, "bash", False, error=error_text(exc)), False, None
        result = CallResult(index, "bash", True, output=ran.output, exit_code=ran.returncode)
        faults.point("batch-command")
        recorded = self.policy.after_command(
            destructive=destructive, signalled=ran.interrupted_by is not None
        )
        if not recorded:
            log.info("folded", command=command)
            return result, True, None
        assert pre.tree is not None
        by = index if pre.exact else BY_RESTAGE
        left = self.policy.belief.tree or pre.tree
        ledger.extend(tree_changes(self.project, pre.tree, left, by=by))
        # The tree this call left, for whoever records the batch if this
        # process dies before it does (recovery attributes by it).
        held.note(call=index, tree=left.hex(), by=by)
        return result, False, ran.interrupted_by

    def prepare(self, index: int, call: Call) -> Call | CallResult:
        """The call with its path resolved and checked, or the result refusing it.

        An in-root link is followed to the file really written; ``.git``, the
        data dir and NUL bytes are refused before anything is restaged.
        """
        try:
            return prepare_call(self.root, call, self.project.options.exclude_dirs)
        except (OSError, EarshotError, ValueError) as exc:
            return CallResult(index, describe(call)["tool"], False, error=error_text(exc))

    def read(self, index: int, call: ReadFile) -> CallResult:
        try:
            text = read_text_file(self.root, call.path).decode("utf-8", "replace")
            return CallResult(index, "read_file", True, output=text)
        except (OSError, EarshotError, ValueError) as exc:
            return CallResult(index, "read_file", False, error=error_text(exc))

    def judge(self, call: Call) -> Callable[[], bool]:
        """Whether ``call`` may destroy data, asked only when the answer matters.

        With a gap-free watcher every call gets the same scoped restages, so the
        shell grammar is not even loaded.
        """
        verdict: list[bool] = []

        def destructive() -> bool:
            if not verdict:
                verdict.append(
                    isinstance(call, Bash) and self.classifier(call.command, self.exists)
                )
            return verdict[0]

        return destructive

    def exists(self, path: str) -> bool:
        return os.path.lexists(os.path.join(self.root, path))

    def doomed(self, call: Call) -> Callable[[], list[str]]:
        """The paths a command names to delete (root-relative; "" for the root),
        asked only when the answer matters, and parsed only when its text holds
        a deleting word (``shell.targets``)."""

        def targets() -> list[str]:
            if not isinstance(call, Bash):
                return []
            from earshot.agent.shell.targets import may_name_targets

            if not may_name_targets(call.command):
                return []
            from earshot.agent.shell.destructive import classify

            out: dict[str, None] = {}
            for target in classify(call.command, self.exists).targets:
                if target == ".":
                    out[""] = None
                    continue
                # As written, and where an in-root link leads: ``rm -rf link/``
                # deletes what the link's directory holds.
                for path in relative_targets(self.root, (target,)):
                    out[path] = None
            return list(out)

        return targets


def write_target(root: str, call: Call | CallResult) -> str | None:
    """The root-relative path a write or edit call names (None if it names none)."""
    if not isinstance(call, WriteFile | EditFile):
        return None
    try:
        return relative_path(root, call.path)
    except (EarshotError, ValueError):
        return None


def write_run_from(calls: Sequence[Call], start: int) -> list[tuple[int, Call]]:
    """The write/edit calls from ``start`` on, with the reads between them, up to a command."""
    run: list[tuple[int, Call]] = []
    for index in range(start, len(calls)):
        call = calls[index]
        if isinstance(call, Bash):
            break
        run.append((index, call))
    while run and isinstance(run[-1][1], ReadFile):
        run.pop()  # trailing reads run after the run's restage, as ever
    return run
