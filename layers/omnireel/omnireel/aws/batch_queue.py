"""The batch queue: the fan-out's work items (``split`` steps and chunks of ``lines``), consumed by BatchSubmit."""

from __future__ import annotations

import json
from functools import cached_property
from typing import Any

from omnireel.aws.clients import client
from omnireel.batches.batch import Line, lines_messages, send_groups


class BatchQueue:
    def __init__(self, queue_url: str, *, eager: bool = False):
        self.queue_url = queue_url
        # eager: BatchSubmit sends on every call, so it creates the client at cold start; the API and the inbox send
        # only for a batch (POST /batches, a .jsonl drop) and create it on first use, as BatchStore does.
        if eager:
            _ = self._sqs

    @cached_property
    def _sqs(self) -> Any:
        return client("sqs")

    def send_split(self, batch_id: str, offset: int, line: int) -> None:
        body = {"kind": "split", "batch_id": batch_id, "offset": offset, "line": line}
        self._sqs.send_message(QueueUrl=self.queue_url, MessageBody=json.dumps(body))

    def send_lines(
        self, batch_id: str, lines: list[Line], *, attempt: int = 0, delay_s: int = 0, queued_at: int | None = None
    ) -> None:
        """The lines as messages sized by their encoded bytes (``batch.lines_messages``), sent ten at a time within
        SendMessageBatch's 1 MiB (``batch.send_groups``); any entry SQS refuses is raised, so the caller's message is
        retried (duplicated chunks are harmless: every line's job is idempotent). ``queued_at`` (epoch seconds): when
        the lines were first queued, carried through backpressure re-queues so the deferral can be bounded."""
        envelope: dict[str, object] = {"kind": "lines", "batch_id": batch_id, "attempt": attempt}
        if queued_at is not None:
            envelope["queued_at"] = queued_at
        for group in send_groups(lines_messages(envelope, lines)):
            entries = [
                {"Id": str(index), "MessageBody": body, "DelaySeconds": delay_s} for index, body in enumerate(group)
            ]
            result = self._sqs.send_message_batch(QueueUrl=self.queue_url, Entries=entries)
            if result.get("Failed"):
                failed = result["Failed"][0]
                raise RuntimeError(f"SQS refused a batch chunk: {failed.get('Code')} {failed.get('Message')}")


class DeadLetters:
    """The batch dead-letter queue, as the reconciler reads it: work items (``split`` / ``lines``) whose every receive
    failed, and terminal job events of batch jobs that BatchProgress could not count (left for the operator: the
    reconciler counts those lines from their job records)."""

    def __init__(self, queue_url: str):
        self.queue_url = queue_url

    @cached_property
    def _sqs(self) -> Any:
        return client("sqs")

    def receive(self, *, max_calls: int = 10, hide_s: int = 60) -> list[tuple[str, dict[str, Any] | None]]:
        """Up to ``max_calls`` x 10 messages as (receipt handle, JSON body or None), each hidden ``hide_s`` seconds
        so one run does not read it twice (``release`` shows one again at once)."""
        found: list[tuple[str, dict[str, Any] | None]] = []
        for _ in range(max_calls):
            messages = self._sqs.receive_message(
                QueueUrl=self.queue_url, MaxNumberOfMessages=10, WaitTimeSeconds=0, VisibilityTimeout=hide_s
            ).get("Messages", [])
            if not messages:
                break
            for message in messages:
                try:
                    body = json.loads(message["Body"])
                except ValueError:
                    body = None
                found.append((message["ReceiptHandle"], body if isinstance(body, dict) else None))
        return found

    def delete(self, receipt: str) -> None:
        self._sqs.delete_message(QueueUrl=self.queue_url, ReceiptHandle=receipt)

    def release(self, receipt: str) -> None:
        """Visible again now: a message left for the operator keeps the queue's depth alarm firing."""
        self._sqs.change_message_visibility(QueueUrl=self.queue_url, ReceiptHandle=receipt, VisibilityTimeout=0)
