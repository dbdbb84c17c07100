"""While the tests measure coverage, the local stack's Lambda workers measure themselves (docs/development.md,
"Coverage"): they get coverage.py's variables, run the interpreter OMNIREEL_RUNTIME_PYTHON names (.venv-dev's) but
import only what the stack's own interpreter can, and have time to write their data file as they exit."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from coverage import CoverageData
from coverage.config import CoverageConfig

from omnireel_local.lambda_runner import FunctionCode, Invocation, LambdaRunner
from omnireel_local.runtime_python import ENV_VAR

# The worker's exit takes 1.5 s (atexit hooks run last registered first: this one before coverage's, which writes the
# data): longer than an unmeasured worker's grace when the stack stops.
HANDLER = """
import atexit, importlib.util, os, time

atexit.register(time.sleep, 1.5)


def handler(event, context):
    return {"measured": "COVERAGE_PROCESS_CONFIG" in os.environ, "importable": {
        name: importlib.util.find_spec(name) is not None for name in ("numpy", "pytest", "boto3")}}
"""
RETURN_LINE = 8  # the handler's return, in HANDLER
ARN = "arn:aws:lambda:us-east-1:123456789012:function:fn"


def _invoke(runner: LambdaRunner) -> dict:
    result = runner.invoke(Invocation("fn", ARN, "handler.handler", "python3.13", 10, 128, {}, "{}"))
    assert not result.errored, result.payload
    return json.loads(result.payload)


@pytest.fixture
def code(tmp_path: Path) -> Path:
    (tmp_path / "fn").mkdir()
    (tmp_path / "fn" / "handler.py").write_text(HANDLER)
    return tmp_path / "fn"


def test_a_measured_worker_writes_its_data_and_imports_only_what_the_stacks_python_can(
    tmp_path: Path, code: Path, monkeypatch
) -> None:
    config = CoverageConfig()
    config.from_args(source=[str(code)], data_file=str(tmp_path / "data" / ".coverage"), parallel=True)
    # What coverage's `patch = ["subprocess"]` sets for the processes a measured test process starts.
    monkeypatch.setenv("COVERAGE_PROCESS_CONFIG", config.serialize())
    monkeypatch.delenv("COVERAGE_PROCESS_START", raising=False)
    # The stack runs .venv's Python (no numpy, no pytest); its workers run .venv-dev's, named explicitly.
    monkeypatch.setenv(ENV_VAR, str(Path(sys.executable).with_name("python3")))
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
    assert len(written) == 1, f"the worker wrote no coverage data ({written}): killed before it could?"
    data = CoverageData(str(written[0]))
    data.read()
    assert RETURN_LINE in (data.lines(str(code / "handler.py")) or [])  # the invocation ran under measurement


def test_an_unmeasured_workers_environment_has_no_coverage_variables(tmp_path: Path, code: Path, monkeypatch) -> None:
    for name in ("COVERAGE_PROCESS_CONFIG", "COVERAGE_PROCESS_START", ENV_VAR):
        monkeypatch.delenv(name, raising=False)
    runner = LambdaRunner("http://127.0.0.1:9", "us-east-1", tmp_path / "logs", 1)
    runner.register("fn", FunctionCode(code))
    try:
        assert _invoke(runner)["measured"] is False
    finally:
        runner.shutdown()
