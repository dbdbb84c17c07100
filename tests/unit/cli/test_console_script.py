"""The ``omnireel`` console script runs without awscrt (installed in .venv for the relay only)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

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


def test_an_api_command_loads_neither_botocore_nor_asyncio(tmp_path: Path) -> None:
    # A command that only calls the HTTP API signs with the client's own SigV4 (omnireel_client/signing.py) and reads
    # no installed-package metadata: ~0.19 CPU-s a command instead of ~0.29 (docs/decisions.md). A local stack's state
    # pointing at a closed loopback port: the command signs, sends, and fails without a packet leaving the machine.
    state = {
        "ready": True, "pid": os.getpid(), "api_url": "http://127.0.0.1:9", "endpoint_url": "http://127.0.0.1:9",
        "region": "us-east-1", "developer": {"access_key_id": "AKIDLOCAL", "secret_access_key": "secret"},
    }  # fmt: skip
    (tmp_path / "state.json").write_text(json.dumps(state))
    imported = _imported("status", "6c22ca17-03a1-59a3-8bd7-e5d6c1b00000", env={"OMNIREEL_HOME": str(tmp_path)},
                         check=False)  # fmt: skip
    assert {"omnireel_client.signing", "http.client"} <= imported  # it signed and sent: the check below means something
    # msgspec: the request model, whose bounds a numeric flag's value is checked against when one is given
    heavy = {"botocore", "boto3", "asyncio", "yaml", "importlib.metadata", "standardwebhooks", "omnireel_template"}
    heavy |= {"msgspec"}
    assert not imported & heavy, imported & heavy
