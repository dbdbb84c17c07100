"""The batch fan-out in template.yaml (issue 14): SQS event sources with partial batch responses and a concurrency
knob, the in-flight bound as a parameter, dead-letter queues, and roles that touch only their own queue and table."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.unit.template.helpers import of_type, props


def _statements(cfn: dict[str, Any], function: str) -> list[dict[str, Any]]:
    role = cfn["Resources"][f"{function}Role"]["Properties"]
    return [s for policy in role.get("Policies", []) for s in policy["PolicyDocument"]["Statement"]]


def test_event_sources_report_item_failures_under_a_concurrency_bound(cfn: dict[str, Any]) -> None:
    submit = props(cfn, "BatchSubmitEventSource")
    assert submit["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    assert submit["ScalingConfig"] == {"MaximumConcurrency": {"Ref": "BatchSubmitConcurrency"}}
    assert submit["EventSourceArn"] == {"Fn::GetAtt": ["BatchQueue", "Arn"]}
    progress = props(cfn, "BatchProgressEventSource")
    assert progress["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    assert progress["EventSourceArn"] == {"Fn::GetAtt": ["BatchEventsQueue", "Arn"]}


def test_the_in_flight_bound_is_a_parameter_of_the_submit_function(sam: dict[str, Any], cfn: dict[str, Any]) -> None:
    assert sam["Parameters"]["BatchMaxInFlightJobs"]["Default"] >= 1
    env = props(cfn, "BatchSubmitFunction")["Environment"]["Variables"]
    assert env["BATCH_MAX_IN_FLIGHT_JOBS"] == {"Ref": "BatchMaxInFlightJobs"}


def test_batch_queues_dead_letter_and_outlast_the_function(cfn: dict[str, Any]) -> None:
    timeout = props(cfn, "BatchSubmitFunction")["Timeout"]
    for queue in ("BatchQueue", "BatchEventsQueue"):
        queue_props = props(cfn, queue)
        assert queue_props["RedrivePolicy"]["deadLetterTargetArn"] == {"Fn::GetAtt": ["BatchDeadLetterQueue", "Arn"]}
        assert queue_props["VisibilityTimeout"] >= 6 * timeout


def test_the_tracker_hears_only_terminal_events_of_batch_jobs(cfn: dict[str, Any]) -> None:
    """Every terminal status's event (derived: issue 34 added job.expired, which a batch line's job can end with)."""
    from omnireel.events.job_events import event_type_for
    from omnireel.jobs.job import TERMINAL_STATUSES

    subscription = props(cfn, "BatchEventsSubscription")
    assert subscription["RawMessageDelivery"] is True
    assert subscription["FilterPolicy"] == {
        "event_type": [event_type_for(status) for status in TERMINAL_STATUSES],
        "batch_id": [{"exists": True}],
    }


def test_batch_roles_touch_only_their_own_queue_and_the_tables(cfn: dict[str, Any]) -> None:
    for function, queue in (("BatchSubmitFunction", "BatchQueue"), ("BatchProgressFunction", "BatchEventsQueue")):
        for statement in _statements(cfn, function):
            actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
            if any(a.startswith("sqs:") for a in actions):
                assert statement["Resource"] == {"Fn::GetAtt": [queue, "Arn"]}, (function, statement)
            if any(a.startswith("dynamodb:") for a in actions):
                assert statement["Resource"] in (
                    {"Fn::GetAtt": ["BatchesTable", "Arn"]},
                    {"Fn::GetAtt": ["JobsTable", "Arn"]},
                    {"Fn::GetAtt": ["UsageTable", "Arn"]},  # a line's job counts against its owner (issue 34)
                ), (function, statement)
            assert "dynamodb:DeleteItem" not in actions and "dynamodb:Scan" not in actions


# ---------------------------------------------------------------- issue 25 item 8: nothing is lost silently
ROOT = Path(__file__).resolve().parents[3]
_DLQ_KEYS = {"deadLetterTargetArn", "DeadLetterConfig", "OnFailure"}


def _referenced(value: Any) -> set[str]:
    """Logical ids a value points at (GetAtt X.Arn / Ref X), however deeply nested."""
    if isinstance(value, dict):
        if "Fn::GetAtt" in value:
            target = value["Fn::GetAtt"]
            return {target[0] if isinstance(target, list) else str(target).split(".")[0]}
        if "Ref" in value:
            return {value["Ref"]}
        return set().union(*(_referenced(v) for v in value.values())) if value else set()
    if isinstance(value, list):
        return set().union(*(_referenced(v) for v in value)) if value else set()
    return set()


def _dead_letter_targets(value: Any) -> set[str]:
    """Every resource named as a dead-letter target: SQS redrive policies, Lambda/EventBridge/SNS dead-letter
    configs and on-failure destinations, wherever in a resource's properties they appear."""
    found: set[str] = set()
    if isinstance(value, dict):
        for key, inner in value.items():
            found |= _referenced(inner) if key in _DLQ_KEYS else _dead_letter_targets(inner)
    elif isinstance(value, list):
        for inner in value:
            found |= _dead_letter_targets(inner)
    return found


def _queue_depth_alarms(cfn: dict[str, Any]) -> dict[str, str]:
    """Queue logical id -> the alarm that fires when one message is visible in it."""
    alarms: dict[str, str] = {}
    for name, alarm in of_type(cfn, "AWS::CloudWatch::Alarm").items():
        p = alarm["Properties"]
        if p.get("Namespace") != "AWS/SQS" or p.get("MetricName") != "ApproximateNumberOfMessagesVisible":
            continue
        assert p["Threshold"] <= 1 and p["ComparisonOperator"] == "GreaterThanOrEqualToThreshold", name
        assert {"Ref": "AlarmTopic"} in p["AlarmActions"], name
        (dimension,) = p["Dimensions"]
        assert dimension["Name"] == "QueueName" and dimension["Value"]["Fn::GetAtt"][1] == "QueueName", name
        alarms[dimension["Value"]["Fn::GetAtt"][0]] = name
    return alarms


def test_every_dead_letter_queue_has_an_alarm_and_a_runbook_line(cfn: dict[str, Any]) -> None:
    targets = set()
    for resource in cfn["Resources"].values():
        targets |= _dead_letter_targets(resource.get("Properties", {}))
    assert {"BatchDeadLetterQueue", "WebhookDeadLetterQueue", "FailedInvocationsQueue"} <= targets  # the rule sees them
    for target in targets:
        assert cfn["Resources"][target]["Type"] == "AWS::SQS::Queue", f"{target}: a dead-letter target that is not SQS"
    alarms = _queue_depth_alarms(cfn)
    missing = sorted(targets - set(alarms))
    assert not missing, f"dead-letter queues without a depth alarm: {missing}"
    runbook = (ROOT / "docs" / "operations" / "dead-letter-queues.md").read_text()
    for queue in targets:
        assert f"`{alarms[queue]}`" in runbook, f"docs/operations/dead-letter-queues.md: no entry for `{alarms[queue]}`"


def test_the_reconciler_runs_on_a_schedule_reads_only_its_index_and_its_repairs_are_alarmed(
    cfn: dict[str, Any],
) -> None:
    from omnireel.aws.batch_store import OPEN_ITEMS_INDEX

    (index,) = props(cfn, "BatchesTable")["GlobalSecondaryIndexes"]
    assert index["IndexName"] == OPEN_ITEMS_INDEX
    assert [k["AttributeName"] for k in index["KeySchema"]] == ["open_shard", "opened_at"]
    statements = _statements(cfn, "ReconcileBatchesFunction")
    queries = [
        s for s in statements if "dynamodb:Query" in (s["Action"] if isinstance(s["Action"], list) else [s["Action"]])
    ]
    assert {"Fn::Sub": "${BatchesTable.Arn}/index/open-items"} in [q["Resource"] for q in queries]
    for statement in statements:
        actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
        assert "dynamodb:Scan" not in actions and "dynamodb:DeleteItem" not in actions
    env = props(cfn, "ReconcileBatchesFunction")["Environment"]["Variables"]
    assert env["BATCH_RECONCILE_GRACE_SECONDS"] == {"Ref": "BatchReconcileGraceSeconds"}
    rules = [
        r["Properties"]
        for r in of_type(cfn, "AWS::Events::Rule").values()
        if r["Properties"].get("Targets", [{}])[0].get("Arn") == {"Fn::GetAtt": ["ReconcileBatchesFunction", "Arn"]}
    ]
    assert [r["ScheduleExpression"] for r in rules] == ["rate(5 minutes)"]
    # The repairs metric the handler emits is the one alarmed, with a runbook line.
    source = (ROOT / "functions" / "reconcile_batches" / "handler.py").read_text()
    alarm = props(cfn, "BatchReconcilerRepairsAlarm")
    assert f'name="{alarm["MetricName"]}"' in source and alarm["Namespace"] == "omnireel"
    assert alarm["Threshold"] == 1 and alarm["AlarmActions"] == [{"Ref": "AlarmTopic"}]
    assert "`BatchReconcilerRepairsAlarm`" in (ROOT / "docs" / "operations" / "dead-letter-queues.md").read_text()


def test_the_last_receive_the_function_knows_is_the_queues(cfn: dict[str, Any]) -> None:
    env = props(cfn, "BatchSubmitFunction")["Environment"]["Variables"]
    assert int(env["BATCH_MAX_RECEIVES"]) == props(cfn, "BatchQueue")["RedrivePolicy"]["maxReceiveCount"]
    assert env["BATCH_MAX_DEFERRAL_SECONDS"] == {"Ref": "BatchMaxDeferralSeconds"}
