"""template.yaml's timeouts, retries and failure paths as deployed: the pipeline's timeouts cover a wake-up from zero,
each state runs its own function within its timeout, the job deadline outlasts the longest execution, asynchronous
invocations and ended executions have somewhere to fail to, SQS-fed functions are sized for their worst batch, and
webhook retries last a day."""

from __future__ import annotations

from typing import Any

import pytest

from tests.unit.template.helpers import of_type, props

# Event sources whose service invokes Lambda asynchronously (so failures need an on-failure destination).
ASYNC_EVENT_TYPES = {"S3", "SNS", "EventBridgeRule", "Schedule", "ScheduleV2", "CloudWatchEvent"}


def test_pipeline_timeouts_cover_a_wake_up_from_zero(cfn: dict[str, Any]) -> None:
    p = {k: v.get("Default") for k, v in cfn["Parameters"].items()}
    wake_up = 15 * 60  # generous: documented as about 10 minutes
    assert p["VideoRequestTtlSeconds"] == 3600 and p["VideoRequestTtlSeconds"] > wake_up
    assert p["VideoHeartbeatSeconds"] > p["VideoRequestTtlSeconds"] + p["VideoInvocationTimeoutSeconds"]
    assert p["VideoCallbackTimeoutSeconds"] >= p["VideoHeartbeatSeconds"]
    # On AWS the first heartbeat interval starts with the task, so it also covers InvokeVideo's own run (token stored,
    # InvokeEndpointAsync) before its Lambda heartbeats once the render is queued; the image is a state of its own.
    invoke_step = props(cfn, "InvokeVideoFunction")["Timeout"]
    assert p["VideoHeartbeatSeconds"] > p["VideoRequestTtlSeconds"] + p["VideoInvocationTimeoutSeconds"] + invoke_step


def test_each_pipeline_state_runs_its_own_function_within_its_timeout(sam: dict[str, Any], cfn: dict[str, Any]) -> None:
    """Issue 26: GenerateImage and InvokeVideo are separate states backed by separate functions; a synchronous task's
    TimeoutSeconds covers its function's Timeout (so a slow attempt ends as the Lambda's error, not the state's)."""
    from omnireel_template import definition_file, render_definition, state_machine_substitutions

    parameters = {k: str(v.get("Default", "")) for k, v in sam["Parameters"].items()}
    subs = state_machine_substitutions(sam, "PipelineStateMachine", lambda value: f"arn:{value}", parameters)
    states = render_definition(definition_file(sam, "PipelineStateMachine").read_text(), subs)["States"]
    functions = {
        "GenerateImage": "GenerateImageFunction",
        "InvokeVideo": "InvokeVideoFunction",
    }
    for state, function in functions.items():
        target = states[state]["Parameters"]["FunctionName"]
        assert [name for name in functions.values() if f"'{name}" in target] == [function], (state, target)
    image_timeout = props(cfn, "GenerateImageFunction")["Timeout"]
    assert states["GenerateImage"]["TimeoutSeconds"] >= image_timeout


def test_admission_bounds_an_ended_jobs_image_call_by_the_image_steps_timeout(cfn: dict[str, Any]) -> None:
    """omnireel.admission.gate.IMAGE_STEP_TIMEOUT_S: how long after a job ended its image step may still hold the
    image slot (the endpoint serving its call) - the function's Timeout, which a running step cannot outlive."""
    from omnireel.admission.gate import IMAGE_STEP_TIMEOUT_S

    assert props(cfn, "GenerateImageFunction")["Timeout"] == IMAGE_STEP_TIMEOUT_S


# ---------------------------------------------------------------- the job deadline (issue 9, defect 2)
def longest_execution_s(template: dict[str, Any], parameters: dict[str, str]) -> float:
    """An upper bound of how long one execution can run: each task state's TimeoutSeconds times its attempts (1 + every
    retrier's MaxAttempts) plus the retry waits. The ASL has no loop, so a path visits each state at most once."""
    from omnireel_template import definition_file, render_definition, state_machine_substitutions

    subs = state_machine_substitutions(template, "PipelineStateMachine", lambda _: "arn:function", parameters)
    states = render_definition(definition_file(template, "PipelineStateMachine").read_text(), subs)["States"]
    from omnireel.admission.gate import REQUEUE_SECONDS

    total = 0.0
    for name, state in states.items():
        if state["Type"] in ("Succeed", "Fail", "Pass", "Choice"):
            continue
        assert state["Type"] == "Task", f"{name}: extend longest_execution_s for {state['Type']} states"
        retries = state.get("Retry", [])
        attempts = 1 + sum(r.get("MaxAttempts", 3) for r in retries)
        waits = sum(
            r.get("IntervalSeconds", 1) * r.get("BackoffRate", 2.0) ** k
            for r in retries
            for k in range(r.get("MaxAttempts", 3))
        )
        if name.startswith("WaitFor"):
            # Admission's waits (issue 34): a retry of one re-invokes its Lambda (seconds), which failed before the
            # wait began, so the wait itself counts once. The deadline counts from the first admission: the first
            # image wait (max_queue_seconds) is outside it, and each later attempt of GenerateImage may wait again,
            # at most REQUEUE_SECONDS (its TimeoutSecondsPath). InvokeVideo keeps its slot across retries: one wait.
            guarded = states[state["Next"]]
            again = sum(r.get("MaxAttempts", 3) for r in guarded.get("Retry", []))
            wait = REQUEUE_SECONDS * again if "TimeoutSecondsPath" in state else state["TimeoutSeconds"]
            total += wait + _LAMBDA_TIMEOUT_S * (attempts - 1) + waits
            continue
        total += state["TimeoutSeconds"] * attempts + waits
    return total


_LAMBDA_TIMEOUT_S = 60  # Globals.Function.Timeout (wait_for_slot's)


@pytest.mark.parametrize("where", ["aws", "local"])
def test_job_deadline_outlasts_the_longest_execution(sam: dict[str, Any], where: str) -> None:
    from omnireel_local.provision import LOCAL_PARAMETERS

    parameters = {k: str(v.get("Default", "")) for k, v in sam["Parameters"].items()}
    if where == "local":
        parameters |= LOCAL_PARAMETERS
    assert int(parameters["JobDeadlineSeconds"]) > longest_execution_s(sam, parameters)


def async_invoked(sam: dict[str, Any]) -> set[str]:
    """Functions invoked asynchronously, derived from their event sources (a new one cannot skip the check)."""
    return {
        name
        for name, resource in sam["Resources"].items()
        if resource["Type"] == "AWS::Serverless::Function"
        and any(e["Type"] in ASYNC_EVENT_TYPES for e in (resource["Properties"].get("Events") or {}).values())
    }


def test_async_invoked_functions_have_an_on_failure_destination(sam: dict[str, Any], cfn: dict[str, Any]) -> None:
    configs = {
        c["Properties"]["FunctionName"]["Ref"]: c["Properties"]
        for c in of_type(cfn, "AWS::Lambda::EventInvokeConfig").values()
    }
    wanted = async_invoked(sam)
    assert wanted >= {"InboxFunction", "AsyncResultFunction", "WorkflowEndedFunction", "FailOverdueJobsFunction"}
    assert set(configs) >= wanted
    for name in wanted:
        on_failure = configs[name]["DestinationConfig"]["OnFailure"]
        assert on_failure["Destination"] == {"Fn::GetAtt": ["FailedInvocationsQueue", "Arn"]}, name


def test_every_ended_execution_reaches_the_safety_net(sam: dict[str, Any]) -> None:
    event = sam["Resources"]["WorkflowEndedFunction"]["Properties"]["Events"]["ExecutionEnded"]
    assert event["Type"] == "EventBridgeRule"
    pattern = event["Properties"]["Pattern"]
    assert pattern["source"] == ["aws.states"]
    assert set(pattern["detail"]["status"]) == {"FAILED", "TIMED_OUT", "ABORTED"}
    assert pattern["detail"]["stateMachineArn"] == [{"Ref": "PipelineStateMachine"}]
    assert event["Properties"]["DeadLetterConfig"] == {"Arn": {"Fn::GetAtt": ["FailedInvocationsQueue", "Arn"]}}


def test_every_sqs_fed_function_is_sized_for_its_worst_batch(cfn: dict[str, Any]) -> None:
    """Issue 25: for every SQS event source mapping, the queue's visibility is at least 6x the function's Timeout
    (AWS's rule). For the webhook delivery function (its records may each wait on a receiver up to the attempt
    deadline), a batch whose every receiver holds its attempt to the deadline ends inside the Timeout, and the longest
    backoff's receive-to-invoke margin covers the visibility the poller's receive starts with."""
    from omnireel.webhooks.delivery import RECEIVE_TO_INVOKE_MARGIN_S, VISIBILITY_PER_TIMEOUT, worst_case_invocation_s

    resources = cfn["Resources"]
    mappings = {
        name: r["Properties"]
        for name, r in resources.items()
        if r["Type"] == "AWS::Lambda::EventSourceMapping"
        and "Fn::GetAtt" in r["Properties"]["EventSourceArn"]
        and resources[r["Properties"]["EventSourceArn"]["Fn::GetAtt"][0]]["Type"] == "AWS::SQS::Queue"
    }
    assert mappings, "no SQS event source mapping found"
    for name, mapping in mappings.items():
        queue = resources[mapping["EventSourceArn"]["Fn::GetAtt"][0]]["Properties"]
        function = mapping["FunctionName"]["Ref"]
        timeout = props(cfn, function).get("Timeout", 3)
        visibility = queue.get("VisibilityTimeout", 30)
        assert visibility >= VISIBILITY_PER_TIMEOUT * timeout, f"{name}: visibility {visibility} < 6 x {timeout}"
        env = props(cfn, function).get("Environment", {}).get("Variables", {})
        if "WEBHOOK_ATTEMPT_DEADLINE_SECONDS" not in env:
            continue
        batch = int(mapping.get("BatchSize", 10))
        concurrency = int(env["WEBHOOK_DELIVERY_CONCURRENCY"])
        worst = worst_case_invocation_s(batch, concurrency, float(env["WEBHOOK_ATTEMPT_DEADLINE_SECONDS"]))
        assert worst <= timeout, f"{function}: a batch of hanging receivers needs {worst} s > Timeout {timeout}"
        assert visibility <= RECEIVE_TO_INVOKE_MARGIN_S, "the backoff cap assumes the receive was this recent"


def test_webhook_retries_last_over_a_day_then_reach_the_dead_letter_queue(
    sam: dict[str, Any], cfn: dict[str, Any]
) -> None:
    from omnireel.webhooks.delivery import retry_span_s

    queue = props(cfn, "WebhookQueue")
    attempts = queue["RedrivePolicy"]["maxReceiveCount"]
    env = props(cfn, "WebhookDeliveryFunction")["Environment"]["Variables"]
    assert int(env["WEBHOOK_MAX_ATTEMPTS"]) == attempts
    base = int(sam["Parameters"]["WebhookRetryBaseSeconds"]["Default"])
    span = retry_span_s(base, attempts)
    assert span >= 86400, "webhook retries must last at least 24 hours"
    assert queue["MessageRetentionPeriod"] > span + 3600, "the queue must keep a message through its whole schedule"
    assert queue["RedrivePolicy"]["deadLetterTargetArn"] == {"Fn::GetAtt": ["WebhookDeadLetterQueue", "Arn"]}
    assert queue["VisibilityTimeout"] >= props(cfn, "WebhookDeliveryFunction")["Timeout"]
    assert sam["Parameters"]["WebhookAllowLoopbackHttp"]["Default"] == "false"
