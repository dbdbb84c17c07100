"""The batch queue: the fan-out's work items (``split`` steps and chunks of ``lines``), consumed by BatchSubmit."""

from __future__ import annotations

import json
from functools import cached_property
from typing import Any

from omnireel.aws.clients import client
from omnireel.batch import Line


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

    def send_lines(self, batch_id: str, chunks: list[list[Line]], *, attempt: int = 0, delay_s: int = 0) -> None:
        """One message per chunk, ten per SendMessageBatch call; any entry SQS refuses is raised, so the caller's
        message is retried (duplicated chunks are harmless: every line's job is idempotent)."""
        entries: list[dict[str, Any]] = []
        for index, chunk in enumerate(chunks):
            body = {
                "kind": "lines",
                "batch_id": batch_id,
                "attempt": attempt,
                "lines": [line.as_message() for line in chunk],
            }
            entries.append({"Id": str(index), "MessageBody": json.dumps(body), "DelaySeconds": delay_s})
        for start in range(0, len(entries), 10):
            result = self._sqs.send_message_batch(QueueUrl=self.queue_url, Entries=entries[start : start + 10])
            if result.get("Failed"):
                failed = result["Failed"][0]
                raise RuntimeError(f"SQS refused a batch chunk: {failed.get('Code')} {failed.get('Message')}")
