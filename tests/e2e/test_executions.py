"""The job deadline's safety net on the local stack, through the CLI (issue 9, defect 2): a job no execution will end
gets exactly one job.failed from the scheduled sweep.

Its stack of its own (``JobDeadlineSeconds`` 4) waits for the sweep's runs, which is why this file runs in the waiting
lane (Makefile ``WAITING_LANE``); the execution-name tests that need no such wait are in test_execution_names.py.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.stack import LocalStack, start_stack, stop_stack

from .helpers import aws_client, resource_id, terminal_events, wait_for

pytestmark = pytest.mark.e2e

DEADLINE_S = 4  # JobDeadlineSeconds of the safety-net stack (the local default is 5400; the sweep runs every 10 s here)


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
        refused = stack.cli("submit", "a job nobody will start", "--idempotency-key", "never-started", "--json")
    finally:
        faults.write_text("{}")
    assert refused.returncode != 0, refused.stdout  # the submitter saw the failure and gave up
    ddb = aws_client(stack, "dynamodb")
    (item,) = ddb.scan(TableName=resource_id(stack, "JobsTable"))["Items"]
    job_id = item["job_id"]["S"]
    # The record was written and no execution will ever move it (the sweeper may already have failed it).
    assert set(item["stage_times"]["M"]) <= {"accepted", "failed"}, item["stage_times"]
    machine = resource_id(stack, "PipelineStateMachine")
    assert not aws_client(stack, "stepfunctions").list_executions(stateMachineArn=machine)["executions"]

    (event,) = terminal_events(stack, job_id, 1, timeout=DEADLINE_S + 40)
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
