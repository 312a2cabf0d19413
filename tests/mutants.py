"""Mutation check of the safety rules: break one check at a time, run the tests that should fail.

Each mutant replaces a line of a safety check (undo's "made by a call" rule,
what undo does not hold, ambiguity, the order of early flushes, sealed
records, intents, the command's process group, ...) and runs the tests named
for it; a mutant the tests let through is a check no test guards.

    python tests/mutants.py            # all; KILLED, SURVIVED, MISSING or NO TEST RAN each
    python tests/mutants.py 3 7        # some
    python tests/mutants.py --shard 2/8  # every 8th, from the 3rd (CI: one shard a commit)

Exit 1 when any mutant survived, is missing (the code it breaks moved, or
its text is found twice) or ran no test (its selection matches none): a
check no test guards, or a mutant that no longer tests anything, both fail
the run.

It edits the source in place and puts it back; run it on a clean checkout,
with nothing else importing earshot from it meanwhile (CI's benchmark smoke
test, which runs alongside, imports a copy).
"""

import argparse
import pathlib
import shlex
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
MUTANTS = [
    (
        "agent/core/reversal.py",
        "if not step.by_call and rev.deletions_need_call:",
        "if False:",
        "tests/agent/core/test_crash.py -k no_note",
    ),
    (
        "agent/core/reversal.py",
        "if step.restore_to is not None and not step.restore_to.recorded:",
        "if False:",
        "tests/agent/core/test_fidelity_undo.py",
    ),
    (
        "agent/core/reversal.py",
        "if current is not None and not current.recorded:",
        "if False:",
        "tests/agent/core/test_fidelity_undo.py",
    ),
    (
        "agent/core/reversal.py",
        "elif step.ambiguous and not force:",
        "elif False:",
        "tests/agent/core/test_fidelity_undo.py -k another_session",
    ),
    (
        "agent/core/records.py",
        "    return beside\n",
        "    return False\n",
        "tests/agent/core/test_fidelity_undo.py -k another_session",
    ),
    (
        "agent/core/interrupted.py",
        "            return proof[0]\n",
        "            return BY_RESTAGE\n",
        "tests/agent/core/test_crash.py -k killed_exec",
    ),
    (
        "agent/core/interrupted.py",
        "        return BY_RESTAGE\n\n\ndef record_interrupted",
        "        return 0\n\n\ndef record_interrupted",
        "tests/agent/core/test_crash.py -k no_note",
    ),
    (
        "cas/objects.py",
        "self.batch.flush(schema.OBJECT_TABLES)\n            faults",
        "self.batch.flush()\n            faults",
        "tests/agent/core/test_crash.py -k test_1_a_kill",
    ),
    (
        "cas/sealed.py",
        "    if value[2 : 2 + _MAC_SIZE] != _mac(key, payload):\n        raise CorruptRecord(what)",
        "    pass",
        "tests/agent/core/test_crash.py -k test_5",
    ),
    (
        "agent/core/undo.py",
        "def refuse_if_unrecorded(engine: Engine) -> None:\n",
        "def refuse_if_unrecorded(engine: Engine) -> None:\n    return\n",
        "tests/agent/core/test_crash.py -k test_2",
    ),
    (
        "cas/restage.py",
        "verdict = 0 if rel in forced.paths else scanner.judge(rules, rel, is_dir)",
        "verdict = scanner.judge(rules, rel, is_dir)",
        "tests/cli/test_ignored_undo.py -k 'cache_or or agents_write_of_ignored_build'",
    ),
    (
        "agent/core/commit.py",
        "            end_intent(txn, held.intent)\n",
        "            pass\n",
        "tests/agent/core/test_crash.py -k test_3",
    ),
    (
        "agent/core/command.py",
        "        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)",
        "        pass",
        "tests/agent/core/test_crash.py -k whose_earshot",
    ),
    (
        "agent/core/recovery.py",
        '            stop_orphaned_group(int(note["pgid"]), note.get("start"))',
        "            pass",
        "tests/agent/core/test_crash.py -k whose_earshot",
    ),
    (
        "agent/core/undo.py",
        "marks=_marks(rev, history, impact),",
        "marks=None,",
        "tests/agent/core/test_undo.py",
    ),
    (
        "agent/core/reversal.py",
        "impact.keep(step.path, NOT_BY_A_CALL)",
        "impact.keep(step.path, NOT_BY_A_CALL, final=False)",
        "tests/agent/core/test_crash_harness.py tests/agent/core/test_crash.py -k no_note",
    ),
    (
        "cas/project.py",
        "        hidden = self._unrecorded_targets(plan, before)\n",
        "        hidden = []\n",
        "tests/cli/test_cli_restore.py -k ignored_since",
    ),
    (
        "agent/core/reversal.py",
        '            note="after undo",\n            listed=False,\n            forced=touched,\n',
        '            note="after undo",\n            listed=False,\n',
        "tests/agent/core/test_fidelity_undo.py -k hand_edit",
    ),
    (
        "cas/scan.py",
        "        if st.st_size > self.options.max_file_size and rel not in self.unlimited:",
        "        if st.st_size > self.options.max_file_size:",
        "tests/agent/core/test_fidelity_undo.py -k size_limit",
    ),
    (
        "cas/objects.py",
        "            try:\n                self.read_tree(digest)\n                return digest",
        "            try:\n                return digest",
        "tests/cas/test_objects.py -k damaged_copy",
    ),
    (
        "agent/core/undo.py",
        "                if path not in planned and is_dir(reader, now.snapshot.tree, path):",
        "                if False:",
        "tests/agent/core/test_crash.py -k emptied",
    ),
    (
        "agent/core/undo.py",
        "    if damaged:  # it may be a batch of this session: whose, no one can tell",
        "    if False:",
        "tests/agent/core/test_crash.py -k damaged_intent",
    ),
    (
        "cas/recording.py",
        "    return name.startswith(TEMP_PREFIX) and _TEMP_NAME.fullmatch(name) is not None",
        "    return name.startswith(TEMP_PREFIX)",
        "tests/cas/test_scan.py -k temp_files",
    ),
    (
        "agent/watch/daemon.py",
        "    return int(pid) if uid == os.getuid() else None",
        "    return int(pid)",
        "tests/cli/test_hosted.py -k peer_check",
    ),
    # What git ignores (issue: ignored files, changed rules, moved directories).
    (
        "agent/core/ledger.py",
        "                if old_side and before is None:",
        "                if False:",
        "tests/cli/test_ignored_undo.py -k shows_a_cache",
    ),
    (
        "agent/core/moves.py",
        "        if source is not None:\n            out[path] = source",
        "        if False:\n            out[path] = source",
        "tests/cli/test_ignored_undo.py -k moved_directory_with_ignored",
    ),
    (
        "agent/core/reversal.py",
        "if entry.kind is not Kind.DIR and ancestor not in becoming:",
        "if entry.kind is not Kind.DIR:",
        "tests/cli/test_ignored_undo.py -k replaced_by_a_file_or_link",
    ),
    (
        "agent/core/coverage.py",
        "    return out\n\n\n_CONTROL",
        "    return []\n\n\n_CONTROL",
        "tests/agent/core/test_coverage.py",
    ),
    (
        "agent/watch/watcher.py",
        "        if skipped(name):\n            return\n        # An ignored name",
        "        if skipped(name) or here.rules.excludes(rel, is_dir):\n            return\n"
        "        # An ignored name",
        "tests/cli/test_vouched.py -k hand_edit",
    ),
    (
        "agent/watch/gitwatch.py",
        "        for path in sorted(now ^ before):",
        "        for path in sorted(now ^ now):",
        "tests/agent/watch/test_watcher.py -k index_starts",
    ),
    (
        "agent/watch/client.py",
        'if reply.get("keep") != KeepIgnored.from_env().describe():',
        "if False:",
        "tests/cli/test_vouched.py -k other_limits",
    ),
    (
        "agent/core/policy.py",
        "        if not unheld:\n            return rec",
        "        if True:\n            return rec",
        "tests/cli/test_ignored_undo.py -k recorded_first",
    ),
    (
        "agent/core/watched.py",
        "            if call.command is not None and may_name_targets(call.command):",
        "            if False:",
        "tests/cli/test_hooks.py -k read_first",
    ),
    (
        "cas/restore.py",
        "        if rules.excludes(path, cur.kind is Kind.DIR):",
        "        if rules.is_ignored(path, cur.kind is Kind.DIR):",
        "tests/cli/test_cli_restore.py -k git_tracks_though",
    ),
    (
        "cas/scan.py",
        "if not keep.enabled or rules.mode in (SPARSE, LISTED) or size > keep.max_file:",
        "if True:",
        "tests/cli/test_ignored_undo.py -k script_deletes",
    ),
    (
        "cas/scan.py",
        "            return self._existence(rel, st, Unrecorded.EXCLUDED)",
        "            return None",
        "tests/cli/test_ignored_undo.py -k cannot_take_back",
    ),
    (
        "agent/core/undo.py",
        "{p for p, _ in impact.kept if p not in impact.final}",
        "{p for p, _ in impact.kept}",
        "tests/cli/test_ignored_undo.py -k cannot_empty",
    ),
    # Found by attacking the first round: listed directories, moves, budgets.
    (
        "cas/entrykey.py",
        "        ident = Ident(key[5], key[3], on_dir) if key[5] else None",
        "        ident = Ident(key[5], 0 if on_dir else key[3], on_dir) if key[5] else None",
        "tests/cas/test_keep.py -k identity_holds",
    ),
    (
        "cas/scan.py",
        "            and self._listing is None  # a listed directory keeps no content",
        "",
        "tests/cas/test_keep.py -k outgrows",
    ),
    (
        "cas/scan.py",
        "            return self._existence(rel, st, why)",
        "            return None",
        "tests/cas/test_keep.py -k within_the_budget_and",
    ),
    (
        "agent/core/reversal.py",
        "            self._keep_what_a_conflict_needs(rev, plan, impact)",
        "            pass",
        "tests/cli/test_ignored_undo.py -k one_half_of_a_move",
    ),
    (
        "agent/core/moves.py",
        "    return (st.st_ino, st.st_mtime_ns, is_dir, 0 if is_dir else st.st_size)",
        "    return None",
        "tests/cli/test_ignored_undo.py -k moved_out_of_a_directory",
    ),
    (
        "agent/core/undo.py",
        "            replace(c, moved=moved[c.path]) if c.path in moved else c",
        "            c",
        "tests/cli/test_ignored_undo.py -k recorded_name_is_moved_back",
    ),
    # Appliers check before they write (an edit made while undo applies).
    (
        "cas/apply.py",
        "            if not self._still_replaces(path, plan):",
        "            if False:",
        "tests/cli/test_apply_races.py -k edited_while_undo",
    ),
    (
        "cas/apply.py",
        "            return _lstat(self.handles, path) is None",
        "            return True",
        "tests/cli/test_apply_races.py -k created_where",
    ),
    # Found again by identity: content held since, moves then changes (attack, second round).
    (
        "agent/core/moves.py",
        "            and still_there(root, there, before)",
        "            and True",
        "tests/cli/test_ignored_undo.py -k changed_in_one_batch",
    ),
    (
        "agent/core/commit.py",
        "        if line.path in known:",
        "        if False:",
        "tests/cli/test_ignored_undo.py -k later_batch_deleted",
    ),
    (
        "agent/core/reversal.py",
        "if was is not None and current is not None and current.kind is Kind.FILE:",
        "if False:",
        "tests/cli/test_ignored_undo.py -k moved_and_changed_in_one_batch",
    ),
    (
        "agent/core/moves.py",
        "        and still_there(root, path, expect)",
        "        and True",
        "tests/cli/test_ignored_undo.py -k size_limit_then_edited",
    ),
    (
        "agent/core/reversal.py",
        "                        plan.write(step.path, _entry(step.path, step.restore_to), None)",
        "                        pass",
        "tests/cli/test_ignored_undo.py -k onto_a_held_name",
    ),
    (
        "cas/restage.py",
        "        if below in (KEPT, LISTED) and rules.mode is None:",
        "        if False:",
        "tests/cli/test_ignored_undo.py -k falls_within",
    ),
    # One user, one daemon: the client's trust checks, the host's groups check.
    (
        "cli/trust.py",
        "    if uid != os.geteuid():",
        "    if False:",
        "'tests/cli/test_hosted.py::test_a_daemon_of_another_user_is_sent_nothing_and_the_call_runs_here"
        "[socket served by another user]'",
    ),
    (
        "cli/trust.py",
        "    if st.st_uid not in (uid, 0):",
        "    if False:",
        "'tests/cli/test_hosted.py::test_a_daemon_of_another_user_is_sent_nothing_and_the_call_runs_here"
        "[home of another user]'",
    ),
    (
        "cli/trust.py",
        "    if st.st_mode & 0o002 or (st.st_mode & 0o020 and st.st_gid != os.getegid()):",
        "    if False:",
        "tests/cli/test_hosted.py -k world_writable",
    ),
    (
        "cli/daemon.py",
        "    if egid != os.getegid() or groups != set(os.getgroups()):",
        "    if False:",
        "tests/cli/test_hosted.py -k other_groups",
    ),
    (
        "agent/watch/client.py",
        "            if protocol.peer_uid(sock) != os.geteuid():",
        "            if False:",
        "tests/cli/test_hosted.py -k full_cli_asks",
    ),
    (
        "agent/core/reversal.py",
        "                        and current.digest not in brought_back",
        "                        and current.digest is not None",
        "tests/cli/test_ignored_undo.py -k out_of_a_cache",
    ),
    (
        "agent/core/outside.py",
        "if old == found.snapshot.tree or others_running(self.project, session, None):",
        "if old == found.snapshot.tree:",
        "tests/cli/test_outside.py -k another_session",
    ),
    (
        "agent/core/outside.py",
        "if beside or others_running(self.project, session, None):",
        "if others_running(self.project, session, None):",
        "tests/cli/test_outside.py -k between_two_calls",
    ),
    (
        "agent/core/outside.py",
        "if beside or others_running(self.project, session, None):",
        "if beside:",
        "tests/cli/test_outside.py",
    ),
    (
        "agent/core/vouched.py",
        "    return seen | set(linked) | mapped\n",
        "    return seen | set(linked)\n",
        "tests/cli/test_vouched.py -k mapping",
    ),
    (
        "agent/core/external.py",
        "    if caller_gone():",
        "    if False:",
        "tests/cli/test_hosted.py -k restages",
    ),
    (
        "agent/core/removal.py",
        "        if ident in busy:\n            raise SessionInUse(ident)",
        "        if False:\n            raise SessionInUse(ident)",
        "tests/cli/test_sessions_rm.py -k open_batch",
    ),
    (
        "agent/core/removal.py",
        "        if any(not isinstance(e.body, UserMessage) for e in entries):",
        "        if False:",
        "tests/cli/test_chat_terminal.py",
    ),
    (
        "agent/core/removal.py",
        "        if has_batches(view, session_id):\n            return False",
        "        if False:\n            return False",
        "tests/cli/test_chat_print.py tests/cli/test_chat_terminal.py",
    ),
    (
        "agent/core/removal.py",
        "    if session_id in busy_sessions(project):\n        return False",
        "    if False:\n        return False",
        "tests/cli/test_chat_terminal.py -k running_elsewhere",
    ),
    (
        "agent/core/sessions.py",
        "        named = [t - 1 for b in batches if b.seq > cut for t in b.targets]",
        "        named = []",
        "tests/cli/test_outside.py -k pruning",
    ),
    (
        "agent/core/sessions.py",
        "    old = [b.seq for b in batches[:-1] if b.time_ns < before_ns]",
        "    old = [b.seq for b in batches if b.time_ns < before_ns]",
        "tests/cli/test_outside.py -k gc_keeps",
    ),
    (
        "cli/cmd_maintenance.py",
        '        if pid.isdigit() and not Path(f"/proc/{pid}").exists():',
        "        if pid.isdigit():",
        "tests/cli/test_purge.py -k killed",
    ),
    (
        "cli/cmd_install.py",
        '        if why is not None:\n            fail(f"--command {program} {why}',
        '        if False:\n            fail(f"--command {program} {why}',
        "tests/cli/test_install_safety.py -k refuses",
    ),
    (
        "agent/hooks/codex_config.py",
        "            if tomllib.loads(out) == expected:",
        "            if True:",
        "tests/cli/test_install_safety.py -k valid_toml",
    ),
    (
        "cli/settings_file.py",
        "            elif is_project and not spec[1]:",
        "            elif False:",
        "tests/cli/test_settings_file.py -k may_not",
    ),
    (
        "cli/settings_file.py",
        "        if is_project and os.stat(path).st_uid != os.geteuid():",
        "        if False:",
        "tests/cli/test_settings_file.py -k another_user",
    ),
    (
        "cli/cmd_hook.py",
        "    if broken:  # nothing recorded",
        "    if False:  # nothing recorded",
        "tests/cli/test_settings_file.py -k hook",
    ),
    (
        "agent/core/removal.py",
        "        if _held_open(project, ident):",
        "        if False:",
        "tests/cli/test_sessions_rm.py -k open_in_a_chat",
    ),
    (
        "agent/hooks/codex_config.py",
        "    if project is not None and project_level(plain, project) is not None:",
        "    if False:",
        "tests/cli/test_install_safety.py -k trust_level",
    ),
    (
        "agent/hooks/probe.py",
        "            os.killpg(proc.pid, signal.SIGKILL)",
        "            pass",
        "tests/cli/test_install_safety.py -k hangs",
    ),
    # earshot ui: the guard, the preview that must still hold, the turn stopped
    # first, one action at a time, the code option hidden, the live look.
    (
        "cli/ui/guard.py",
        "if host not in self.hosts:",
        "if False:",
        "tests/cli/test_ui_guard.py -k another_host",
    ),
    (
        "cli/ui/guard.py",
        "if not any(self._matches(t) for t in (given_query, given_header, given_cookie)):",
        "if False:",
        "tests/cli/test_ui_guard.py -k without_the_token",
    ),
    (
        "cli/ui/guard.py",
        "if origin not in self.origins:",
        "if False:",
        "tests/cli/test_ui_guard.py -k 'cross_origin or without_an_origin'",
    ),
    (
        "cli/ui/guard.py",
        "if not self._matches(given_header):",
        "if False:",
        "tests/cli/test_ui_guard.py -k cookie_alone",
    ),
    (
        "cli/ui/actions.py",
        "if any(now[key] != shown.get(key) for key in now if key not in _OF_THE_DEED):",
        "if False:",
        "tests/cli/test_ui_page.py -k changed_since",
    ),
    (
        "cli/ui/actions.py",
        "if not self.composer.stop(session, STOP_WAIT_S):",
        "if False:",
        "tests/cli/test_ui_page.py -k stops_a_running_turn",
    ),
    (
        "cli/ui/actions.py",
        "if self.composer.running(session):",
        "if False:",
        "tests/cli/test_ui_page.py -k refused_while_the_pages_turn",
    ),
    (
        "cli/ui/actions.py",
        "if session in self._acting:",
        "if False:",
        "tests/cli/test_ui_actions.py",
    ),
    (
        "cli/ui/actions.py",
        '"code": None,',
        '"code": {"batches": [], "restored": [], "deleted": [], "conflicts": [], "kept": [], '
        '"removed_dirs": [], "moved": []},',
        "tests/cli/test_ui_page.py -k hidden",
    ),
    (
        "cli/ui/live.py",
        "if not moved and not store_moved:",
        "if True:",
        "tests/cli/test_ui_page.py -k left_open",
    ),
    # Regenerable output under a destructive command's targets: read before it
    # goes, a cache directory whole or not at all, build output within its budget.
    (
        "agent/core/doomed.py",
        "        elif reason in REGENERABLE and len(regenerable) < MAX_REGENERABLE:",
        "        elif False:",
        "tests/cli/test_ignored_undo.py -k clean_fdx_in_a_small",
    ),
    (
        "cas/scan.py",
        "                    and not judged\n",
        "",
        "tests/cli/test_ignored_undo.py -k clean_fdx_in_a_small",
    ),
    (
        "cas/scan.py",
        "not lift.take(whole[1], regenerable=True, files=whole[0])",
        "False",
        "tests/cli/test_ignored_undo.py -k one_budget_for_regenerable",
    ),
    (
        "cas/scan.py",
        "            if not self.lift.take(st.st_size, regenerable=build):",
        "            if not self.lift.take(st.st_size):",
        "tests/cli/test_ignored_undo.py -k past_its_budget",
    ),
    (
        "cas/scan.py",
        '            if not paid and ignored and is_cache(path, path.rpartition("/")[2]):',
        "            if False:",
        "tests/cli/test_ignored_undo.py -k too_large_to_read_whole",
    ),
    # Six that survived a hand-made round (each lost a person's work when applied).
    (
        "agent/core/interrupted.py",
        "        if proof is not None and digest == proof[1]:",
        "        if proof is not None:",
        "tests/agent/core/test_crash.py -k person_changed_after_the_kill",
    ),
    (
        "agent/core/policy.py",
        "        token = self.tracker.token()  # before the walk: a change during it is"
        " reported next\n"
        "        rec = self.project.record(\n"
        "            None, note=note, session=self.session, listed=False,"
        " forced=self.batch.forced\n"
        "        )\n",
        "        rec = self.project.record(\n"
        "            None, note=note, session=self.session, listed=False,"
        " forced=self.batch.forced\n"
        "        )\n"
        "        token = self.tracker.token()\n",
        "tests/cli/test_vouched.py -k changed_during_the_walk",
    ),
    (
        "cas/scan.py",
        "            if st.st_nlink > 1:\n"
        "                self.report.linked.append(join(rel, name))\n",
        "",
        "tests/cli/test_vouched.py -k 'hard_link_from_outside and past'",
    ),
    (
        "cli/install_commands.py",
        "    if not user and (out := leads_out(path, Path(root))) is not None:",
        "    if False and (out := leads_out(path, Path(root))) is not None:",
        "tests/cli/test_install_safety.py -k slash_command",
    ),
    (
        "agent/log/logfile.py",
        "            os.unlink(temp)\n    _fsync_dir(directory)\n",
        "            os.unlink(temp)\n",
        "tests/agent/log/test_session_log.py -k fsync_only_for_structure",
    ),
    (
        "agent/core/undo.py",
        "        verify_plan(reader, plan)  # a damaged store stops here, before the intent",
        "        pass",
        "tests/agent/core/test_crash.py -k damaged_blob_stops",
    ),
    # A restore over a file the rules keep as existence only since its target.
    (
        "cas/project.py",
        "                    and entry.reason in READ_WHEN_FORCED\n",
        "                    and False\n",
        "tests/cli/test_cli_restore.py -k ignored_since_records",
    ),
    (
        "cas/restore.py",
        '    Unrecorded.CACHE: "a regenerable cache",\n',
        "",
        "tests/cli/test_cli_restore.py -k cache_ignored_since",
    ),
    # A command's process group: stopped before a killed client's batch is
    # recorded, and given the signals earshot gets.
    (
        "agent/core/command.py",
        "    try:\n        os.killpg(pgid, signal.SIGKILL)\n",
        "    try:\n        pass\n",
        "tests/cli/test_hosted.py -k killed_clients_command_started",
    ),
    (
        "agent/core/command.py",
        "            os.killpg(self.pgid, sig)\n",
        "            pass\n",
        "tests/agent/core/test_crash.py -k signal_to_earshot",
    ),
    # Power cuts (tests/powercut.py): what a restore writes is durable before
    # it is renamed in, all of it before the operation's end is committed,
    # and a batch's written files before the batch records them.
    (
        "cas/apply.py",
        "            return\n        sync_file_system(self.handles.root_fd)\n",
        "            return\n",
        "tests/agent/core/test_powercut.py -k 'barrier_of_an_operation and undo'",
    ),
    (
        "cas/apply.py",
        "                sync_file_system(self.handles.root_fd)\n        finally:",
        "                pass\n        finally:",
        "tests/agent/core/test_powercut.py -k 'barrier_of_an_operation and undo'",
    ),
    (
        "agent/core/tools.py",
        "        sync_file_system_at(self.root)\n",
        "",
        "tests/agent/core/test_powercut.py -k 'barrier_of_an_operation and exec'",
    ),
    # An agent's command made durable before its batch is recorded: without
    # it a cut keeps a rewritten file's truncation, not its bytes.
    (
        "agent/core/policy.py",
        "            sync_file_system_at(str(self.project.root))\n",
        "",
        "tests/agent/core/test_powercut.py -k 'barrier_of_an_operation and bash'",
    ),
    # The same directory fsync, seen the way it matters: a power cut after
    # the fork said done must not lose the fork's file.
    (
        "agent/log/logfile.py",
        "            os.unlink(temp)\n    _fsync_dir(directory)\n",
        "            os.unlink(temp)\n",
        "tests/agent/core/test_powercut.py -k 'barrier_of_an_operation and fork'",
    ),
    # LMDB's durability (cas/lmdb_backend.py): sync and metasync stay on, so
    # a commit is on the disk when it returns.
    (
        "cas/lmdb_backend.py",
        "                sync=True,\n",
        "                sync=False,\n",
        "tests/agent/core/test_powercut.py -k 'barrier_of_an_operation and snapshot'",
    ),
    (
        "cas/lmdb_backend.py",
        "                metasync=True,\n",
        "                metasync=False,\n",
        "tests/agent/core/test_powercut.py -k 'barrier_of_an_operation and snapshot'",
    ),
    # An undo builds on its own session's picture, never on the head, which
    # another session's process may have recorded meanwhile.
    (
        "agent/core/policy.py",
        "        self.adopt(tree)\n",
        "        self.adopt(self.project.read_snapshot(self.project.head_snapshot()).tree)\n",
        "tests/cli/test_hosted.py -k watch_mark_on_a_head",
    ),
    # A hosted command's group is told to the worker from the child, before exec.
    (
        "cli/entry.py",
        "            on_start=started,\n",
        "",
        "tests/cli/test_hosted.py -k right-after-the-spawn",
    ),
    # gc keeps what a kept batch's ledger names, in no snapshot or not.
    (
        "cas/gc.py",
        "            reachable_blobs(reader, keep_blobs(), live)\n",
        "",
        "tests/cli/test_hooks.py -k between_its_calls",
    ),
    # fsck names a batch whose ledger names contents the store lacks.
    (
        "agent/core/records.py",
        "                problems.extend(_ledger_gaps(view, record, what))\n",
        "",
        "tests/agent/core/test_records_check.py",
    ),
    # A damaged entry in LMDB's list of tables is damage, not a new empty table.
    (
        "cas/lmdb_backend.py",
        "                _check_catalogue(txn)\n",
        "",
        "tests/cli/test_fuzz_damaged_store.py -k damaged_pages",
    ),
    # The remote: what a fetch takes, the order a push sends in, what gc's
    # index names, the locks, and the session states push and pull compare.
    (
        "cas/remote/transfer.py",
        "if entry.type is not ObjectType.BLOB or blob_digest(raw) != digest:",
        "if entry.type is not ObjectType.BLOB:",
        "tests/cas/test_remote_store.py -k key_holder",
    ),
    (
        "cas/remote/transfer.py",
        "    for group in (data, meta):",
        "    for group in (meta, data):",
        "tests/cli/test_remote.py -k killed_mid_way_resumes",
    ),
    (
        "cas/remote/prune.py",
        "e.pack in sizes and (d in live or e.pack in young)",
        "e.pack in sizes",
        "tests/cli/test_remote.py -k gc_refuses",
    ),
    (
        "cas/remote/locks.py",
        "        if not blocking:",
        "        if True:",
        "tests/cas/test_remote_store.py -k push_waits",
    ),
    (
        "cas/remote/locks.py",
        "    if found:",
        "    if False:",
        "tests/cas/test_remote_store.py -k push_waits",
    ),
    (
        "cas/remote/locks.py",
        "        if not stale and _died_here(doc):",
        "        if False:",
        "tests/cli/test_remote.py -k gc_killed",
    ),
    (
        "cas/remote/packs.py",
        "    return bytes(digest) + bytes([int(kind), int(codec)])",
        '    return b""',
        "tests/cas/test_remote_store.py -k open_under_another",
    ),
    (
        "agent/remote/push.py",
        "        if not state.holds(*summary(doc)):",
        "        if False:",
        "tests/cli/test_remote.py -k pull_brings",
    ),
    (
        "agent/remote/pull.py",
        "            _check_pullable(local, remote)",
        "            pass",
        "tests/cli/test_remote.py -k went_on_in_both",
    ),
    (
        "agent/remote/pull.py",
        "        _unmake(project, target if made else None)",
        "        pass",
        "tests/cli/test_remote.py -k tampered",
    ),
    (
        "agent/remote/push.py",
        "    if lock.lapsed:",
        "    if False:",
        "tests/cli/test_remote.py -k lapsed",
    ),
    (
        "agent/remote/pull.py",
        "        if not remote.log.startswith(have):",
        "        if False:",
        "tests/cli/test_remote.py -k while_a_pull",
    ),
    (
        "agent/remote/pull.py",
        "        if kept.exists():",
        "        if False:",
        "tests/cli/test_remote.py -k former_root",
    ),
    (
        "agent/remote/heads.py",
        "        if not any(summary(doc) == summary(other) for _, other in heads):",
        "        if True:",
        "tests/cli/test_remote.py -k one_state",
    ),
    (
        "cas/remote/transfer.py",
        "        lists = [b for b in missing if self.entry(b).type in META_TYPES]",
        "        lists: list[Digest] = []",
        "tests/cli/test_remote.py -k large_file",
    ),
    (
        "cas/remote/storage.py",
        "                    if SAFE_NAME.match(name):",
        "                    if True:",
        "tests/cli/test_remote.py -k planted",
    ),
    (
        "agent/remote/pull.py",
        "        if (None if current is None else current.next_seq) != was:",
        "        if False:",
        "tests/cli/test_remote.py -k begun_while",
    ),
    (
        "cas/remote/locks.py",
        '    if doc.get("space") != _pid_space() or _pid_space() is None:',
        "    if False:",
        "tests/cli/test_remote.py -k namespace",
    ),
    (
        "cas/remote/transfer.py",
        "            if lock.lapsed:",
        "            if False:",
        "tests/cli/test_remote.py -k lapsed",
    ),
    (
        "agent/remote/push.py",
        "whole=recheck",
        "whole=False",
        "tests/cli/test_remote.py -k lapsed",
    ),
    (
        "cas/dirfd.py",
        "        if len(self._open) > _KEPT_MAX:",
        "        if False:",
        "tests/cli/test_cli_restore.py -k descriptor_limit",
    ),
]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("only", nargs="*", type=int, help="these mutants (by number)")
    parser.add_argument(
        "--shard",
        metavar="I/N",
        help="the mutants whose number is I modulo N (CI runs one shard a commit)",
    )
    args = parser.parse_args()
    chosen = [i for i in range(len(MUTANTS)) if not args.only or i in args.only]
    if args.shard:
        part, _, count = args.shard.partition("/")
        chosen = [i for i in chosen if i % int(count) == int(part) % int(count)]
    outcomes = [run_mutant(i, *MUTANTS[i]) for i in chosen]
    bad = [i for i, outcome in zip(chosen, outcomes, strict=True) if outcome != "KILLED"]
    print(f"{len(chosen) - len(bad)} of {len(chosen)} mutants killed", flush=True)
    if bad:
        print(f"not killed: {' '.join(map(str, bad))}", flush=True)
    return 1 if bad else 0


def run_mutant(i: int, f: str, old: str, new: str, tests: str) -> str:
    """Apply one mutant, run its tests, print whether they caught it (KILLED,
    SURVIVED, or MISSING: the code it breaks moved), and put the source back."""
    path = ROOT / f
    src = path.read_text()
    if src.count(old) != 1:
        where = "not found" if old not in src else "found more than once"
        print(f"{i} MISSING {f}: {old.strip()[:50]!r} {where}", flush=True)
        return "MISSING"
    path.write_text(src.replace(old, new, 1))
    try:
        r = subprocess.run(
            [
                str(ROOT / ".venv/bin/python"),
                "-m",
                "pytest",
                "-x",
                "-q",
                "-p",
                "no:cacheprovider",
                *shlex.split(tests),
            ],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=900,
        )
        # pytest's 1 is a test that failed, and so is 2 when xdist stopped the
        # run at the first failure (-x); 5 (no test selected) and any other 2-4
        # (interrupted, internal or usage error) prove nothing about the mutant.
        failed = r.returncode == 1 or (r.returncode == 2 and "stopping after" in r.stdout)
        outcome = "KILLED" if failed else "SURVIVED" if r.returncode == 0 else "NO TEST RAN"
        print(f"{i} {outcome} {f}: {old.strip()[:60]!r} [{tests}]", flush=True)
        return outcome
    finally:
        path.write_text(src)


if __name__ == "__main__":
    sys.exit(main())
