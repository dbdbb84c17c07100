"""Step Functions execution names on the local stack, through the CLI (issue 9, defect 2).

AWS keeps an execution name taken for 90 days after the execution closes, longer than a job record lives
(``JobTtlDays``); StartExecution is idempotent only for the same name and input while the execution runs. The local
stack enforces the same rules, so a job that reuses an expired record's execution name shows here as it would on AWS.
(Until 2026-12-06 these tests were in test_executions.py, which runs in the waiting lane for its deadline stack: there
they made that lane start a shared stack for two tests.)
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from botocore.exceptions import ClientError

from omnireel_local import home as homedir
from tests.support.stack import LocalStack

from .helpers import aws_client, resource_id, terminal_events, wait_for

pytestmark = pytest.mark.e2e

JOB_TIMEOUT = "90"


def submit(stack: LocalStack, prompt: str, key: str, *extra: str) -> Any:
    return stack.cli("submit", prompt, "--idempotency-key", key, "--json", *extra)


# ---------------------------------------------------------------- the local AWS enforces AWS's name rules
def test_step_functions_execution_names_stay_taken_after_the_execution_closes(stack: LocalStack) -> None:
    sfn = aws_client(stack, "stepfunctions")
    role = resource_id(stack, "PipelineStateMachineRole")
    role_arn = f"arn:aws:iam::{homedir.ACCOUNT_ID}:role/{role}"
    suffix = str(int(time.time() * 1000))
    waiting = sfn.create_state_machine(
        name=f"{homedir.STACK_NAME}-scratch-names-wait-{suffix}",
        roleArn=role_arn,
        definition=json.dumps({"StartAt": "W", "States": {"W": {"Type": "Wait", "Seconds": 300, "End": True}}}),
    )["stateMachineArn"]
    quick = sfn.create_state_machine(
        name=f"{homedir.STACK_NAME}-scratch-names-pass-{suffix}",
        roleArn=role_arn,
        definition=json.dumps({"StartAt": "P", "States": {"P": {"Type": "Pass", "End": True}}}),
    )["stateMachineArn"]
    running = sfn.start_execution(stateMachineArn=waiting, name="job-a", input='{"job_id": "a"}')["executionArn"]
    try:
        # Same name and input while it runs: the same execution (idempotent).
        again = sfn.start_execution(stateMachineArn=waiting, name="job-a", input='{"job_id": "a"}')["executionArn"]
        assert again == running
        # Same name, another input, while it runs: refused.
        with pytest.raises(ClientError) as other_input:
            sfn.start_execution(stateMachineArn=waiting, name="job-a", input='{"job_id": "b"}')
        assert other_input.value.response["Error"]["Code"] == "ExecutionAlreadyExists"
    finally:
        sfn.stop_execution(executionArn=running)
    wait_for(lambda: sfn.describe_execution(executionArn=running)["status"] == "ABORTED", 30, "the stopped execution")

    closed = sfn.start_execution(stateMachineArn=quick, name="job-b", input='{"job_id": "b"}')["executionArn"]
    wait_for(lambda: sfn.describe_execution(executionArn=closed)["status"] == "SUCCEEDED", 30, "the Pass execution")
    for machine, name, execution_input in ((quick, "job-b", '{"job_id": "b"}'), (waiting, "job-a", '{"job_id": "a"}')):
        with pytest.raises(ClientError) as taken:  # a closed (succeeded / aborted) execution's name stays taken
            sfn.start_execution(stateMachineArn=machine, name=name, input=execution_input)
        assert taken.value.response["Error"]["Code"] == "ExecutionAlreadyExists", name

    for bad in ("x" * 81, "job:1", "job 1", "job/1"):  # AWS's name rules (moto does not check them: patch 2)
        with pytest.raises(ClientError) as invalid:
            sfn.start_execution(stateMachineArn=quick, name=bad, input="{}")
        assert invalid.value.response["Error"]["Code"] == "InvalidName", bad
    assert sfn.start_execution(stateMachineArn=quick, name="x" * 80, input="{}")["executionArn"].endswith("x" * 80)


# ---------------------------------------------------------------- defect 2: the same key after the record expired
def test_a_reused_idempotency_key_after_the_record_expired_runs_a_new_job(stack: LocalStack) -> None:
    key = f"ttl-reuse-{time.time_ns()}"
    prompt = "a kite over a windy beach"
    first = submit(stack, prompt, key, "--wait", "--timeout", JOB_TIMEOUT)
    assert first.returncode == 0, first.stderr
    job_id = json.loads(first.stdout)["job_id"]
    table = resource_id(stack, "JobsTable")
    ddb = aws_client(stack, "dynamodb")
    first_item = ddb.get_item(TableName=table, Key={"job_id": {"S": job_id}}, ConsistentRead=True)["Item"]
    (first_event,) = terminal_events(stack, job_id, 1, timeout=60)  # exactly one delivery (moto patch 13)

    # DynamoDB TTL deletes the record after JobTtlDays; the execution it started keeps its name (AWS: 90 days).
    ddb.delete_item(TableName=table, Key={"job_id": {"S": job_id}})

    # Before the fix: 202, StartExecution -> ExecutionAlreadyExists read as success, the job stayed `accepted`
    # with no event, and this wait timed out.
    second = submit(stack, prompt, key, "--wait", "--timeout", JOB_TIMEOUT)
    assert second.returncode == 0, f"{second.stdout}\n{second.stderr}"
    job = json.loads(second.stdout)
    assert job["job_id"] == job_id and job["status"] == "succeeded"
    second_item = ddb.get_item(TableName=table, Key={"job_id": {"S": job_id}}, ConsistentRead=True)["Item"]
    assert second_item["execution_name"]["S"] != first_item["execution_name"]["S"]
    replayed, second_event = terminal_events(stack, job_id, 2, timeout=60)  # the log keeps the first job's event
    assert replayed == first_event
    assert second_event["event_type"] == "job.succeeded"
    assert second_event["event_id"] != first_event["event_id"]  # not dropped as a redelivery by de-duplicators

    machine = resource_id(stack, "PipelineStateMachine")
    names = {
        e["name"]: e["status"]
        for e in aws_client(stack, "stepfunctions").list_executions(stateMachineArn=machine)["executions"]
    }
    assert names[first_item["execution_name"]["S"]] == "SUCCEEDED"
    assert names[second_item["execution_name"]["S"]] == "SUCCEEDED"
