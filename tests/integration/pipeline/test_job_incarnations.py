"""Execution names and the job deadline (issue 9, defect 2), with the real ASL and handlers on moto.

Step Functions keeps an execution's name taken after it closes (AWS: 90 days, longer than a job record lives), and
StartExecution is idempotent only for the same name and input while the execution runs. A job record made again
after TTL deleted the old one must start a new execution; a job that never got a running execution must still end
in exactly one terminal event.
"""

import json
import threading
from datetime import timedelta

import pytest

from omnireel.core.clock import parse_time
from omnireel.core.errors import ExecutionNameTaken
from omnireel.jobs import deadline
from tests.integration.pipeline.harness import Context, tiny_mp4
from tests.integration.pipeline.test_state_machine import PROMPT


def post(pipeline, key):
    response = pipeline.api("POST", "/jobs", PROMPT, {"Idempotency-Key": key})
    assert response["statusCode"] in (200, 202), response
    return response["json"]["job_id"]


def run_to_success(pipeline, job_id):
    pipeline.wait_rendering(job_id)
    pipeline.write_output(job_id, tiny_mp4())
    pipeline.publish_notification(job_id, "Completed")
    assert pipeline.execution(job_id)["status"] == "SUCCEEDED"


def expire_record(pipeline, job_id):
    """What DynamoDB TTL does after JobTtlDays: the item is deleted (the closed execution's name stays taken)."""
    pipeline.ddb.delete_item(TableName=pipeline.table, Key={"job_id": {"S": job_id}})


def test_a_reused_idempotency_key_after_the_record_expired_runs_a_new_job_to_its_terminal_event(pipeline):
    job_id = post(pipeline, "order-ttl")
    first_execution = pipeline.execution_arn(job_id)
    run_to_success(pipeline, job_id)
    (first_event,) = pipeline.consumer_events()
    assert first_event["event_type"] == "job.succeeded"

    expire_record(pipeline, job_id)
    again = post(pipeline, "order-ttl")
    assert again == job_id  # the same key and caller still name the same job id
    # Before the fix: StartExecution answered ExecutionAlreadyExists (the old, closed execution's name), read as
    # success, and the job stayed `accepted` with no event: this wait timed out.
    run_to_success(pipeline, job_id)
    assert pipeline.execution_arn(job_id) != first_execution
    assert pipeline.job(job_id)["status"] == "succeeded"
    events = pipeline.consumer_events()
    assert [(e["event_type"], e["job_id"]) for e in events] == [("job.succeeded", job_id)]
    # A consumer that de-duplicates on event_id must not drop the new record's event as a redelivery of the old one.
    assert events[0]["event_id"] != first_event["event_id"]
    assert sorted(e["name"] for e in pipeline.executions()) == sorted(
        arn.rsplit(":", 1)[1] for arn in (first_execution, pipeline.execution_arn(job_id))
    )


def test_a_replay_after_start_execution_failed_starts_exactly_one_execution(pipeline):
    workflow = pipeline.handlers["api"].workflow
    real_start = workflow.start
    calls = []

    def crash_once(job_id, name):
        calls.append(name)
        if len(calls) == 1:
            raise ConnectionError("the function died between the record write and StartExecution")
        return real_start(job_id, name)

    workflow.start = crash_once
    try:
        with pytest.raises(ConnectionError):
            pipeline.api("POST", "/jobs", PROMPT, {"Idempotency-Key": "order-crash"})
        job_id = post(pipeline, "order-crash")  # the client retries with its key
        assert post(pipeline, "order-crash") == job_id  # and once more while the execution runs
    finally:
        workflow.start = real_start
    assert calls[0] == calls[1]  # the record's own name, not a new one per attempt
    (execution,) = pipeline.executions()
    assert execution["executionArn"] == pipeline.execution_arn(job_id)
    run_to_success(pipeline, job_id)
    assert [e["event_type"] for e in pipeline.consumer_events()] == ["job.succeeded"]


def test_a_name_held_by_another_input_is_an_error_not_a_silent_success(pipeline):
    workflow = pipeline.handlers["api"].workflow
    name = "00000000-0000-4000-8000-000000000000-taken"
    pipeline.sfn.start_execution(stateMachineArn=pipeline.state_machine, name=name, input=json.dumps({"job_id": "x"}))
    with pytest.raises(ExecutionNameTaken, match="taken by an execution with another input"):
        workflow.start("00000000-0000-4000-8000-000000000000", name)


def test_a_job_whose_execution_never_started_gets_exactly_one_job_failed_from_the_deadline(pipeline, monkeypatch):
    workflow = pipeline.handlers["api"].workflow
    monkeypatch.setattr(workflow, "start", lambda job_id, name: (_ for _ in ()).throw(ConnectionError("throttled")))
    with pytest.raises(ConnectionError):
        pipeline.api("POST", "/jobs", PROMPT, {"Idempotency-Key": "order-lost"})
    monkeypatch.undo()
    (stuck,) = [item["job_id"]["S"] for item in pipeline.ddb.scan(TableName=pipeline.table)["Items"]]
    # The caller gave up: nothing will ever start that job's execution.
    sweep = pipeline.handlers["fail_overdue_jobs"]
    assert sweep.handler(scheduled_event(), Context("fail_overdue_jobs"))["failed"] == []  # nothing overdue yet
    running = post(pipeline, "order-running")  # a healthy job, accepted later
    created = {job: pipeline.job(job)["created_at"] for job in (stuck, running)}
    assert created[stuck] < created[running]

    # Time passes until the running job is exactly at its deadline and the stuck one beyond it: move the sweeper's
    # clock instead of sleeping.
    at = parse_time(created[running]) + timedelta(seconds=sweep.settings.job_deadline_seconds)
    monkeypatch.setattr(deadline, "now", lambda: at)
    assert sweep.handler(scheduled_event(), Context("fail_overdue_jobs"))["failed"] == [stuck]
    assert sweep.handler(scheduled_event(), Context("fail_overdue_jobs"))["failed"] == []  # exactly once

    job = pipeline.job(stuck)
    assert job["status"] == "failed"
    # Issue 34: the deadline counts from a job's first admission (a job never admitted, from the end of its
    # max_queue_seconds), so this job, never started, is failed for what it is: its execution never started.
    assert job["error"]["stage"] == "accept" and job["error"]["code"] == "WorkflowNotStarted"
    assert "never started" in job["error"]["message"]
    events = [e for e in pipeline.consumer_events() if e["job_id"] == stuck]
    assert [(e["event_type"], e["error"]["code"]) for e in events] == [("job.failed", "WorkflowNotStarted")]
    assert pipeline.job(running)["status"] != "failed"
    item = pipeline.ddb.get_item(TableName=pipeline.table, Key={"job_id": {"S": stuck}})["Item"]
    assert "open_shard" not in item  # out of the open-jobs index once terminal


def scheduled_event():
    return {
        "version": "0",
        "id": "s1",
        "detail-type": "Scheduled Event",
        "source": "aws.events",
        "account": "123456789012",
        "time": "2026-11-29T12:05:00Z",
        "region": "us-east-1",
        "resources": ["arn:aws:events:us-east-1:123456789012:rule/sweep"],
        "detail": {},
    }


def test_a_job_whose_execution_never_started_is_failed_after_the_start_grace_not_the_whole_deadline(
    pipeline, monkeypatch
):
    workflow = pipeline.handlers["api"].workflow
    monkeypatch.setattr(workflow, "start", lambda job_id, name: (_ for _ in ()).throw(ConnectionError("throttled")))
    with pytest.raises(ConnectionError):
        pipeline.api("POST", "/jobs", PROMPT, {"Idempotency-Key": "order-unstarted"})
    monkeypatch.undo()
    (stuck,) = [item["job_id"]["S"] for item in pipeline.ddb.scan(TableName=pipeline.table)["Items"]]
    started = post(pipeline, "order-started")
    pipeline.wait(lambda: pipeline.executions(), what="the started job's execution")
    sweep = pipeline.handlers["fail_overdue_jobs"]

    # Both jobs are older than the start grace, far younger than the deadline: only the unstarted one is failed.
    at = parse_time(pipeline.job(started)["created_at"]) + timedelta(seconds=deadline.START_GRACE_SECONDS + 1)
    monkeypatch.setattr(deadline, "now", lambda: at)
    assert sweep.handler(scheduled_event(), Context("fail_overdue_jobs"))["failed"] == [stuck]
    assert sweep.handler(scheduled_event(), Context("fail_overdue_jobs"))["failed"] == []
    job = pipeline.job(stuck)
    assert (job["status"], job["error"]["stage"], job["error"]["code"]) == ("failed", "accept", "WorkflowNotStarted")
    events = [e for e in pipeline.consumer_events() if e["job_id"] == stuck]
    assert [(e["event_type"], e["error"]["code"]) for e in events] == [("job.failed", "WorkflowNotStarted")]
    assert pipeline.job(started)["status"] != "failed"
    # The same key again now returns the failed job (the record lives until TTL): the caller submits anew.
    assert pipeline.api("POST", "/jobs", PROMPT, {"Idempotency-Key": "order-unstarted"})["json"]["status"] == "failed"


def test_the_end_of_an_earlier_records_execution_does_not_touch_the_new_record(pipeline):
    job_id = post(pipeline, "order-old-end")
    old_name = pipeline.execution_arn(job_id).rsplit(":", 1)[1]
    run_to_success(pipeline, job_id)
    pipeline.consumer_events()
    expire_record(pipeline, job_id)
    assert post(pipeline, "order-old-end") == job_id
    pipeline.wait_rendering(job_id)

    ended = {
        "version": "0",
        "id": "e-old",
        "detail-type": "Step Functions Execution Status Change",
        "source": "aws.states",
        "account": "123456789012",
        "time": "2026-11-29T12:05:00Z",
        "region": "us-east-1",
        "resources": [],
        "detail": {"name": old_name, "status": "ABORTED", "stateMachineArn": pipeline.state_machine, "cause": None},
    }
    result = pipeline.handlers["workflow_ended"].handler(ended, Context("workflow_ended"))
    assert result == {"job_id": job_id, "published": False}
    assert pipeline.job(job_id)["status"] == "rendering_video"
    pipeline.write_output(job_id, tiny_mp4())
    pipeline.publish_notification(job_id, "Completed")
    assert pipeline.execution(job_id)["status"] == "SUCCEEDED"
    assert [e["event_type"] for e in pipeline.consumer_events()] == ["job.succeeded"]


def test_a_submit_whose_execution_name_is_taken_answers_500_and_fails_the_job_with_one_event(pipeline, monkeypatch):
    # Before: ExecutionNameTaken escaped the API function (a bare 500 from API Gateway) and the job stayed `accepted`
    # until the deadline sweep. Now the caller gets the code and the job id, and the job ends at once.
    from omnireel.jobs import submission

    name = "11111111-1111-4111-8111-111111111111-taken"
    pipeline.sfn.start_execution(stateMachineArn=pipeline.state_machine, name=name, input=json.dumps({"job_id": "x"}))
    monkeypatch.setattr(submission, "new_execution_name", lambda job_id: name)
    response = pipeline.api("POST", "/jobs", PROMPT, {"Idempotency-Key": "order-taken"})
    assert response["statusCode"] == 500, response
    body = response["json"]
    assert body["error"]["code"] == "ExecutionNameTaken" and name in body["error"]["message"]
    assert body["status"] == "failed"
    job = pipeline.job(body["job_id"])
    assert job["status"] == "failed"
    assert job["error"]["code"] == "ExecutionNameTaken" and job["error"]["stage"] == "accept"
    events = pipeline.consumer_events()
    assert [(e["event_type"], e["job_id"]) for e in events] == [("job.failed", body["job_id"])]
    # The client's retry with its key answers the failed job; nothing new starts and no second event.
    again = pipeline.api("POST", "/jobs", PROMPT, {"Idempotency-Key": "order-taken"})
    assert again["json"]["job_id"] == body["job_id"] and again["json"]["status"] == "failed"
    assert pipeline.consumer_events(expect=0) == []
    assert [e["name"] for e in pipeline.executions()] == [name]


def test_a_record_made_again_right_after_the_old_ones_event_keeps_its_own_event_and_its_place_in_the_queue(
    pipeline, monkeypatch
):
    """The fault suite's ttl_reuse phase at its narrowest (a scale-lane run once left such a job without its event).
    The old record's job.succeeded goes out (async_result); before that step claims the publication, and before the old
    execution's PublishSucceeded runs, a consumer that saw the event deletes the record (TTL) and submits the same key
    again, and the new record queues for the image endpoint's one slot. The old execution's steps act on their own
    record only. Before the fix the old claim marked the new record's event as sent, and PublishSucceeded read the new
    record by job id and took its place in the queue: the new job waited for ever and had no event."""
    pipeline.instances.counts["image-endpoint"] = 1
    pipeline.heal_admission()
    job_id = post(pipeline, "order-republished")
    old_execution = pipeline.execution_arn(job_id)
    pipeline.wait_rendering(job_id)

    release_blocker = threading.Event()
    original_generate = pipeline.image_endpoint.generate

    def generate(body):
        result = original_generate(body)
        if body.get("prompt") == "holds the only image slot":
            release_blocker.wait(60)  # bounded: the test opens it below
        return result

    monkeypatch.setattr(pipeline.image_endpoint, "generate", generate)
    module = pipeline.handlers["async_result"]
    real_publisher = module.publisher

    def status(some_job_id, caller="tester"):
        return pipeline.api("GET", f"/jobs/{some_job_id}", caller=caller)["json"].get("status")

    class ConsumerReactsAtOnce:
        """Publishes; then, once, after the old record's event: what a fast consumer does before the step goes on."""

        def __init__(self):
            self.reacted = False

        def publish(self, event):
            real_publisher.publish(event)
            if self.reacted or event.job_id != job_id or not event.event_type.startswith("job.succeeded"):
                return
            self.reacted = True
            expire_record(pipeline, job_id)
            other = pipeline.api("POST", "/jobs", {"prompt": "holds the only image slot"}, caller="other")
            blocker = other["json"]["job_id"]
            pipeline.wait(lambda: status(blocker, "other") == "generating_image", what="the slot taken")
            assert post(pipeline, "order-republished") == job_id
            pipeline.wait(lambda: status(job_id) == "queued", what="the new record queued")

        def __getattr__(self, name):
            return getattr(real_publisher, name)

    monkeypatch.setattr(module, "publisher", ConsumerReactsAtOnce())
    pipeline.write_output(job_id, tiny_mp4())
    pipeline.publish_notification(job_id, "Completed")
    pipeline.wait(
        lambda: pipeline.sfn.describe_execution(executionArn=old_execution)["status"] == "SUCCEEDED",
        what="the old record's execution to end",
    )
    assert [(e["event_type"], e["job_id"]) for e in pipeline.consumer_events()] == [("job.succeeded", job_id)]
    record = pipeline.ddb.get_item(TableName=pipeline.table, Key={"job_id": {"S": job_id}}, ConsistentRead=True)["Item"]
    assert record["status"]["S"] == "queued" and "event_published_at" not in record  # untouched by the old steps

    release_blocker.set()  # the slot frees: the new record, still in the queue, is admitted next
    pipeline.wait_rendering(job_id)
    pipeline.write_output(job_id, tiny_mp4())
    pipeline.publish_notification(job_id, "Completed")
    pipeline.wait(lambda: status(job_id) == "succeeded", what="the new record to succeed")
    events = pipeline.consumer_events()
    assert [(e["event_type"], e["job_id"]) for e in events] == [("job.succeeded", job_id)]  # its own event, once
