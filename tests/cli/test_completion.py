"""Shell completion: commands from click, snapshot ids and batch numbers from the store.

Run as bash runs it (``_EARSHOT_COMPLETE=bash_complete`` with ``COMP_WORDS``
and ``COMP_CWORD``), through the real console script.
"""

from __future__ import annotations

from pathlib import Path

from earshot_cli import Cli


def _complete(cli: Cli, line: str, cwd: Path | None = None, shell: str = "bash") -> list[str]:
    words = line.split(" ")
    env = cli.env(
        COMP_WORDS=line, COMP_CWORD=str(len(words) - 1), _EARSHOT_COMPLETE=f"{shell}_complete"
    )
    ran = cli.run(env=env, cwd=cwd)
    assert ran.stderr == "", ran
    items = [line for line in ran.stdout.splitlines() if line]  # none: click prints "\n"
    if shell == "zsh":
        return items
    return [item.partition(",")[2] for item in items]


def test_commands_complete_from_their_names(cli: Cli) -> None:
    assert _complete(cli, "earshot snap") == ["snapshot", "snapshots"]


def test_restore_and_forget_complete_snapshot_ids_newest_first(cli: Cli) -> None:
    cli.write("a.txt", "a\n")
    first = cli.snap("-m", "first")
    cli.write("a.txt", "b\n")
    second = cli.snap("-m", "second")
    assert _complete(cli, "earshot restore ") == [second[:12], first[:12]]
    assert _complete(cli, f"earshot forget {first[:3]}") == [first[:12]]
    hints = _complete(cli, "earshot restore ", shell="zsh")
    assert hints[:3] == ["plain", second[:12], hints[2]] and hints[2].endswith(" second"), hints


def test_diff_completes_the_session_s_batch_numbers_then_snapshot_ids(cli: Cli) -> None:
    sid = cli.new_session()
    cli.run("bash", "echo one > one.txt", session=sid)
    cli.run("bash", "echo two > two.txt", session=sid)
    cli.new_session()  # a newer session with no batches is not the one meant
    snap = cli.snap()
    assert _complete(cli, "earshot diff ") == ["2", "1", snap[:12]]
    hints = _complete(cli, "earshot diff 1", shell="zsh")
    assert hints[:3] == ["plain", "1", "bash: echo one > one.txt"], hints


def test_a_root_earshot_never_recorded_completes_nothing_and_gets_no_store(
    cli: Cli, tmp_path: Path
) -> None:
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    assert _complete(cli, "earshot restore ", cwd=fresh) == []
    assert _complete(cli, "earshot diff ", cwd=fresh) == []
    assert not (cli.home / "checkpoints").exists()


def test_options_before_the_command_and_a_broken_settings_file_do_not_stop_completion(
    cli: Cli, tmp_path: Path
) -> None:
    cli.write("a.txt", "a\n")
    snap = cli.snap()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    line = f"earshot --root {cli.root} restore "
    assert _complete(cli, line, cwd=elsewhere) == [snap[:12]]
    settings = cli.home / "config" / "earshot" / "config.toml"
    settings.parent.mkdir(parents=True)
    settings.write_text("{")
    assert _complete(cli, "earshot restore ") == [snap[:12]]  # and stderr stays empty
