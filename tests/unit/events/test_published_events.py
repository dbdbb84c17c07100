"""Issue 33 item 1: ``EventPublisher`` records an event bound for a webhook on its job's or batch's record before it
publishes it, and ``PublishedEvents`` rebuilds a delivery from that record only (moto).

- the recorded body is the published body, byte for byte; an event without a webhook is not recorded;
- a record that is gone: nothing is published (the record comes first);
- a delivery is the recorded body at the request's own webhook; another event id, an event type the job did not ask
  for, or a batch without a record: ``EventNotPublished``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import boto3
import msgspec
import pytest
from moto import mock_aws

from omnireel.aws import clients
from omnireel.aws.event_publisher import EventPublisher
from omnireel.aws.record_owners import PublishedEvents
from omnireel.core.errors import PublishFailed
from omnireel.core.records import to_json
from omnireel.events.batch_events import BatchCounts, BatchEvent, BatchManifest
from omnireel.events.job_events import EventArtifacts, EventTimings, JobEvent
from omnireel.events.published import EventIds, EventNotPublished, published_attribute
from omnireel.jobs.request import JobRequest

REGION = "us-east-1"
HOOK = "https://hooks.example.com/in"


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.setenv(name, "testing")
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    clients.client.cache_clear()
    with mock_aws():
        ddb = boto3.client("dynamodb", region_name=REGION)
        ddb.create_table(TableName="jobs", BillingMode="PAY_PER_REQUEST",
                         AttributeDefinitions=[{"AttributeName": "job_id", "AttributeType": "S"}],
                         KeySchema=[{"AttributeName": "job_id", "KeyType": "HASH"}])  # fmt: skip
        ddb.create_table(TableName="batches", BillingMode="PAY_PER_REQUEST",
                         AttributeDefinitions=[{"AttributeName": "batch_id", "AttributeType": "S"},
                                               {"AttributeName": "item", "AttributeType": "S"}],
                         KeySchema=[{"AttributeName": "batch_id", "KeyType": "HASH"},
                                    {"AttributeName": "item", "KeyType": "RANGE"}])  # fmt: skip
        sns, sqs = boto3.client("sns", region_name=REGION), boto3.client("sqs", region_name=REGION)
        topic = sns.create_topic(Name="events")["TopicArn"]
        queue = sqs.create_queue(QueueName="tap")["QueueUrl"]
        arn = sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        sns.subscribe(TopicArn=topic, Protocol="sqs", Endpoint=arn, Attributes={"RawMessageDelivery": "true"})
        publisher = EventPublisher(topic, jobs_table="jobs", batches_table="batches")
        yield {"ddb": ddb, "sqs": sqs, "queue": queue, "publisher": publisher}
    clients.client.cache_clear()


def _job(aws: dict[str, Any], job_id: str, **request: Any) -> JobRequest:
    parsed = msgspec.convert({"prompt": "p", **request}, JobRequest)
    aws["ddb"].put_item(TableName="jobs", Item={"job_id": {"S": job_id}, "request_json": {"S": to_json(parsed)}})
    return parsed


def _event(job_id: str, request: JobRequest | None, event_type: str = "job.succeeded") -> JobEvent:
    return JobEvent(
        event_id=f"ev-{job_id}-{event_type}", event_type=event_type, occurred_at="2026-12-04T00:00:00.000Z",  # type: ignore[arg-type]
        job_id=job_id, status=event_type.split(".")[1], prompt="p", request=request, source="api",  # type: ignore[arg-type]
        artifacts=EventArtifacts(), timings=EventTimings(),
    )  # fmt: skip


def _published(aws: dict[str, Any]) -> list[str]:
    return [
        m["Body"] for m in aws["sqs"].receive_message(QueueUrl=aws["queue"], MaxNumberOfMessages=10).get("Messages", [])
    ]


def _stored(aws: dict[str, Any], job_id: str) -> dict[str, Any]:
    return aws["ddb"].get_item(TableName="jobs", Key={"job_id": {"S": job_id}})["Item"]


def test_an_event_bound_for_a_webhook_is_recorded_as_published(aws: dict[str, Any]) -> None:
    event = _event("j1", _job(aws, "j1", webhook=HOOK))
    aws["publisher"].publish(event)
    (body,) = _published(aws)
    recorded = _stored(aws, "j1")[published_attribute("job.succeeded")]["M"]
    assert recorded["body"]["S"] == body == to_json(event)
    assert recorded["event_id"]["S"] == event.event_id


def test_an_event_without_a_webhook_is_not_recorded(aws: dict[str, Any]) -> None:
    aws["publisher"].publish(_event("j2", _job(aws, "j2")))
    assert len(_published(aws)) == 1
    assert published_attribute("job.succeeded") not in _stored(aws, "j2")


def test_nothing_is_published_when_the_event_cannot_be_recorded(aws: dict[str, Any]) -> None:
    request = msgspec.convert({"prompt": "p", "webhook": HOOK}, JobRequest)
    with pytest.raises(PublishFailed):
        aws["publisher"].publish(_event("gone", request))  # no record of the job
    assert _published(aws) == []


def test_a_delivery_is_the_recorded_event_at_the_requests_own_webhook(aws: dict[str, Any]) -> None:
    event = _event("j3", _job(aws, "j3", webhook=HOOK, webhook_events=["job.succeeded"]))
    aws["publisher"].publish(event)
    records = PublishedEvents("jobs", "batches")
    delivery = records.delivery(EventIds(event.event_id, "job.succeeded", "j3", None))
    assert (delivery.url, delivery.body, delivery.job_id) == (HOOK, to_json(event), "j3")
    for ids in (
        EventIds("another-id", "job.succeeded", "j3", None),  # not the event the stack published
        EventIds(event.event_id, "job.failed", "j3", None),  # a type the job did not ask for (nor was published)
        EventIds(event.event_id, "job.succeeded", "no-such-job", None),
        EventIds("ev", "batch.completed", None, "no-such-batch"),
        EventIds("ev", "batch.completed", "j3", None),  # a batch event that names no batch
    ):
        with pytest.raises(EventNotPublished):
            records.delivery(ids)


def test_a_batch_completed_is_recorded_on_its_batch_and_delivered_to_the_batchs_webhook(aws: dict[str, Any]) -> None:
    aws["ddb"].put_item(TableName="batches", Item={"batch_id": {"S": "b1"}, "item": {"S": "batch"},
                                                   "webhook": {"S": HOOK}})  # fmt: skip
    event = BatchEvent(
        event_id="ev-b1", occurred_at="2026-12-04T00:00:00.000Z", batch_id="b1", source="api",
        counts=BatchCounts(total=1, accepted=1, rejected=0, succeeded=1, failed=0, cancelled=0),
        manifest=BatchManifest(s3_uri="s3://a/m", url="https://a/m", expires_at="2026-12-05T00:00:00Z"),
    ).with_webhook(HOOK)  # fmt: skip
    aws["publisher"].publish(event)
    delivery = PublishedEvents("jobs", "batches").delivery(EventIds("ev-b1", "batch.completed", None, "b1"))
    assert (delivery.url, json.loads(delivery.body)["batch_id"], delivery.job_id) == (HOOK, "b1", None)
