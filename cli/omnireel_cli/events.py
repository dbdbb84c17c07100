"""Job events as a consumer receives them: a temporary SQS queue subscribed to the job-events topic (``EventTap``),
their one-line form, and ``omnireel events`` (locally the replayable log of ``event_log``, against a deployed stack a
tap from now on)."""

from __future__ import annotations

import json
import sys
import time
import uuid
from typing import Any

from omnireel.events.event_types import TERMINAL_EVENT_TYPES

from . import event_log
from .errors import InfraError, UsageError
from .event_log import unwrap
from .target import Target


class EventTap:
    """A temporary SQS queue subscribed to the job-events topic: events as any consumer receives them."""

    def __init__(self, target: Target):
        self.target = target
        self.sqs = target.client("sqs")
        self.sns = target.client("sns")
        topic = target.output("JobEventsTopicArn")
        name = f"omnireel-cli-tap-{uuid.uuid4().hex[:12]}"
        try:
            self.url = self.sqs.create_queue(QueueName=name, Attributes={"MessageRetentionPeriod": "3600"})["QueueUrl"]
            arn = self.sqs.get_queue_attributes(QueueUrl=self.url, AttributeNames=["QueueArn"])["Attributes"][
                "QueueArn"
            ]
            policy = {
                "Version": "2012-10-17",
                "Statement": [
                    {
                        "Effect": "Allow",
                        "Principal": {"Service": "sns.amazonaws.com"},
                        "Action": "sqs:SendMessage",
                        "Resource": arn,
                        "Condition": {"ArnEquals": {"aws:SourceArn": topic}},
                    }
                ],
            }
            self.sqs.set_queue_attributes(QueueUrl=self.url, Attributes={"Policy": json.dumps(policy)})
            self.subscription = self.sns.subscribe(
                TopicArn=topic, Protocol="sqs", Endpoint=arn, ReturnSubscriptionArn=True
            )["SubscriptionArn"]
        except Exception as exc:
            raise InfraError(f"cannot subscribe to the job events: {exc}") from exc

    def close(self) -> None:
        try:
            self.sns.unsubscribe(SubscriptionArn=self.subscription)
        finally:
            self.sqs.delete_queue(QueueUrl=self.url)


def receive(sqs: Any, url: str, wait_s: int) -> list[dict[str, Any]]:
    messages = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=wait_s).get("Messages", [])
    events = []
    for message in messages:
        event = unwrap(message["Body"])
        if event is not None:
            events.append(event)
        sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
    return events


def event_line(event: dict[str, Any]) -> str:
    if event.get("event_type") == "batch.completed":
        counts = " ".join(f"{k}={v}" for k, v in (event.get("counts") or {}).items())
        return f"{event.get('occurred_at', '')} batch.completed {event.get('batch_id')} {counts}"
    line = f"{event.get('occurred_at', '')} {event.get('event_type')} {event.get('job_id')}"
    total = (event.get("timings") or {}).get("total_s")
    if total is not None:
        line += f" total={total:.2f}s"
    if event.get("error"):
        error = event["error"]
        line += f" [{error.get('stage')}] {error.get('code')}: {error.get('message')}"
    elif event.get("prompt"):
        line += f" prompt={event['prompt'][:60]!r}"
    return line


def events(target: Target, follow: bool, as_json: bool, timeout: float | None, job_id: str | None = None) -> int:
    """Local stack: the replayable event log (``event_log``). Deployed stack: events from now on (``--follow``)."""
    count = 0

    def printer(event: dict[str, Any]) -> None:
        nonlocal count
        count += 1
        print(json.dumps(event) if as_json else event_line(event), flush=True)

    def accept(event: dict[str, Any]) -> bool:
        return job_id is None or event.get("job_id") == job_id

    if target.events_queue_url:
        event_log.show(target, follow=follow, printer=printer, accept=accept, timeout=timeout)
    else:
        if not follow:
            raise UsageError("against a deployed stack, `omnireel events` needs --follow (it subscribes from now on)")
        tap = EventTap(target)
        until = f" (stops after {timeout:g} s)" if timeout else " (Ctrl-C to stop)"
        print(f"subscribed to {target.output('JobEventsTopicArn')}; waiting for job events{until} ...",
              file=sys.stderr, flush=True)  # fmt: skip
        deadline = time.monotonic() + timeout if timeout else None
        try:
            while deadline is None or time.monotonic() < deadline:
                wait_s = 5 if deadline is None else max(0, min(5, int(deadline - time.monotonic())))
                for event in receive(tap.sqs, tap.url, wait_s):
                    if accept(event):
                        printer(event)
        except KeyboardInterrupt:
            pass
        finally:
            tap.close()
    if not as_json and not follow:
        print(f"{count} event(s)", file=sys.stderr)
    return 0


def wait_for_event(sqs: Any, url: str, job_id: str, timeout: float) -> dict[str, Any] | None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for event in receive(sqs, url, max(1, min(5, int(deadline - time.monotonic())))):
            if event.get("job_id") == job_id and event.get("event_type") in TERMINAL_EVENT_TYPES:
                return event
    return None
