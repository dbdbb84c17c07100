"""How to call this command again, as the user can type it: ``omnireel`` when that name on PATH is this very script,
else the script's path from the current folder (``make demo`` runs ``.venv/bin/omnireel``, which is not on PATH:
a hint saying "`omnireel local down` stops it" then fails with "command not found")."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path


def command_name(argv0: str | None = None) -> str:
    script = Path(argv0 if argv0 is not None else sys.argv[0])
    if script.name != "omnireel" or not script.exists():  # python -m omnireel_cli.main, or a test's own entry
        return "omnireel"
    on_path = shutil.which("omnireel")
    if on_path and Path(on_path).resolve() == script.resolve():
        return "omnireel"
    try:
        relative = os.path.relpath(script.resolve(), Path.cwd())
    except ValueError:  # another drive (Windows)
        return str(script.resolve())
    if relative.startswith(".."):  # outside the current folder: the absolute path is the clearer one
        return str(script.resolve())
    return relative if "/" in relative else f"./{relative}"  # a bare name would be looked up on PATH


def hint(subcommand: str) -> str:
    """``"`.venv/bin/omnireel local down`"`` (or ``"`omnireel local down`"``): a command to quote in a message."""
    return f"`{command_name()} {subcommand}`"
