"""Step Functions execution names and the job deadline on the local stack, through the CLI (issue 9, defect 2).

AWS keeps an execution name taken for 90 days after the execution closes, longer than a job record lives
(``JobTtlDays``); StartExecution is idempotent only for the same name and input while the execution runs. The local
stack enforces the same rules, so a job that reuses an expired record's execution name shows here as it would on AWS.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError

from omnireel.events.event_types import TERMINAL_EVENT_TYPES
from omnireel_local import home as homedir
from tests.support.stack import LocalStack, start_stack, stop_stack

from .helpers import aws_client, wait_for

pytestmark = pytest.mark.e2e

JOB_TIMEOUT = "90"
DEADLINE_S = 4  # JobDeadlineSeconds of the safety-net stack (the local default is 5400; the sweep runs every 10 s here)


def aws(stack: LocalStack, service: str) -> Any:
    """A client as the local developer (`omnireel local env`): the local AWS enforces IAM."""
    return aws_client(stack, service)


def resource(stack: LocalStack, logical: str) -> str:
    return stack.state()["provisioned"]["resources"][logical]["id"]


def events_for(stack: LocalStack, job_id: str, want: int, timeout: float) -> list[dict]:
    """Terminal job events for ``job_id`` as a subscriber receives them (`omnireel events`; job.image_ready, a progress
    event, left out), until ``want`` arrived."""
    found: list[dict] = []

    def more() -> bool:
        result = stack.cli("events", "--json", "--job", job_id, timeout=60)
        assert result.returncode == 0, result.stderr
        events = map(json.loads, result.stdout.splitlines())  # the whole log of the job's events, every time
        found[:] = [e for e in events if e.get("event_type") in TERMINAL_EVENT_TYPES]
        return len(found) >= want

    wait_for(more, timeout, f"{want} event(s) for job {job_id}")
    return found


def submit(stack: LocalStack, prompt: str, key: str, *extra: str) -> Any:
    return stack.cli("submit", prompt, "--idempotency-key", key, "--json", *extra)


# ---------------------------------------------------------------- the local AWS enforces AWS's name rules
def test_step_functions_execution_names_stay_taken_after_the_execution_closes(stack: LocalStack) -> None:
    sfn = aws(stack, "stepfunctions")
    role = resource(stack, "PipelineStateMachineRole")
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
    table = resource(stack, "JobsTable")
    ddb = aws(stack, "dynamodb")
    first_item = ddb.get_item(TableName=table, Key={"job_id": {"S": job_id}}, ConsistentRead=True)["Item"]
    (first_event,) = events_for(stack, job_id, 1, timeout=60)  # exactly one delivery (moto patch 13)

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
    replayed, second_event = events_for(stack, job_id, 2, timeout=60)  # the log keeps the first job's event
    assert replayed == first_event
    assert second_event["event_type"] == "job.succeeded"
    assert second_event["event_id"] != first_event["event_id"]  # not dropped as a redelivery by de-duplicators

    machine = resource(stack, "PipelineStateMachine")
    names = {
        e["name"]: e["status"]
        for e in aws(stack, "stepfunctions").list_executions(stateMachineArn=machine)["executions"]
    }
    assert names[first_item["execution_name"]["S"]] == "SUCCEEDED"
    assert names[second_item["execution_name"]["S"]] == "SUCCEEDED"


# ---------------------------------------------------------------- the safety net: the job deadline
@pytest.fixture(scope="module")
def deadline_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    local = start_stack(
        tmp_path_factory.mktemp("omnireel-deadline"), "--no-relay", "--parameter", f"JobDeadlineSeconds={DEADLINE_S}"
    )
    try:
        yield local
    finally:
        left = stop_stack(local)
        assert not left, f"processes left after `omnireel local down`: {left}"


def sweeps(stack: LocalStack) -> int:
    """How many times the scheduled FailOverdueJobs function has been invoked so far (its START log lines)."""
    names = [
        n for n, f in stack.state()["provisioned"]["functions"].items() if f["logical_id"] == "FailOverdueJobsFunction"
    ]
    log = Path(stack.state()["logs"]) / f"lambda-{names[0]}.log"
    return len(re.findall(r"\tSTART RequestId", log.read_text())) if log.exists() else 0


def test_a_job_whose_execution_never_started_gets_exactly_one_job_failed(deadline_stack: LocalStack) -> None:
    stack = deadline_stack
    faults = stack.home / "fault-injection.json"
    faults.write_text(json.dumps({"sfn_start_failure_rate": 1.0}))  # StartExecution throttled, every attempt
    try:
        refused = submit(stack, "a job nobody will start", "never-started")
    finally:
        faults.write_text("{}")
    assert refused.returncode != 0, refused.stdout  # the submitter saw the failure and gave up
    ddb = aws(stack, "dynamodb")
    (item,) = ddb.scan(TableName=resource(stack, "JobsTable"))["Items"]
    job_id = item["job_id"]["S"]
    # The record was written and no execution will ever move it (the sweeper may already have failed it).
    assert set(item["stage_times"]["M"]) <= {"accepted", "failed"}, item["stage_times"]
    assert not aws(stack, "stepfunctions").list_executions(stateMachineArn=resource(stack, "PipelineStateMachine"))[
        "executions"
    ]

    (event,) = events_for(stack, job_id, 1, timeout=DEADLINE_S + 40)
    assert event["event_type"] == "job.failed"
    # WorkflowNotStarted, the sweep's rule for a job still accepted whose execution does not exist: since issue 34 the
    # deadline counts from the first admission (a never-admitted job's from the end of its max_queue_seconds), so
    # JobDeadlineExceeded no longer comes first for a job that never started.
    assert event["error"]["code"] == "WorkflowNotStarted" and event["error"]["stage"] == "accept"
    status = json.loads(stack.cli("status", job_id, "--json").stdout)
    assert status["status"] == "failed" and status["error"] == event["error"]
    assert set(status["stage_times"]) == {"accepted", "failed"}

    # Exactly one: later sweeps find nothing to do (wait for two more runs, then look again).
    seen = sweeps(stack)
    wait_for(lambda: sweeps(stack) >= seen + 2, 60, "two more runs of FailOverdueJobs")
    result = stack.cli("events", "--json", "--job", job_id, timeout=60)
    assert [e["event_id"] for e in map(json.loads, result.stdout.splitlines())] == [event["event_id"]]
