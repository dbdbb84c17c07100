"""The Lambda runner: warm reuse, Lambda's error shape, Timeout -> Sandbox.Timedout, init errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from omnireel_local.lambda_runner import FunctionCode, Invocation, LambdaRunner

HANDLER = """
import os, time
BOOT = time.time()

class StepError(Exception):
    pass

def handler(event, context):
    if event.get("sleep"):
        time.sleep(event["sleep"])
    if event.get("fail"):
        raise StepError('{"code": "Boom", "message": "it broke"}')
    return {"pid": os.getpid(), "boot": BOOT, "fn": context.function_name, "env": os.environ.get("GREETING"),
            "endpoint": os.environ.get("AWS_ENDPOINT_URL"), "remaining": context.get_remaining_time_in_millis()}
"""


@pytest.fixture
def runner(tmp_path: Path):
    code = tmp_path / "fn"
    code.mkdir()
    (code / "handler.py").write_text(HANDLER)
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "handler.py").write_text("raise RuntimeError('bad config')\n")
    runner = LambdaRunner("http://127.0.0.1:9", "us-east-1", tmp_path / "logs", max_workers_per_function=2)
    runner.register("fn", FunctionCode(code))
    runner.register("broken", FunctionCode(tmp_path / "broken"))
    yield runner
    runner.shutdown()


def invoke(runner: LambdaRunner, payload: dict, name: str = "fn", timeout: float = 10, env: dict | None = None):
    arn = f"arn:aws:lambda:us-east-1:123456789012:function:{name}"
    environment = env or {"GREETING": "hi"}
    return runner.invoke(
        Invocation(name, arn, "handler.handler", "python3.13", timeout, 128, environment, json.dumps(payload))
    )


def test_warm_reuse_and_environment(runner: LambdaRunner) -> None:
    first, second = invoke(runner, {}), invoke(runner, {})
    assert first.cold and not second.cold
    a, b = json.loads(first.payload), json.loads(second.payload)
    assert a["pid"] == b["pid"] and a["boot"] == b["boot"]  # same execution environment, init ran once
    assert (a["fn"], a["env"], a["endpoint"]) == ("fn", "hi", "http://127.0.0.1:9")
    assert 0 < a["remaining"] <= 10_000
    changed = invoke(runner, {}, env={"GREETING": "bye"})  # new configuration -> new environment
    assert changed.cold and json.loads(changed.payload)["env"] == "bye"


def test_unhandled_exception_has_lambdas_error_shape(runner: LambdaRunner) -> None:
    result = invoke(runner, {"fail": True})
    assert result.errored
    error = json.loads(result.payload)
    assert error["errorType"] == "StepError"
    assert json.loads(error["errorMessage"]) == {"code": "Boom", "message": "it broke"}
    assert error["stackTrace"]
    assert not invoke(runner, {}).cold  # the environment survives a handled failure


def test_timeout_kills_the_environment(runner: LambdaRunner) -> None:
    invoke(runner, {})
    result = invoke(runner, {"sleep": 5}, timeout=1)
    assert result.errored
    assert json.loads(result.payload)["errorType"] == "Sandbox.Timedout"
    assert invoke(runner, {}, timeout=1).cold  # next invocation starts a fresh environment


def test_init_error_is_reported(runner: LambdaRunner) -> None:
    result = invoke(runner, {}, name="broken")
    assert result.errored
    error = json.loads(result.payload)
    assert error["errorType"] == "RuntimeError" and "bad config" in error["errorMessage"]
