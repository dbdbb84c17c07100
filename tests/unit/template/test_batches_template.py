"""The batch fan-out in template.yaml (issue 14): SQS event sources with partial batch responses and a concurrency
knob, the in-flight bound as a parameter, dead-letter queues, and roles that touch only their own queue and table."""

from __future__ import annotations

from typing import Any

from .test_template import cfn, props, sam  # noqa: F401 - pytest fixtures


def _statements(cfn: dict[str, Any], function: str) -> list[dict[str, Any]]:  # noqa: F811
    role = cfn["Resources"][f"{function}Role"]["Properties"]
    return [s for policy in role.get("Policies", []) for s in policy["PolicyDocument"]["Statement"]]


def test_event_sources_report_item_failures_under_a_concurrency_bound(cfn: dict[str, Any]) -> None:  # noqa: F811
    submit = props(cfn, "BatchSubmitEventSource")
    assert submit["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    assert submit["ScalingConfig"] == {"MaximumConcurrency": {"Ref": "BatchSubmitConcurrency"}}
    assert submit["EventSourceArn"] == {"Fn::GetAtt": ["BatchQueue", "Arn"]}
    progress = props(cfn, "BatchProgressEventSource")
    assert progress["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    assert progress["EventSourceArn"] == {"Fn::GetAtt": ["BatchEventsQueue", "Arn"]}


def test_the_in_flight_bound_is_a_parameter_of_the_submit_function(sam: dict[str, Any], cfn: dict[str, Any]) -> None:  # noqa: F811
    assert sam["Parameters"]["BatchMaxInFlightJobs"]["Default"] >= 1
    env = props(cfn, "BatchSubmitFunction")["Environment"]["Variables"]
    assert env["BATCH_MAX_IN_FLIGHT_JOBS"] == {"Ref": "BatchMaxInFlightJobs"}


def test_batch_queues_dead_letter_and_outlast_the_function(cfn: dict[str, Any]) -> None:  # noqa: F811
    timeout = props(cfn, "BatchSubmitFunction")["Timeout"]
    for queue in ("BatchQueue", "BatchEventsQueue"):
        queue_props = props(cfn, queue)
        assert queue_props["RedrivePolicy"]["deadLetterTargetArn"] == {"Fn::GetAtt": ["BatchDeadLetterQueue", "Arn"]}
        assert queue_props["VisibilityTimeout"] >= 6 * timeout


def test_the_tracker_hears_only_terminal_events_of_batch_jobs(cfn: dict[str, Any]) -> None:  # noqa: F811
    subscription = props(cfn, "BatchEventsSubscription")
    assert subscription["RawMessageDelivery"] is True
    assert subscription["FilterPolicy"] == {
        "event_type": ["job.succeeded", "job.failed", "job.cancelled"],
        "batch_id": [{"exists": True}],
    }


def test_batch_roles_touch_only_their_own_queue_and_the_tables(cfn: dict[str, Any]) -> None:  # noqa: F811
    for function, queue in (("BatchSubmitFunction", "BatchQueue"), ("BatchProgressFunction", "BatchEventsQueue")):
        for statement in _statements(cfn, function):
            actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
            if any(a.startswith("sqs:") for a in actions):
                assert statement["Resource"] == {"Fn::GetAtt": [queue, "Arn"]}, (function, statement)
            if any(a.startswith("dynamodb:") for a in actions):
                assert statement["Resource"] in (
                    {"Fn::GetAtt": ["BatchesTable", "Arn"]},
                    {"Fn::GetAtt": ["JobsTable", "Arn"]},
                ), (function, statement)
            assert "dynamodb:DeleteItem" not in actions and "dynamodb:Scan" not in actions
