"""Publishes job events to the job-events SNS topic and to EventBridge; an event bound for a webhook is first recorded
on its job's or batch's record (``omnireel.events.published``), so that the delivery function delivers only events
the stack published."""

from __future__ import annotations

from functools import cached_property
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from omnireel.aws.clients import client
from omnireel.aws.dynamodb_values import to_attributes
from omnireel.core.clock import iso, now
from omnireel.core.errors import PublishFailed
from omnireel.core.records import to_json
from omnireel.core.sqs_text import sqs_safe_json
from omnireel.events.batch_events import BatchEvent
from omnireel.events.job_events import EVENT_SOURCE, ImageReadyEvent, JobEvent, QueuedEvent, sns_message_attributes
from omnireel.events.published import published_attribute

BATCH_ITEM = "batch"  # omnireel.aws.batch_store: the batch record's sort key


class EventPublisher:
    def __init__(
        self,
        topic_arn: str,
        event_bus_name: str = "default",
        *,
        eager: bool = False,
        jobs_table: str | None = None,
        batches_table: str | None = None,
    ):
        self.topic_arn = topic_arn
        self.event_bus_name = event_bus_name
        self.jobs_table = jobs_table
        self.batches_table = batches_table
        if eager:  # a function that publishes on every call creates its clients at cold start, not in its first call
            _ = self._sns, self._events

    # Created on first use unless eager: a function that publishes only on some paths (the API: DELETE /jobs/{id}, the
    # safety nets) does not pay for two clients in every cold start.
    @cached_property
    def _sns(self) -> Any:
        return client("sns")

    @cached_property
    def _events(self) -> Any:
        return client("events")

    @cached_property
    def _ddb(self) -> Any:
        return client("dynamodb")

    def _record(self, event: JobEvent | ImageReadyEvent | QueuedEvent | BatchEvent, body: str) -> None:
        """Record the event on its job's or batch's record before it is published (the delivery function delivers only
        recorded events: ``omnireel.events.published``). Raises if the record is gone: nothing is published."""
        if isinstance(event, BatchEvent):
            table, key = self.batches_table, {"batch_id": {"S": event.batch_id}, "item": {"S": BATCH_ITEM}}
            condition = "attribute_exists(batch_id)"
        else:
            table, key = self.jobs_table, {"job_id": {"S": event.job_id}}
            condition = "attribute_exists(job_id)"
        if not table:  # a wiring mistake: the function publishes webhook events without the table they are recorded in
            raise PublishFailed(f"cannot record {event.event_type} for its webhook: this publisher has no table for it")
        self._ddb.update_item(
            TableName=table,
            Key=key,
            UpdateExpression="SET #published = :published",
            ConditionExpression=condition,
            ExpressionAttributeNames={"#published": published_attribute(event.event_type)},
            ExpressionAttributeValues=to_attributes(
                {":published": {"event_id": event.event_id, "body": body, "recorded_at": iso(now())}}
            ),
        )

    def publish(self, event: JobEvent | ImageReadyEvent | QueuedEvent | BatchEvent) -> None:
        # Characters SNS's SQS subscribers refuse (a raw U+FFFE in a prompt is valid JSON and valid UTF-8) are JSON
        # escapes here: the same value, and a body every subscriber's queue accepts. Unescaped, the event never reached
        # the webhook and batch queues: the job ended without its one terminal event.
        body = sqs_safe_json(to_json(event))
        attributes = sns_message_attributes(event)
        # job.image_ready names its job too (an AttributeError here used to hide the publish failure)
        subject = f"batch {event.batch_id}" if isinstance(event, BatchEvent) else f"job {event.job_id}"
        try:
            if "webhook" in attributes:
                self._record(event, body)
            self._sns.publish(
                TopicArn=self.topic_arn,
                Message=body,
                Subject=f"omnireel {event.event_type}",
                MessageAttributes=attributes,
            )
            result = self._events.put_events(
                Entries=[
                    {
                        "Source": EVENT_SOURCE,
                        "DetailType": event.event_type,
                        "Detail": body,
                        "EventBusName": self.event_bus_name,
                        "Resources": [],
                    }
                ]
            )
        except (ClientError, BotoCoreError) as exc:
            raise PublishFailed(f"could not publish {event.event_type} for {subject}: {exc}") from exc
        if result.get("FailedEntryCount"):
            entry = result["Entries"][0]
            raise PublishFailed(f"EventBridge refused the event: {entry.get('ErrorCode')} {entry.get('ErrorMessage')}")
