"""The ``omnireel`` console script runs without awscrt (installed in .venv for the relay only)."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.support.omnireel_command import ROOT, omnireel_command


def _imported(*argv: str, env: dict[str, str] | None = None, check: bool = True) -> set[str]:
    """The modules an ``omnireel`` command imported (``-X importtime``'s list)."""
    env = {**os.environ, **(env or {}), "PYTHONPROFILEIMPORTTIME": "1"}
    done = subprocess.run(
        [*omnireel_command(), *argv], env=env, cwd=ROOT, capture_output=True, text=True, timeout=60, check=check
    )
    return {line.split("|")[-1].strip() for line in done.stderr.splitlines() if line.startswith("import time:")}


def test_the_console_script_never_imports_awscrt() -> None:
    # botocore imports awscrt whenever it is importable (~0.2 s of CPU per command); the CLI uses nothing from it.
    # A deployed-stack lookup loads boto3; the endpoint is a closed loopback port, so the call fails without a packet
    # leaving the machine (exit 3), after botocore was imported.
    unreachable = {
        "AWS_ENDPOINT_URL": "http://127.0.0.1:9",
        "AWS_ACCESS_KEY_ID": "test",
        "AWS_SECRET_ACCESS_KEY": "test",
        "AWS_MAX_ATTEMPTS": "1",
    }
    imported = _imported("status", "job", "--stack", "nope", "--region", "us-east-1", env=unreachable, check=False)
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


def test_commands_import_only_what_they_use() -> None:
    # The parser is built from light modules; each command's module loads on first use (main._lazy), so printing the
    # version or the help, or reading the local logs, never imports botocore, boto3, asyncio or PyYAML.
    heavy = {"botocore", "boto3", "asyncio", "yaml", "omnireel_cli.smoke", "omnireel_cli.tts", "omnireel_cli.invoke"}
    for argv in (["--version"], ["--help"], ["invoke", "--help"], ["smoke", "--help"]):
        assert not _imported(*argv) & heavy, argv
