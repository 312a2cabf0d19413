"""The timed earshot's bytecode, compiled before a run.

A regular install compiles earshot's modules once; an editable install
leaves them to be compiled on first use, and with ``PYTHONDONTWRITEBYTECODE``
set (as in many containers) every earshot command compiles every module it
imports again, ~90 ms a call here. The suite compiles the install it times
first, so each figure measures earshot and not the compiler.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

PACKAGES = ("earshot.cas", "earshot.agent", "earshot.cli")


def interpreter(exe: str) -> str:
    """The Python a console script runs under, from its ``#!`` line."""
    first = Path(exe).read_bytes().split(b"\n", 1)[0].decode()
    if not first.startswith("#!"):
        raise ValueError(f"{exe}: not a Python console script (no #! line)")
    return first[2:].strip().split()[0]


def compile_install(exe: str) -> str:
    """Compile the earshot packages ``exe`` runs; say where they are."""
    python = interpreter(exe)
    code = "import importlib; print('\\n'.join(importlib.import_module(p).__path__[0] for p in %r))"
    dirs = subprocess.run(
        [python, "-c", code % (PACKAGES,)], capture_output=True, text=True, check=True
    ).stdout.split()
    subprocess.run([python, "-m", "compileall", "-q", *dirs], check=True, capture_output=True)
    return ", ".join(dirs)
