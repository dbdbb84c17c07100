"""A local stack started through the CLI as a user starts it (isolated OMNIREEL_HOME, free ports), and stopped.

``start_stack`` runs ``omnireel local up`` (every wait bounded); ``stop_stack`` runs ``omnireel local down`` and returns
the processes the stack started that are still alive. The e2e and the integration tests share one such stack per test
process: the ``stack`` fixture in tests/conftest.py. A variant that Lambda can take at run time (a parameter that only
reaches functions' environments) is ``reconfigured`` on that stack; tests that need another (a parameter that shapes
resources, ``--no-relay``, fixed ports) start their own with ``start_stack``.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from omnireel_cli.local_stack import parse_env_lines
from omnireel_local import home as homedir
from omnireel_local.runtime_python import COVERAGE_VARS
from omnireel_local.runtime_python import ENV_VAR as RUNTIME_PYTHON
from tests.support import file_cpu
from tests.support.omnireel_command import omnireel_command

ROOT = Path(__file__).resolve().parents[2]
UP_TIMEOUT_S = 120


def cli_command() -> list[str]:
    return omnireel_command()


@dataclass
class LocalStack:
    home: Path
    env: dict[str, str]  # process environment for CLI calls (OMNIREEL_HOME set)
    outputs: dict[str, str]  # `omnireel local env`
    up_stderr: str = ""  # what `omnireel local up` said

    def cli(self, *args: str, timeout: float = 120, check: bool = False) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(
            [*cli_command(), *args], env=self.env, cwd=ROOT, capture_output=True, text=True, timeout=timeout
        )
        if check and result.returncode != 0:
            raise AssertionError(f"omnireel {' '.join(args)} -> {result.returncode}\n{result.stdout}\n{result.stderr}")
        return result

    def state(self) -> dict:
        return json.loads((self.home / "state.json").read_text())

    def pids(self) -> list[int]:
        state = self.state()
        return [int(state["pid"]), *(int(p) for p in (state.get("child_pids") or {}).values())]


def parse_env(text: str) -> dict[str, str]:
    return parse_env_lines(text)


def cli_env(home: Path, env: dict[str, str] | None = None) -> dict[str, str]:
    """The CLI's environment for a stack in ``home``: no AWS endpoint or profile of the developer's leaks in."""
    env = {**os.environ, **(env or {}), "OMNIREEL_HOME": str(home)}
    for name in ("AWS_ENDPOINT_URL", "AWS_PROFILE"):
        env.pop(name, None)
    if any(name in env for name in COVERAGE_VARS):
        # Coverage measures this test process (`make test`): the stack's Lambda workers and relay run with this
        # interpreter (.venv-dev's, which has coverage.py; .venv has not) and so measure themselves too.
        env.setdefault(RUNTIME_PYTHON, sys.executable)
    return env


def start_stack(home: Path, *extra: str, env: dict[str, str] | None = None, fixed_ports: bool = False) -> LocalStack:
    """``fixed_ports``: the stack's default port block (OMNIREEL_LOCAL_BASE_PORT in ``env``) instead of free ports."""
    stack = LocalStack(home, cli_env(home, env), {})
    ports = [] if fixed_ports else ["--ephemeral-ports"]  # parallel test stacks never share a port
    result = stack.cli("local", "up", *ports, *extra, timeout=UP_TIMEOUT_S)
    if result.returncode != 0:
        log = home / "logs" / "stack.log"
        tail = log.read_text()[-4000:] if log.exists() else ""
        stop_stack(stack)
        pytest.fail(f"omnireel local up failed ({result.returncode}): {result.stderr}\n{tail}")
    stack.outputs = parse_env(result.stdout)
    stack.up_stderr = result.stderr
    return stack


def stop_stack(stack: LocalStack) -> list[int]:
    """`omnireel local down`; returns the pids still alive afterwards (killing them so nothing leaks)."""
    file_cpu.before_stop()  # `make test-durations` counts what the stack used until now
    try:
        pids = stack.pids()
    except (OSError, ValueError):
        pids = []
    stack.cli("local", "down", timeout=60)
    return homedir.reap(pids)


@contextlib.contextmanager
def reconfigured(stack: LocalStack, variables: dict[str, str]) -> Iterator[list[str]]:
    """Run with ``variables`` set in every function of the stack whose environment already holds one of them (as an
    operator tunes a deployed stack: UpdateFunctionConfiguration; the local Lambda retires the warm workers, as Lambda
    starts new execution environments), then put every environment back. The functions are found from the stack, not
    listed: a template parameter that reaches a new function reaches it here too. Yields their names; a variable no
    function holds is an error (the test would run unconfigured)."""
    from tests.support.frontdoor import aws

    lambda_ = aws(stack.state(), "lambda")
    originals: dict[str, dict[str, Any]] = {}
    for page in lambda_.get_paginator("list_functions").paginate():
        for function in page["Functions"]:
            held = (function.get("Environment") or {}).get("Variables") or {}
            if set(held) & set(variables):
                originals[function["FunctionName"]] = {"Variables": held}
    missing = set(variables) - {name for env in originals.values() for name in env["Variables"]}
    assert not missing, f"no function of the stack has {sorted(missing)} in its environment"
    try:
        for name, environment in originals.items():
            changed = {k: variables.get(k, v) for k, v in environment["Variables"].items()}
            lambda_.update_function_configuration(FunctionName=name, Environment={"Variables": changed})
        yield sorted(originals)
    finally:
        for name, environment in originals.items():
            lambda_.update_function_configuration(FunctionName=name, Environment=environment)
