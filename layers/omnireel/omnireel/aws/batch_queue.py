"""The batch queue: the fan-out's work items (``split`` steps and chunks of ``lines``), consumed by BatchSubmit."""

from __future__ import annotations

import json
from functools import cached_property
from typing import Any

from omnireel.aws.clients import client
from omnireel.batches.batch import Line
from omnireel.core.sqs_text import MAX_MESSAGE_BYTES, compact_json, send_groups, utf8_size

# A queue message carries at most this many lines (bounded work per BatchSubmit record) and at most SQS's
# ``MAX_MESSAGE_BYTES`` (``omnireel.core.sqs_text``).
CHUNK_LINES = 25


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
        """The lines as messages sized by their encoded bytes (``lines_messages``), sent ten at a time within
        SendMessageBatch's 1 MiB (``sqs_text.send_groups``); any entry SQS refuses is raised, so the caller's message is
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


def lines_messages(envelope: dict[str, object], lines: list[Line]) -> list[str]:
    """Queue message bodies for ``lines``: ``envelope`` plus a ``lines`` array, each body at most ``CHUNK_LINES``
    lines and ``MAX_MESSAGE_BYTES`` of UTF-8 (measured, not estimated). A line that cannot fit even alone (only a line
    that is not JSON can: raw control characters take 6 bytes escaped) travels as an error line naming its size, so it
    becomes a failed job with that reason instead of a message SQS refuses."""
    head = compact_json({**envelope, "lines": []})
    assert head.endswith("[]}")
    prefix, suffix = head[:-2], "]}"
    fixed = utf8_size(prefix) + utf8_size(suffix)
    bodies: list[str] = []
    current: list[str] = []
    size = fixed
    for line in lines:
        encoded = compact_json(line.as_message())
        cost = utf8_size(encoded)
        if fixed + cost > MAX_MESSAGE_BYTES:
            oversized = Line(line.number, None, f"the line takes {cost} bytes as a queue message (at most "
                             f"{MAX_MESSAGE_BYTES - fixed} fit)")  # fmt: skip
            encoded = compact_json(oversized.as_message())
            cost = utf8_size(encoded)
        separator = 1 if current else 0
        if current and (len(current) >= CHUNK_LINES or size + separator + cost > MAX_MESSAGE_BYTES):
            bodies.append(prefix + ",".join(current) + suffix)
            current, size, separator = [], fixed, 0
        current.append(encoded)
        size += separator + cost
    if current:
        bodies.append(prefix + ",".join(current) + suffix)
    return bodies


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
