"""Static rules of the state machine that the code depends on."""

import json
from pathlib import Path

from omnireel.jobs.steps import CALLBACK_FAILURE_CODES

ASL = Path(__file__).resolve().parents[3] / "statemachine" / "pipeline.asl.json"


def _definition() -> dict:
    # Substitutions are numbers only; any digit makes the document parse.
    text = ASL.read_text()
    for name in ("RetryIntervalSeconds", "ImageMaxAttempts", "VideoCallbackTimeoutSeconds", "VideoHeartbeatSeconds"):
        text = text.replace("${" + name + "}", "1")
    return json.loads(text)


def _states() -> dict:
    return _definition()["States"]


def test_callback_failures_are_never_retried():
    """States.TaskFailed (retried for crashes) matches every error name, so the first retrier must stop these."""
    retriers = _states()["InvokeVideo"]["Retry"]
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


def test_one_state_per_stage():
    """Issue 26: the image (with staging) and the render are separate states, so an execution's history shows which
    stage ran and for how long; the image call counts against neither the callback's timeout nor its heartbeat."""
    definition = _definition()
    states = definition["States"]
    assert definition["StartAt"] == "GenerateImage"
    image, video = states["GenerateImage"], states["InvokeVideo"]
    assert image["Resource"] == "arn:aws:states:::lambda:invoke"  # synchronous: ends when the Lambda returns
    assert "HeartbeatSeconds" not in image and image["TimeoutSeconds"] > 0
    # Admission (issue 34): GenerateImage goes on to InvokeVideo when it held an image slot, else waits for one.
    assert image["Next"] == "ImageAdmitted" and "Retry" in image and "Catch" in image
    assert states["ImageAdmitted"]["Default"] == "InvokeVideo"
    assert image["Parameters"]["FunctionName"] != video["Parameters"]["FunctionName"]
    assert "task_token.$" not in image["Parameters"]["Payload"]
    assert video["Resource"] == "arn:aws:states:::lambda:invoke.waitForTaskToken"
    assert video["Parameters"]["Payload"]["task_token.$"] == "$$.Task.Token"
    assert {"TimeoutSeconds", "HeartbeatSeconds"} <= set(video)
    # Only the render and admission's waits for a slot wait on a token.
    waiting = [name for name, state in states.items() if state.get("Resource", "").endswith(".waitForTaskToken")]
    assert sorted(waiting) == ["InvokeVideo", "WaitForImageSlot", "WaitForVideoSlot"]
    assert {c["Next"] for c in video["Catch"]} == {"ReconcileVideo", "RecordFailure"}


def test_a_job_not_admitted_waits_for_a_slot_and_comes_back_to_the_stage_it_waits_for():
    """Issue 34: each admission wait parks the job with its task token and returns to the state it guards; the image
    wait's timeout is the job's remaining queue limit (GenerateImage's answer), and its timeout ends the job expired."""
    states = _states()
    image_wait, video_wait = states["WaitForImageSlot"], states["WaitForVideoSlot"]
    assert image_wait["Next"] == "GenerateImage" and video_wait["Next"] == "InvokeVideo"
    assert image_wait["TimeoutSecondsPath"] == "$.admission.queue_seconds"
    assert states["GenerateImage"]["ResultPath"] == "$.admission"
    assert set(states["GenerateImage"]["ResultSelector"]) == {"admitted.$", "queue_seconds.$"}
    assert image_wait["Catch"][0] == {
        "ErrorEquals": ["States.Timeout"],
        "ResultPath": "$.error",
        "Next": "RecordExpired",
    }
    assert states["RecordExpired"]["Parameters"]["Payload"]["outcome"] == "expired"
    for wait in (image_wait, video_wait):
        assert wait["Parameters"]["Payload"]["task_token.$"] == "$$.Task.Token"
        assert "States.Timeout" in wait["Retry"][0]["ErrorEquals"] and wait["Retry"][0]["MaxAttempts"] == 0
    (choice,) = [c for c in states["EventPublished"]["Choices"] if c.get("Next") == "WaitForVideoSlot"]
    assert "$.video.admitted" in json.dumps(choice)
