"""The webhook queue as the delivery function uses it besides Lambda's own receives and deletes: a record whose attempt
failed comes back after its backoff (``ChangeMessageVisibility`` on that record's receipt handle; the schedule is
``omnireel.webhooks.dispatch.retry_delay``)."""

from __future__ import annotations

from typing import Any

from omnireel.aws.clients import client


class WebhookQueue:
    def __init__(self, queue_url: str) -> None:
        self.queue_url = queue_url
        self._sqs: Any = client("sqs")  # at cold start: any failed attempt of a batch calls it

    def retry_in(self, receipt_handle: str, seconds: int) -> None:
        """The received message becomes visible again in ``seconds`` (0: at once; SQS then counts its next receive,
        and past the redrive policy's maxReceiveCount moves it to the dead-letter queue)."""
        self._sqs.change_message_visibility(
            QueueUrl=self.queue_url, ReceiptHandle=receipt_handle, VisibilityTimeout=seconds
        )
