"""While the tests measure coverage, the local stack's Lambda workers measure themselves (docs/development.md,
"Coverage"): they get coverage.py's variables, run the interpreter OMNIREEL_RUNTIME_PYTHON names (.venv-dev's) but
import only what the stack's own interpreter can, and have time to write their data file as they exit."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest
from coverage import CoverageData
from coverage.config import CoverageConfig

from omnireel_local.home import pid_alive
from omnireel_local.lambda_runner import FunctionCode, Invocation, LambdaRunner
from omnireel_local.runtime_python import ENV_VAR

# The worker's exit takes 1.5 s (atexit hooks run last registered first: this one before coverage's, which writes the
# data): longer than an unmeasured worker's grace when the stack stops.
HANDLER = """
import atexit, importlib.util, os, time

atexit.register(time.sleep, 1.5)


def handler(event, context):
    time.sleep(event.get("sleep", 0))
    return {"measured": "COVERAGE_PROCESS_CONFIG" in os.environ, "importable": {
        name: importlib.util.find_spec(name) is not None for name in ("numpy", "pytest", "boto3")}}
"""
RETURN_LINE = 9  # the handler's return, in HANDLER
ARN = "arn:aws:lambda:us-east-1:123456789012:function:fn"


def _invoke(runner: LambdaRunner, payload: dict | None = None, timeout: float = 10) -> dict:
    result = runner.invoke(
        Invocation("fn", ARN, "handler.handler", "python3.13", timeout, 128, {}, json.dumps(payload or {}))
    )
    assert not result.errored, result.payload
    return json.loads(result.payload)


@pytest.fixture
def code(tmp_path: Path) -> Path:
    (tmp_path / "fn").mkdir()
    (tmp_path / "fn" / "handler.py").write_text(HANDLER)
    return tmp_path / "fn"


@pytest.fixture
def measured(tmp_path: Path, code: Path, monkeypatch) -> None:
    """Coverage on, as `make test` has it: what `patch = ["subprocess"]` sets for the processes a measured test
    process starts, and tests/support/stack.py's runtime interpreter (.venv-dev's, named explicitly)."""
    config = CoverageConfig()
    # patch "fork", as pyproject.toml has it: a worker forked from its template restarts coverage.py ("subprocess"
    # needs a configuration file, which a test's own settings are not)
    config.from_args(source=[str(code)], data_file=str(tmp_path / "data" / ".coverage"), parallel=True, patch=["fork"])
    monkeypatch.setenv("COVERAGE_PROCESS_CONFIG", config.serialize())
    monkeypatch.delenv("COVERAGE_PROCESS_START", raising=False)
    monkeypatch.setenv(ENV_VAR, str(Path(sys.executable).with_name("python3")))


def test_a_measured_worker_writes_its_data_and_imports_only_what_the_stacks_python_can(
    tmp_path: Path, code: Path, measured: None, monkeypatch
) -> None:
    # The stack runs .venv's Python (no numpy, no pytest); its workers run .venv-dev's.
    venv_path = [p for p in sys.path if "/.venv-dev/" not in p and "/.venv-emulator/" not in p]
    with monkeypatch.context() as stack_process:
        stack_process.setattr(sys, "path", venv_path)
        runner = LambdaRunner("http://127.0.0.1:9", "us-east-1", tmp_path / "logs", 1)
    runner.register("fn", FunctionCode(code))
    try:
        answer = _invoke(runner)
    finally:
        runner.shutdown()

    assert answer == {"measured": True, "importable": {"numpy": False, "pytest": False, "boto3": True}}
    written = sorted((tmp_path / "data").glob(".coverage.*"))
    # the worker's file, and (forked workers) its template's, which imported no measured code
    with_data = [path for path in written if _handler_lines(path, code)]
    assert len(with_data) == 1, f"the worker wrote no coverage data ({written}): killed before it could?"
    lines = _handler_lines(with_data[0], code)
    assert RETURN_LINE in lines  # the invocation ran under measurement


def _handler_lines(path: Path, code: Path) -> list[int]:
    data = CoverageData(str(path))
    data.read()
    return data.lines(str(code / "handler.py")) or []


def test_an_unmeasured_workers_environment_has_no_coverage_variables(tmp_path: Path, code: Path, monkeypatch) -> None:
    for name in ("COVERAGE_PROCESS_CONFIG", "COVERAGE_PROCESS_START", ENV_VAR):
        monkeypatch.delenv(name, raising=False)
    runner = LambdaRunner("http://127.0.0.1:9", "us-east-1", tmp_path / "logs", 1)
    runner.register("fn", FunctionCode(code))
    try:
        assert _invoke(runner)["measured"] is False
    finally:
        runner.shutdown()


def test_a_measured_worker_that_times_out_is_still_killed_at_once(tmp_path: Path, code: Path, measured: None) -> None:
    """Only a worker told to exit gets the measured grace: one past its Timeout ends as promptly as Lambda ends it
    (its coverage data is lost, as its sandbox would be)."""
    runner = LambdaRunner("http://127.0.0.1:9", "us-east-1", tmp_path / "logs", 1)
    runner.register("fn", FunctionCode(code))
    try:
        _invoke(runner, timeout=1)  # the same configuration (Timeout) as the next: the same worker serves both
        (pid,) = runner.pids()
        result = runner.invoke(Invocation("fn", ARN, "handler.handler", "python3.13", 1, 128, {}, '{"sleep": 30}'))
        assert json.loads(result.payload)["errorType"] == "Sandbox.Timedout"
        deadline = time.monotonic() + 5  # the unmeasured grace is 0.5 s; the measured one would be 10 s
        while pid_alive(pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not pid_alive(pid), "the timed-out worker was left running"
    finally:
        runner.shutdown()
