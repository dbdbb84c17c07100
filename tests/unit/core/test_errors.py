import json

import pytest

from omnireel.core.errors import (
    EndpointThrottled,
    InvalidRequest,
    RetryableStepError,
    StepError,
    as_step_error,
    decode_step_failure,
)


def test_retryable_domain_errors_become_retryable_step_errors():
    error = as_step_error(EndpointThrottled("slow down"))
    assert type(error).__name__ == "RetryableStepError"  # the name Step Functions' Retry matches
    assert json.loads(str(error)) == {"code": "EndpointThrottled", "message": "slow down"}
    assert type(as_step_error(InvalidRequest("bad"))) is StepError


@pytest.mark.parametrize(
    ("error", "cause", "expected"),
    [
        # A step Lambda raised StepError: Cause is Lambda's error payload.
        (
            "StepError",
            json.dumps({"errorType": "StepError", "errorMessage": json.dumps({"code": "X", "message": "m"})}),
            {"code": "X", "message": "m"},
        ),
        # An unexpected crash inside a Lambda.
        (
            "KeyError",
            json.dumps({"errorType": "KeyError", "errorMessage": "'image'"}),
            {"code": "KeyError", "message": "'image'"},
        ),
        # async_result's SendTaskFailure cause.
        (
            "VideoRenderFailed",
            json.dumps({"code": "VideoRenderFailed", "message": "oom"}),
            {"code": "VideoRenderFailed", "message": "oom"},
        ),
        # Step Functions' own errors.
        ("States.Timeout", None, {"code": "Timeout", "message": "States.Timeout"}),
        ("States.TaskFailed", "not json", {"code": "TaskFailed", "message": "not json"}),
        (None, None, {"code": "InternalError", "message": "InternalError"}),
    ],
)
def test_decode_step_failure(error, cause, expected):
    assert decode_step_failure(error, cause) == expected


def test_step_error_round_trip():
    raised = RetryableStepError("EndpointUnavailable", "HTTP 503")
    payload = json.dumps({"errorType": type(raised).__name__, "errorMessage": str(raised)})
    assert decode_step_failure("RetryableStepError", payload) == {"code": "EndpointUnavailable", "message": "HTTP 503"}
