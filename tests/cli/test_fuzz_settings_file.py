"""earshot's own settings files (config.toml, a project's .earshot.toml) fed damage:
read, or refused in one line naming the file (``SettingsError``), never another
exception. A repository may ship a project's file: every command reads it.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from fuzz import damaged, examples
from hypothesis import example, given
from hypothesis import strategies as st

from earshot.cli.settings_file import PROJECT_FILE, SettingsError, apply

SETTINGS = [
    'watch = "never"\ncolor = "always"\n',
    "max_file_size = 1048576\nkeep_ignored = true\n# a comment\n",
    'model = "anthropic:claude"\n[other]\nx = 1\n',
    "home = '~/data'\npager = 'less -R'\n",
]
texts = damaged(st.sampled_from(SETTINGS).map(str.encode), max_size=80)


@examples(1)
@given(texts, st.booleans())
@example(b"a = " + b"[" * 2000, True)
@example(b"watch = " + b"1" * 5000, True)
@example(b"watch = 1e999", False)
@example(b"\xff = 1", True)
def test_a_damaged_settings_file_is_read_or_refused_in_one_line(
    text: bytes, is_project: bool
) -> None:
    saved = dict(os.environ)
    with tempfile.TemporaryDirectory() as tmp:
        top = Path(tmp)
        os.environ["XDG_CONFIG_HOME"] = str(top / "config")
        for name in [n for n in os.environ if n.startswith("EARSHOT_")]:
            del os.environ[name]
        path = top / PROJECT_FILE if is_project else top / "config" / "earshot" / "config.toml"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(text)
        try:
            warnings = apply(str(top))
        except SettingsError as exc:
            assert "\n" not in str(exc) and str(path) in str(exc)
        else:
            assert all(str(path) in line for line in warnings)
        finally:
            os.environ.clear()
            os.environ.update(saved)
