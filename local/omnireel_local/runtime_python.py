"""Which Python runs the product code the local stack starts: its Lambda workers and the TTS relay.

By default the stack's own interpreter (``.venv``'s after ``make demo``). ``OMNIREEL_RUNTIME_PYTHON`` names another one
(it must exist and be executable): the tests name .venv-dev's when they measure coverage (tests/support/stack.py),
because .venv has no coverage.py and a process measures itself only if its interpreter can import it
(docs/development.md, "Coverage"). The stack itself and the container emulators (local/, a dev tool) keep theirs.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

ENV_VAR = "OMNIREEL_RUNTIME_PYTHON"
# The stack's own import path (JSON), for a Lambda worker that another interpreter runs: it imports only from there,
# so a handler sees the modules it would see under the stack's interpreter (.venv-dev also has the test and emulator
# packages, which the layer does not ship). Read and removed by the worker before the handler is imported.
STACK_SYS_PATH = "OMNIREEL_STACK_SYS_PATH"
# Coverage.py's subprocess measurement ([tool.coverage.run] patch = ["subprocess"] in pyproject.toml): set only while
# coverage measures the process that started the stack; a Lambda worker's environment is otherwise the function's own.
COVERAGE_VARS = ("COVERAGE_PROCESS_CONFIG", "COVERAGE_PROCESS_START")


class RuntimePythonMissing(RuntimeError):
    """``OMNIREEL_RUNTIME_PYTHON`` names no executable file."""


def runtime_python() -> str:
    explicit = os.environ.get(ENV_VAR)
    if not explicit:
        return sys.executable
    if not (Path(explicit).is_file() and os.access(explicit, os.X_OK)):
        raise RuntimePythonMissing(f"{ENV_VAR}={explicit} is not an executable file")
    return explicit


def coverage_environment() -> dict[str, str]:
    """The coverage.py variables of this process's environment (none unless coverage measures it)."""
    return {name: os.environ[name] for name in COVERAGE_VARS if name in os.environ}


def restrict_path(path: list[str], allowed: list[str]) -> list[str]:
    """``path`` without the entries ``allowed`` lacks; its first (the folder of the script or of ``-m``) stays."""
    keep = set(allowed)
    return path[:1] + [entry for entry in path[1:] if entry in keep]
