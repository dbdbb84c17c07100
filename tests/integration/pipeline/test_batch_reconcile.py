"""Batches that must finish whatever is lost (issue 25 items 3, 8, 10), in-process on moto (real DynamoDB
transactions, conditions and the open-items index, SQS, SNS): the reconciler counts a lost terminal event exactly
once with a late real one, deferral is bounded, a work item's last receive ends its lines instead of dead-lettering
them, and the batch handlers (Powertools' BatchProcessor) return only the record that failed.
"""

from __future__ import annotations

import importlib.util
import json
import sys
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws

from omnireel.aws import clients
from omnireel.aws.artifact_store import ArtifactStore
from omnireel.aws.batch_queue import BatchQueue
from omnireel.aws.batch_store import OPEN_ITEMS_INDEX, BatchStore
from omnireel.aws.event_publisher import EventPublisher
from omnireel.aws.inbox_store import InboxStore
from omnireel.aws.job_store import JobStore
from omnireel.batches.batch import Line
from omnireel.batches.fanout import Fanout, LineFailure
from omnireel.batches.intake import BatchIntake
from omnireel.batches.progress import Progress
from omnireel.batches.reconcile import Reconciler
from omnireel.core.clock import now
from omnireel.core.errors import BatchIntakeFailed
from omnireel.jobs.job import JobStatus
from omnireel.jobs.outcome import finish_job

REGION = "us-east-1"
ROOT = Path(__file__).resolve().parents[3]
VIDEO = {"num_frames": 9, "width": 320, "height": 256, "num_inference_steps": 2}


class StubWorkflow:
    """Step Functions StartExecution as the fan-out calls it; ``fail`` makes every start raise."""

    def __init__(self) -> None:
        self.started: list[str] = []
        self.fail = False

    def start(self, job_id: str, name: str) -> None:
        if self.fail:
            raise RuntimeError("ThrottlingException (stub)")
        self.started.append(job_id)


def _tables(ddb: Any) -> None:
    ddb.create_table(
        TableName="batches",
        AttributeDefinitions=[
            {"AttributeName": "batch_id", "AttributeType": "S"},
            {"AttributeName": "item", "AttributeType": "S"},
            {"AttributeName": "open_shard", "AttributeType": "S"},
            {"AttributeName": "opened_at", "AttributeType": "S"},
        ],
        KeySchema=[{"AttributeName": "batch_id", "KeyType": "HASH"}, {"AttributeName": "item", "KeyType": "RANGE"}],
        GlobalSecondaryIndexes=[
            {
                "IndexName": OPEN_ITEMS_INDEX,
                "KeySchema": [
                    {"AttributeName": "open_shard", "KeyType": "HASH"},
                    {"AttributeName": "opened_at", "KeyType": "RANGE"},
                ],
                "Projection": {"ProjectionType": "ALL"},
            }
        ],
        BillingMode="PAY_PER_REQUEST",
    )
    ddb.create_table(
        TableName="jobs",
        AttributeDefinitions=[{"AttributeName": "job_id", "AttributeType": "S"}],
        KeySchema=[{"AttributeName": "job_id", "KeyType": "HASH"}],
        BillingMode="PAY_PER_REQUEST",
    )


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    clients.client.cache_clear()
    with mock_aws():
        s3 = boto3.client("s3", region_name=REGION)
        sqs = boto3.client("sqs", region_name=REGION)
        sns = boto3.client("sns", region_name=REGION)
        s3.create_bucket(Bucket="artifacts")
        _tables(boto3.client("dynamodb", region_name=REGION))
        work = sqs.create_queue(QueueName="batch-work")["QueueUrl"]
        events = sqs.create_queue(QueueName="events")["QueueUrl"]
        topic = sns.create_topic(Name="job-events")["TopicArn"]
        events_arn = sqs.get_queue_attributes(QueueUrl=events, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        sns.subscribe(TopicArn=topic, Protocol="sqs", Endpoint=events_arn, Attributes={"RawMessageDelivery": "true"})
        store, jobs = BatchStore("batches"), JobStore("jobs")
        artifacts, publisher = ArtifactStore("artifacts"), EventPublisher(topic)
        workflow = StubWorkflow()
        progress = Progress(store, artifacts, publisher, 600)
        failure = LineFailure(store, jobs, artifacts, publisher, 600)
        fanout = Fanout(
            store=store, queue=BatchQueue(work), inbox=InboxStore(), jobs=jobs, workflow=workflow,  # type: ignore[arg-type]
            artifacts=artifacts, publisher=publisher, presign_seconds=600, default_video_steps=4, max_in_flight=1,
            max_deferral_s=60, retry_base_s=1,
        )  # fmt: skip
        yield {
            "sqs": sqs, "sns": sns, "topic": topic, "work": work, "events": events, "store": store, "jobs": jobs,
            "fanout": fanout, "workflow": workflow, "progress": progress, "failure": failure,
            "intake": BatchIntake(store, BatchQueue(work)), "artifacts": artifacts, "publisher": publisher,
            "reconciler": Reconciler(store=store, jobs=jobs, progress=progress, failure=failure, grace_s=0),
        }  # fmt: skip
    clients.client.cache_clear()


def _receive(aws: dict[str, Any], queue: str) -> list[dict[str, Any]]:
    found = []
    for _ in range(20):
        messages = aws["sqs"].receive_message(QueueUrl=aws[queue], MaxNumberOfMessages=10).get("Messages", [])
        if not messages:
            return found
        for message in messages:
            aws["sqs"].delete_message(QueueUrl=aws[queue], ReceiptHandle=message["ReceiptHandle"])
            found.append(json.loads(message["Body"]))
    return found


def _receive_work(aws: dict[str, Any], timeout: float = 5.0) -> list[dict[str, Any]]:
    """The work queue's items, waiting (bounded) for a re-queued chunk's DelaySeconds (1 s here) to pass."""
    deadline = time.monotonic() + timeout
    while True:
        items = _receive(aws, "work")
        if items or time.monotonic() > deadline:
            return items
        time.sleep(0.2)


def _run_work(aws: dict[str, Any]) -> dict[str, int]:
    """Every line work item queued, as BatchSubmit runs it (one pass: deferred items are queued again)."""
    total: dict[str, int] = {}
    for item in _receive_work(aws):
        lines = [Line.from_message(line) for line in item["lines"]]
        outcome = aws["fanout"].submit_lines(item["batch_id"], lines, item["attempt"], queued_at=item.get("queued_at"))
        for name, count in outcome.items():
            total[name] = total.get(name, 0) + count
    return total


def _jobs(n: int) -> list[dict[str, Any]]:
    return [{"prompt": f"a lantern {i}", "seed": i, "video": VIDEO} for i in range(n)]


def _end(aws: dict[str, Any], job_id: str, status: JobStatus = JobStatus.CANCELLED) -> None:
    finish_job(job_id, status, step_error=None, jobs=aws["jobs"], artifacts=aws["artifacts"],
               publisher=aws["publisher"], presign_seconds=600)  # fmt: skip


def _later() -> Any:
    return now() + timedelta(seconds=2)


def test_a_lost_terminal_event_is_counted_once_and_its_slot_freed(aws):
    batch, _ = aws["intake"].start_api_batch(_jobs(2), owner="alice", idempotency_key="k1")
    assert _run_work(aws) == {"accepted": 1, "deferred": 1, **{k: 0 for k in ("rejected", "already", "dropped",
                                                                               "expired", "failed")}}  # fmt: skip
    (first,) = aws["workflow"].started
    _end(aws, first)
    lost = _receive(aws, "events")  # line 1's job.cancelled: taken off the queue, never counted (lost)
    assert [e["job_id"] for e in lost] == [first]
    assert aws["store"].in_flight(batch.batch_id) == 1 and _run_work(aws)["deferred"] == 1  # before the repair: stuck

    repairs = aws["reconciler"].run(_later())
    assert (repairs.lines_counted, repairs.slots_freed, repairs.total) == (1, 1, 1)
    assert aws["store"].in_flight(batch.batch_id) == 0 and aws["store"].find(batch.batch_id).cancelled == 1
    assert aws["reconciler"].run(_later()).total == 0  # idempotent: nothing left to repair

    # The late real event counts nothing more and frees no second slot.
    assert aws["progress"].record(lost[0]) is None
    assert aws["store"].find(batch.batch_id).terminal == 1 and aws["store"].in_flight(batch.batch_id) == 0

    assert _run_work(aws)["accepted"] == 1  # line 2 gets the freed slot
    second = aws["workflow"].started[1]
    _end(aws, second)
    completed = [aws["progress"].record(e) for e in _receive(aws, "events")]
    assert [c.batch_id for c in completed if c] == [batch.batch_id]
    published = [e for e in _receive(aws, "events") if e.get("event_type") == "batch.completed"]
    assert len(published) == 1 and published[0]["counts"]["cancelled"] == 2
    assert aws["reconciler"].run(_later()).total == 0 and aws["store"].in_flight(batch.batch_id) == 0


class Killed(BaseException):
    """The process killed (the fault suite's lambda_crash): nothing after it runs, no handler catches it."""


def test_a_rejected_line_whose_submitter_died_before_its_event_gets_its_job_failed_from_the_reconciler(
    aws, monkeypatch
):
    """A BatchSubmit killed between a rejected line's job record (created failed) and its job.failed: the retried
    work item finds the line recorded and skips it, and the reconciler counted the line from the job record, so the
    batch completed while that job's one terminal event was never sent (the 10,000-line fault run: 9,986 events for
    10,000 lines, counts adding up). The reconciler publishes the missing event; the line is counted once."""
    batch, _ = aws["intake"].start_api_batch([{"prompt": ""}], owner="alice", idempotency_key="k-killed")
    (item,) = _receive(aws, "work")
    lines = [Line.from_message(line) for line in item["lines"]]
    publish = aws["publisher"].publish

    def killed(event: Any) -> None:
        raise Killed

    monkeypatch.setattr(aws["publisher"], "publish", killed)
    with pytest.raises(Killed):
        aws["fanout"].submit_lines(item["batch_id"], lines, item["attempt"], queued_at=item.get("queued_at"))
    monkeypatch.setattr(aws["publisher"], "publish", publish)
    (line,) = aws["store"].lines(batch.batch_id)
    job = aws["jobs"].get(line["job_id"])
    assert job.status is JobStatus.FAILED and not job.event_published_at  # the record is there, its event is not
    outcome = aws["fanout"].submit_lines(item["batch_id"], lines, item["attempt"] + 1, queued_at=item.get("queued_at"))
    assert outcome["rejected"] == 0  # the retried work item finds the line recorded: it sends nothing
    assert _receive(aws, "events") == []

    repairs = aws["reconciler"].run(_later())
    events = [e for e in _receive(aws, "events") if e.get("job_id") == job.job_id]
    assert [e["event_type"] for e in events] == ["job.failed"], events
    assert aws["jobs"].get(job.job_id).event_published_at
    assert repairs.total >= 1 and aws["store"].find(batch.batch_id).failed == 1
    assert aws["reconciler"].run(_later()).total == 0  # once
    assert [e for e in _receive(aws, "events") if e.get("job_id") == job.job_id] == []


def test_the_reconciler_and_a_concurrent_event_count_a_line_once(aws):
    """The late event arrives first this time: the repair finds the line counted and does nothing."""
    batch, _ = aws["intake"].start_api_batch(_jobs(1), owner="alice", idempotency_key="k2")
    _run_work(aws)
    _end(aws, aws["workflow"].started[0])
    (event,) = _receive(aws, "events")
    assert aws["progress"].record(event) is not None  # counted and completed by the real event
    assert aws["reconciler"].run(_later()).total == 0
    published = [e for e in _receive(aws, "events") if e.get("event_type") == "batch.completed"]
    assert len(published) == 1 and aws["store"].find(batch.batch_id).status == "completed"


def test_deferral_is_bounded(aws):
    batch, _ = aws["intake"].start_api_batch([*_jobs(3), {"prompt": ""}], owner="alice", idempotency_key="k3")
    assert _run_work(aws)["deferred"] == 3  # line 1 holds the only slot; lines 2-4 wait
    # The re-queued chunk keeps its first queue time; once older than max_deferral_s (60) its lines fail.
    (item,) = _receive_work(aws)
    assert item["attempt"] == 1 and item["queued_at"] <= time.time()
    lines = [Line.from_message(line) for line in item["lines"]]
    outcome = aws["fanout"].submit_lines(batch.batch_id, lines, 1, queued_at=int(time.time()) - 61)
    assert (outcome["expired"], outcome["rejected"]) == (2, 1) and _receive(aws, "work") == []
    failed = {
        e["batch"]["line"]: e["error"]["message"] for e in _receive(aws, "events") if e["event_type"] == "job.failed"
    }
    assert sorted(failed) == [2, 3, 4]
    assert all("no in-flight slot became free within 60 s" in failed[n] for n in (2, 3))
    assert "prompt" in failed[4] and "in-flight" not in failed[4]  # a bad line still fails with its own reason
    assert all(message.startswith(f"line {n}: ") for n, message in failed.items())


def test_the_last_receive_fails_lines_that_cannot_start(aws):
    batch, _ = aws["intake"].start_api_batch(_jobs(1), owner="alice", idempotency_key="k4")
    aws["workflow"].fail = True
    (item,) = _receive(aws, "work")
    lines = [Line.from_message(line) for line in item["lines"]]
    with pytest.raises(RuntimeError, match="Throttling"):
        aws["fanout"].submit_lines(batch.batch_id, lines, 0)  # receives 1-4: retried
    outcome = aws["fanout"].submit_lines(batch.batch_id, lines, 0, final=True)  # receive 5: no dead letter
    assert outcome["failed"] == 1
    (event,) = _receive(aws, "events")
    assert event["event_type"] == "job.failed" and event["batch"]["line"] == 1
    assert "could not be submitted" in event["error"]["message"]
    assert aws["progress"].record(event) is not None  # the batch completes; the slot is free again
    assert aws["store"].in_flight(batch.batch_id) == 0 and aws["store"].find(batch.batch_id).failed == 1


def test_post_batches_that_cannot_queue_is_ended_by_the_reconciler(aws, monkeypatch):
    def refuse(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("RequestThrottled")

    monkeypatch.setattr(aws["intake"].queue, "send_lines", refuse)
    with pytest.raises(BatchIntakeFailed) as failed:
        aws["intake"].start_api_batch(_jobs(2), owner="alice", idempotency_key=None)
    batch_id = failed.value.batch_id
    assert aws["store"].find(batch_id).status == "running"
    repairs = aws["reconciler"].run(_later())
    assert repairs.intakes_ended == 1
    events = _receive(aws, "events")
    assert sorted(e["batch"]["line"] for e in events if e["event_type"] == "job.failed") == [1, 2]
    for event in events:
        aws["progress"].record(event)
    assert aws["store"].find(batch_id).status == "completed"
    published = [e for e in _receive(aws, "events") if e.get("event_type") == "batch.completed"]
    assert len(published) == 1 and published[0]["counts"]["failed"] == 2
    assert aws["reconciler"].run(_later()).total == 0


def _handler(name: str, env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> Any:
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    module = f"omnireel_test_{name}_handler"
    spec = importlib.util.spec_from_file_location(module, ROOT / "functions" / name / "handler.py")
    assert spec and spec.loader
    loaded = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, module, loaded)
    spec.loader.exec_module(loaded)
    return loaded


class _Context:
    function_name = "batch"
    memory_limit_in_mb = 512
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:batch"
    aws_request_id = "req"

    def get_remaining_time_in_millis(self) -> int:
        return 60_000


def _record(message_id: str, body: str, receives: int = 1) -> dict[str, Any]:
    return {
        "messageId": message_id, "receiptHandle": f"rh-{message_id}", "body": body, "md5OfBody": "",
        "attributes": {"ApproximateReceiveCount": str(receives), "SentTimestamp": "0", "SenderId": "x",
                       "ApproximateFirstReceiveTimestamp": "0"},
        "messageAttributes": {}, "eventSource": "aws:sqs", "awsRegion": REGION,
        "eventSourceARN": f"arn:aws:sqs:{REGION}:123456789012:q",
    }  # fmt: skip


def test_batch_progress_returns_only_the_failing_record(aws, monkeypatch):
    """Three terminal events, the second one unreadable: records 1 and 3 are counted, only 2 comes back."""
    batch, _ = aws["intake"].start_api_batch(_jobs(1) + [{"prompt": ""}] * 2, owner="alice", idempotency_key="k5")
    _run_work(aws)  # line 1 accepted; lines 2 and 3 rejected (job.failed each)
    _end(aws, aws["workflow"].started[0])
    events = _receive(aws, "events")
    assert len(events) == 3
    module = _handler("batch_progress", {"BATCHES_TABLE": "batches", "JOBS_TABLE": "jobs",
                                         "ARTIFACTS_BUCKET": "artifacts", "JOB_EVENTS_TOPIC_ARN": aws["topic"],
                                         "POWERTOOLS_METRICS_NAMESPACE": "omnireel"}, monkeypatch)  # fmt: skip
    records = [_record("m1", json.dumps(events[0])), _record("m2", "{not json"), _record("m3", json.dumps(events[1]))]
    assert module.handler({"Records": records}, _Context()) == {"batchItemFailures": [{"itemIdentifier": "m2"}]}
    assert aws["store"].find(batch.batch_id).terminal == 2
    # A batch where every record fails answers each of them (no exception: the same response shape).
    answer = module.handler({"Records": [_record("m4", "[]"), _record("m5", "{")]}, _Context())
    assert answer == {"batchItemFailures": [{"itemIdentifier": "m4"}, {"itemIdentifier": "m5"}]}


def test_batch_submit_returns_only_the_failing_record_and_ends_lines_on_the_last_receive(aws, monkeypatch):
    batch, _ = aws["intake"].start_api_batch([{"prompt": ""}], owner="alice", idempotency_key="k6")
    (item,) = _receive(aws, "work")
    module = _handler("batch_submit", {"BATCHES_TABLE": "batches", "JOBS_TABLE": "jobs",
                                       "ARTIFACTS_BUCKET": "artifacts", "JOB_EVENTS_TOPIC_ARN": aws["topic"],
                                       "BATCH_QUEUE_URL": aws["work"], "STATE_MACHINE_ARN": "arn:sm",
                                       "POWERTOOLS_METRICS_NAMESPACE": "omnireel"}, monkeypatch)  # fmt: skip
    unknown_batch = json.dumps({**item, "batch_id": "f" * 36})
    records = [_record("a", json.dumps(item)), _record("b", unknown_batch), _record("c", "{")]
    assert module.handler({"Records": records}, _Context()) == {
        "batchItemFailures": [{"itemIdentifier": "b"}, {"itemIdentifier": "c"}]
    }
    assert aws["store"].find(batch.batch_id).rejected == 1  # record a was processed


def test_a_split_step_failing_on_its_last_receive_ends_the_batch_at_its_cursor(aws, monkeypatch):
    s3 = boto3.client("s3", region_name=REGION)
    s3.create_bucket(Bucket="inbox")
    s3.put_bucket_versioning(Bucket="inbox", VersioningConfiguration={"Status": "Enabled"})
    body = b'{"prompt": ""}\n' * 3
    put = s3.put_object(Bucket="inbox", Key="prompts/q.jsonl", Body=body)
    from omnireel.core.s3uri import SourceVersion

    version = SourceVersion(version_id=put["VersionId"], etag=put["ETag"].strip('"'))
    batch_id = aws["intake"].start_file_batch(
        bucket="inbox", key="prompts/q.jsonl", version=version, size=len(body),
        natural_key=f"s3://inbox/prompts/q.jsonl?versionId={put['VersionId']}", inbox=aws["fanout"].inbox,
    )  # fmt: skip
    (split,) = _receive(aws, "work")

    def refuse(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("RequestThrottled")

    monkeypatch.setattr(aws["fanout"].queue, "send_lines", refuse)
    with pytest.raises(RuntimeError):
        aws["fanout"].split_step(batch_id, split["offset"], split["line"], redelivered=True)
    assert aws["fanout"].split_step(batch_id, split["offset"], split["line"], redelivered=True, final=True) == (
        "truncated"
    )
    batch = aws["store"].find(batch_id)
    assert batch.split_done and batch.total == 0 and batch.truncated is not None
    assert batch.truncated.code == "SplitFailed" and batch.truncated.truncated_at_line == 1
    (completed,) = [e for e in _receive(aws, "events") if e.get("event_type") == "batch.completed"]
    assert completed["truncated"]["code"] == "SplitFailed" and completed["counts"]["total"] == 0


def test_the_in_flight_cap_is_per_batch_so_one_callers_batch_does_not_hold_back_anothers(aws):
    """Issue 34 item 2: BatchMaxInFlightJobs (1 here) caps each batch, not the stack: alice's second line waits for her
    batch's place, bob's line starts at once (on main the stack-wide pool deferred it behind alice's batch). The GPUs
    are shared across callers by admission's fair queue, which every batch job goes through."""
    alice, _ = aws["intake"].start_api_batch(_jobs(2), owner="alice", idempotency_key="cap-a")
    bob, _ = aws["intake"].start_api_batch(_jobs(1), owner="bob", idempotency_key="cap-b")
    outcome = _run_work(aws)
    assert (outcome["accepted"], outcome["deferred"]) == (2, 1)
    assert aws["store"].in_flight(alice.batch_id) == 1 and aws["store"].in_flight(bob.batch_id) == 1


def test_a_missing_event_that_cannot_be_sent_holds_its_line_for_a_bounded_time_only(aws, monkeypatch):
    """The reconciler's send of a missing event fails (SNS down): the line stays open and the next run tries again,
    until the job has been terminal longer than a lost line may stay silent; then the line is counted without it (the
    failure logged), so no batch waits forever on one event."""
    from omnireel.core.errors import PublishFailed

    batch, _ = aws["intake"].start_api_batch([{"prompt": ""}], owner="alice", idempotency_key="k-unsendable")
    (item,) = _receive(aws, "work")
    lines = [Line.from_message(line) for line in item["lines"]]

    publish = aws["publisher"].publish

    def down(event: Any) -> None:  # this job's events cannot be sent (the batch's own batch.completed can)
        if getattr(event, "job_id", None):
            raise PublishFailed("could not publish job.failed: SNS is down (test)")
        publish(event)

    monkeypatch.setattr(aws["publisher"], "publish", down)
    with pytest.raises(PublishFailed):
        aws["fanout"].submit_lines(item["batch_id"], lines, item["attempt"], queued_at=item.get("queued_at"))
    reconciler = aws["reconciler"]
    assert reconciler.run(_later()).total == 0 and aws["store"].find(batch.batch_id).failed == 0  # held: retried
    late = now() + timedelta(seconds=reconciler.lost_line_silence_s + 1)
    reconciler.run(late)
    done = aws["store"].find(batch.batch_id)
    assert done.failed == 1 and done.event_published_at  # counted and completed: the batch is not held any longer


class _Executions:
    """Step Functions as the reconciler sees it: the stub's starts, and whether a job's execution exists."""

    def __init__(self, stub: StubWorkflow) -> None:
        self.stub = stub

    def started(self, job_id: str, name: str) -> bool:
        return job_id in self.stub.started

    def start(self, job_id: str, name: str) -> str:
        self.stub.start(job_id, name)
        return name


def test_a_line_whose_job_was_written_but_never_started_is_started_by_the_reconciler(aws, monkeypatch):
    """A BatchSubmit killed between a line's job record and its StartExecution, with every later receive of the work
    item killed too (dead-lettered): the line holds its slot and its job stays ``accepted`` with no execution; the
    batch waited for the job deadline's WorkflowNotStarted (10 minutes: the fault suite's dead-lettered batch, stuck
    ``running``). The reconciler starts the job's own execution, once."""
    batch, _ = aws["intake"].start_api_batch(_jobs(1), owner="alice", idempotency_key="k-unstarted")
    (item,) = _receive(aws, "work")
    lines = [Line.from_message(line) for line in item["lines"]]

    def killed(job_id: str, name: str) -> None:
        raise Killed

    monkeypatch.setattr(aws["workflow"], "start", killed)
    with pytest.raises(Killed):
        aws["fanout"].submit_lines(item["batch_id"], lines, item["attempt"], queued_at=item.get("queued_at"))
    monkeypatch.undo()
    (line,) = aws["store"].lines(batch.batch_id)
    job = aws["jobs"].get(line["job_id"])
    assert line["submitted"] == "accepted" and job.status is JobStatus.ACCEPTED and aws["workflow"].started == []

    reconciler = Reconciler(store=aws["store"], jobs=aws["jobs"], progress=aws["progress"], failure=aws["failure"],
                            grace_s=0, workflow=_Executions(aws["workflow"]))  # type: ignore[arg-type]  # fmt: skip
    assert reconciler.run(now() - timedelta(seconds=60)).jobs_started == 0  # within the grace: its submitter may
    repairs = reconciler.run(_later())
    assert repairs.jobs_started == 1 and repairs.total == 1 and aws["workflow"].started == [job.job_id]
    assert reconciler.run(_later()).total == 0  # started once: the next run finds its execution
    _end(aws, job.job_id)  # its execution ends it (here: cancelled), and its event counts the line as any other
    (event,) = [e for e in _receive(aws, "events") if e.get("job_id") == job.job_id]
    aws["progress"].record(event)
    assert aws["store"].find(batch.batch_id).cancelled == 1
