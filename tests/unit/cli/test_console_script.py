"""The ``omnireel`` console script runs without awscrt (installed in .venv for the relay only)."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.omnireel_command import ROOT, omnireel_command


def test_the_console_script_never_imports_awscrt() -> None:
    # botocore imports awscrt whenever it is importable (~0.2 s of CPU per command); the CLI uses nothing from it.
    env = {**os.environ, "PYTHONPROFILEIMPORTTIME": "1"}
    done = subprocess.run(
        [*omnireel_command(), "--version"], env=env, cwd=ROOT, capture_output=True, text=True, timeout=60, check=True
    )
    imported = {line.split("|")[-1].strip() for line in done.stderr.splitlines() if line.startswith("import time:")}
    assert "botocore.compat" in imported  # the command does load botocore: the check below means something
    # (botocore's failed `import awscrt.auth` attempt is still listed; the package and its extension must not be.)
    assert not imported & {"awscrt", "_awscrt"}, "awscrt was imported"


def test_botocore_in_the_cli_process_has_no_crt() -> None:
    code = "import sys, contextlib\nfrom omnireel_cli import command\nsys.argv = ['omnireel', '--version']\n"
    code += "with contextlib.suppress(SystemExit):\n    command.main()\n"
    code += "import botocore.compat\nprint('HAS_CRT', botocore.compat.HAS_CRT)"
    python = ROOT / ".venv" / "bin" / "python"
    done = subprocess.run(
        [str(python if python.exists() else sys.executable), "-c", code],
        cwd=ROOT, capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    assert "HAS_CRT False" in done.stdout
