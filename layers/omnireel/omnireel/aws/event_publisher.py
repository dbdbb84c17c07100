"""Publishes job events to the job-events SNS topic and to EventBridge."""

from __future__ import annotations

from functools import cached_property
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from omnireel.aws.clients import client
from omnireel.core.errors import PublishFailed
from omnireel.core.records import to_json
from omnireel.events.batch_events import BatchEvent
from omnireel.events.job_events import EVENT_SOURCE, ImageReadyEvent, JobEvent, sns_message_attributes


class EventPublisher:
    def __init__(self, topic_arn: str, event_bus_name: str = "default", *, eager: bool = False):
        self.topic_arn = topic_arn
        self.event_bus_name = event_bus_name
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

    def publish(self, event: JobEvent | ImageReadyEvent | BatchEvent) -> None:
        body = to_json(event)
        try:
            self._sns.publish(
                TopicArn=self.topic_arn,
                Message=body,
                Subject=f"omnireel {event.event_type}",
                MessageAttributes=sns_message_attributes(event),
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
            # job.image_ready names its job too (an AttributeError here used to hide the publish failure)
            subject = f"batch {event.batch_id}" if isinstance(event, BatchEvent) else f"job {event.job_id}"
            raise PublishFailed(f"could not publish {event.event_type} for {subject}: {exc}") from exc
        if result.get("FailedEntryCount"):
            entry = result["Entries"][0]
            raise PublishFailed(f"EventBridge refused the event: {entry.get('ErrorCode')} {entry.get('ErrorMessage')}")
