"""The inbox retry queue: dropped files that wait for a pending place of their caller (``CallerMaxPendingJobs``).

A drop over the limit is not failed: its S3 event record is sent here with a delay that grows with each wait
(``omnireel.jobs.inbox.wait_delay``), and the inbox function, subscribed to the queue, takes it again. Each wait is
a new message, so waiting never spends the queue's receives (a message that keeps *failing* goes to the redrive
target after its receives, as any failed inbox invocation does).
"""

from __future__ import annotations

import json
from functools import cached_property
from typing import Any

from omnireel.aws.clients import client

KIND = "inbox-wait"


class InboxRetryQueue:
    def __init__(self, queue_url: str):
        self.queue_url = queue_url

    @cached_property
    def _sqs(self) -> Any:
        return client("sqs")

    def wait(self, record: dict[str, Any], *, attempt: int, first_waited_at: int, delay_s: int) -> None:
        """Take ``record`` (an S3 event record) again in ``delay_s`` seconds (at most SQS's 900)."""
        body = {"kind": KIND, "record": record, "attempt": attempt, "first_waited_at": first_waited_at}
        self._sqs.send_message(QueueUrl=self.queue_url, MessageBody=json.dumps(body), DelaySeconds=min(900, delay_s))
