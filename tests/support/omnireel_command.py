"""The ``omnireel`` command as a user runs it: .venv's console script (tests themselves run in .venv-dev)."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def omnireel_command() -> list[str]:
    """``.venv/bin/omnireel`` (the stack then runs with .venv's Python, which has no PyAV or numpy, and the emulators
    with .venv-emulator's, as after ``make demo``); else this interpreter's script or ``-m omnireel_cli.main``."""
    for script in (ROOT / ".venv" / "bin" / "omnireel", Path(sys.executable).parent / "omnireel"):
        if script.exists():
            return [str(script)]
    return [sys.executable, "-m", "omnireel_cli.main"]
