"""Which Python runs the vLLM-Omni container emulator: .venv-emulator's, as if it were its own container image.

The emulator's media libraries (PyAV with FFmpeg, numpy: ~190 MB) are not in .venv; ``make emulator-venv`` (run by
``make demo``) installs them into .venv-emulator, which extends .venv (docs/development.md, "Virtual environments").
Resolution, first match wins:

1. ``OMNIREEL_EMULATOR_PYTHON``: an interpreter named explicitly (must exist and be executable);
2. ``<checkout>/.venv-emulator/bin/python``;
3. this interpreter, if it can import them itself (e.g. .venv-dev, which extends .venv-emulator);
4. otherwise :class:`EmulatorPythonMissing`, naming the command that fixes it.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

from omnireel_template import ROOT

ENV_VAR = "OMNIREEL_EMULATOR_PYTHON"
EMULATOR_VENV = ROOT / ".venv-emulator"
MEDIA_MODULES = ("av", "numpy")


class EmulatorPythonMissing(RuntimeError):
    """No interpreter that can run the container emulator."""


def emulator_python(venv: Path = EMULATOR_VENV) -> str:
    explicit = os.environ.get(ENV_VAR)
    if explicit:
        if not (Path(explicit).is_file() and os.access(explicit, os.X_OK)):
            raise EmulatorPythonMissing(f"{ENV_VAR}={explicit} is not an executable file")
        return explicit
    candidate = venv / "bin" / "python"
    if candidate.is_file() and os.access(candidate, os.X_OK):
        return str(candidate)
    if all(importlib.util.find_spec(name) is not None for name in MEDIA_MODULES):
        return sys.executable
    raise EmulatorPythonMissing(
        f"the container emulator needs PyAV and numpy, which are not in .venv: run `make emulator-venv` (creates "
        f"{venv.name}, ~200 MB; `make demo` does it too) or set {ENV_VAR} to a Python that has them"
    )
