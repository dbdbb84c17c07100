"""Static rules of the state machine that the code depends on."""

import json
from pathlib import Path

from omnireel.steps import CALLBACK_FAILURE_CODES

ASL = Path(__file__).resolve().parents[3] / "statemachine" / "pipeline.asl.json"


def _states() -> dict:
    # Substitutions are numbers only; any digit makes the document parse.
    text = ASL.read_text()
    for name in ("RetryIntervalSeconds", "ImageMaxAttempts", "VideoCallbackTimeoutSeconds", "VideoHeartbeatSeconds"):
        text = text.replace("${" + name + "}", "1")
    return json.loads(text)["States"]


def test_callback_failures_are_never_retried():
    """States.TaskFailed (retried for crashes) matches every error name, so the first retrier must stop these."""
    retriers = _states()["GenerateImageAndVideo"]["Retry"]
    assert retriers[0]["MaxAttempts"] == 0
    assert set(CALLBACK_FAILURE_CODES) <= set(retriers[0]["ErrorEquals"])
    assert {"States.Timeout", "States.HeartbeatTimeout", "StepError"} <= set(retriers[0]["ErrorEquals"])


def test_non_retryable_step_errors_come_first_everywhere():
    for name, state in _states().items():
        retriers = state.get("Retry", [])
        if any("StepError" in r["ErrorEquals"] for r in retriers):
            assert "StepError" in retriers[0]["ErrorEquals"] and retriers[0]["MaxAttempts"] == 0, name


def test_every_task_failure_is_caught_or_terminal():
    for name, state in _states().items():
        if state["Type"] == "Task" and name != "RecordFailure":
            assert any("States.ALL" in c["ErrorEquals"] for c in state.get("Catch", [])), name
