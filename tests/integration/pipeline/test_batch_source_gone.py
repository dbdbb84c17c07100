"""A dropped .jsonl version deleted while BatchSubmit is still splitting it (moto: real S3 versions, DynamoDB
transactions and conditions, SQS, SNS): the batch ends with the lines read so far, says where and why, and completes
with exactly one ``batch.completed`` once those lines' jobs are terminal.

Regression: the split step raised SourceVersionGone on every delivery, so its work item went to the dead-letter
queue, ``total`` (counted from the whole file) was never reached and the batch never completed.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import boto3
import jsonschema
import msgspec
import pytest
from moto import mock_aws

from omnireel.aws import clients
from omnireel.aws.artifact_store import ArtifactStore
from omnireel.aws.batch_queue import BatchQueue
from omnireel.aws.batch_store import BatchStore
from omnireel.aws.event_publisher import EventPublisher
from omnireel.aws.inbox_store import InboxStore
from omnireel.aws.job_store import JobStore
from omnireel.aws.workflow import Workflow
from omnireel.batches import fanout as batch_fanout
from omnireel.batches.batch import Line
from omnireel.batches.fanout import Fanout
from omnireel.batches.intake import BatchIntake
from omnireel.batches.progress import Progress
from omnireel.core.s3uri import SourceVersion
from omnireel.events.batch_events import BatchEvent
from scripts.event_schemas import batch_schema

REGION = "us-east-1"
# Six bad lines (each becomes one failed job at once: no model is needed to make them terminal), ~24 bytes each.
LINES = [f'{{"prompt": bad line {n}}}' for n in range(1, 7)]
BODY = ("\n".join(LINES) + "\n").encode()


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    # Two lines per split step, so the file takes three steps and can vanish between them.
    monkeypatch.setattr(batch_fanout, "SPLIT_STEP_BYTES", 2 * len(LINES[0]) + 3)
    clients.client.cache_clear()
    with mock_aws():
        s3 = boto3.client("s3", region_name=REGION)
        ddb = boto3.client("dynamodb", region_name=REGION)
        sqs = boto3.client("sqs", region_name=REGION)
        sns = boto3.client("sns", region_name=REGION)
        for bucket in ("inbox", "artifacts"):
            s3.create_bucket(Bucket=bucket)
        s3.put_bucket_versioning(Bucket="inbox", VersioningConfiguration={"Status": "Enabled"})
        ddb.create_table(
            TableName="batches",
            AttributeDefinitions=[{"AttributeName": "batch_id", "AttributeType": "S"},
                                  {"AttributeName": "item", "AttributeType": "S"}],
            KeySchema=[{"AttributeName": "batch_id", "KeyType": "HASH"}, {"AttributeName": "item", "KeyType": "RANGE"}],
            BillingMode="PAY_PER_REQUEST",
        )  # fmt: skip
        ddb.create_table(
            TableName="jobs",
            AttributeDefinitions=[{"AttributeName": "job_id", "AttributeType": "S"}],
            KeySchema=[{"AttributeName": "job_id", "KeyType": "HASH"}],
            BillingMode="PAY_PER_REQUEST",
        )
        work = sqs.create_queue(QueueName="batch-work")["QueueUrl"]
        events = sqs.create_queue(QueueName="events")["QueueUrl"]
        topic = sns.create_topic(Name="job-events")["TopicArn"]
        events_arn = sqs.get_queue_attributes(QueueUrl=events, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        sns.subscribe(TopicArn=topic, Protocol="sqs", Endpoint=events_arn, Attributes={"RawMessageDelivery": "true"})
        store = BatchStore("batches")
        artifacts = ArtifactStore("artifacts")
        publisher = EventPublisher(topic)
        fanout = Fanout(
            store=store, queue=BatchQueue(work), inbox=InboxStore(), jobs=JobStore("jobs"),
            workflow=Workflow(f"arn:aws:states:{REGION}:123456789012:stateMachine:unused"), artifacts=artifacts,
            publisher=publisher, presign_seconds=600, default_video_steps=4, max_in_flight=10,
        )  # fmt: skip
        yield {
            "s3": s3, "sqs": sqs, "work": work, "events": events, "store": store, "fanout": fanout,
            "intake": BatchIntake(store, BatchQueue(work)), "progress": Progress(store, artifacts, publisher, 600),
        }  # fmt: skip
    clients.client.cache_clear()


def _receive(aws: dict[str, Any], queue: str) -> list[dict[str, Any]]:
    messages = aws["sqs"].receive_message(QueueUrl=aws[queue], MaxNumberOfMessages=10).get("Messages", [])
    for message in messages:
        aws["sqs"].delete_message(QueueUrl=aws[queue], ReceiptHandle=message["ReceiptHandle"])
    return [json.loads(message["Body"]) for message in messages]


def _run_work(aws: dict[str, Any], *, stop_after_splits: int | None = None) -> list[str]:
    """Run the work queue's items as BatchSubmit would (bounded), optionally stopping after N split steps."""
    outcomes, splits = [], 0
    for _ in range(50):
        items = _receive(aws, "work")
        if not items:
            return outcomes
        for item in items:
            if item["kind"] == "split":
                step = aws["fanout"].split_step(item["batch_id"], item["offset"], item["line"], redelivered=False)
                outcomes.append(step)
                splits += 1
            else:
                lines = [Line.from_message(line) for line in item["lines"]]
                aws["fanout"].submit_lines(item["batch_id"], lines, item["attempt"])
        if stop_after_splits is not None and splits >= stop_after_splits:
            return outcomes
    raise AssertionError("the work queue did not drain")


def _deliver_events(aws: dict[str, Any]) -> list[dict[str, Any]]:
    """Feed every published event to BatchProgress (bounded); return the batch.completed events published."""
    completed = []
    for _ in range(50):
        events = _receive(aws, "events")
        if not events:
            return completed
        for event in events:
            if event.get("event_type") == "batch.completed":
                completed.append(event)
            else:
                aws["progress"].record(event)
    raise AssertionError("the events queue did not drain")


def test_a_version_deleted_mid_split_ends_the_batch_at_the_lines_read_and_completes_it_once(aws):
    put = aws["s3"].put_object(Bucket="inbox", Key="prompts/cat.jsonl", Body=BODY)
    version = SourceVersion(version_id=put["VersionId"], etag=put["ETag"].strip('"'))
    batch_id = aws["intake"].start_file_batch(
        bucket="inbox", key="prompts/cat.jsonl", version=version, size=len(BODY),
        natural_key=f"s3://inbox/prompts/cat.jsonl?versionId={put['VersionId']}", inbox=aws["fanout"].inbox,
    )  # fmt: skip
    assert aws["store"].find(batch_id).total == 6

    assert _run_work(aws, stop_after_splits=1) == ["continued"]  # lines 1-2 read and queued
    aws["s3"].delete_object(Bucket="inbox", Key="prompts/cat.jsonl", VersionId=put["VersionId"])
    assert "truncated" in _run_work(aws)  # the next step finds the version gone: no exception, no dead letter

    batch = aws["store"].find(batch_id)
    assert batch.split_done and batch.total == 2 and batch.truncated is not None
    assert batch.truncated.truncated_at_line == 3 and "line 3" in batch.truncated.message
    assert "deleted" in batch.truncated.message

    completed = _deliver_events(aws) + _deliver_events(aws)  # a second pass: nothing more is published
    assert len(completed) == 1
    event = msgspec.convert(completed[0], BatchEvent)
    assert event.counts.total == 2 and event.counts.failed == 2 and event.counts.rejected == 2
    assert event.truncated is not None and event.truncated.truncated_at_line == 3
    assert event.truncated.code == "SourceVersionGone"
    jsonschema.validate(completed[0], batch_schema())
    manifest = aws["s3"].get_object(Bucket="artifacts", Key=f"batches/{batch_id}/manifest.jsonl")["Body"].read()
    assert [json.loads(row)["line"] for row in manifest.splitlines()] == [1, 2]

    # A chunk of a later line (queued by a step that died before its checkpoint) makes no job once truncated.
    late = [Line(5, LINES[4])]
    assert aws["fanout"].submit_lines(batch_id, late, 0)["dropped"] == 1
    assert aws["store"].line(batch_id, 5) is None and _receive(aws, "events") == []
    # ... and the store refuses it itself (the race of a chunk read before the truncation): DynamoDB's condition.
    assert not aws["store"].submit_line(batch_id, 5, "job-x", accepted=True, max_in_flight=10)
    assert not aws["store"].submit_line(batch_id, 3, "job-y", accepted=False, max_in_flight=None)
    assert aws["store"].find(batch_id).counts().accepted == 0


def test_a_version_deleted_before_the_first_step_completes_an_empty_batch_at_once(aws):
    put = aws["s3"].put_object(Bucket="inbox", Key="prompts/gone.jsonl", Body=BODY)
    version = SourceVersion(version_id=put["VersionId"], etag=put["ETag"].strip('"'))
    batch_id = aws["intake"].start_file_batch(
        bucket="inbox", key="prompts/gone.jsonl", version=version, size=len(BODY),
        natural_key=f"s3://inbox/prompts/gone.jsonl?versionId={put['VersionId']}", inbox=aws["fanout"].inbox,
    )  # fmt: skip
    aws["s3"].delete_object(Bucket="inbox", Key="prompts/gone.jsonl", VersionId=put["VersionId"])
    assert _run_work(aws) == ["truncated"]
    completed = _deliver_events(aws)
    assert len(completed) == 1 and completed[0]["batch_id"] == batch_id
    assert completed[0]["counts"]["total"] == 0 and completed[0]["truncated"]["truncated_at_line"] == 1
