"""Lambda's SQS event sources for the local stack: a poller per mapping, as the Lambda service runs one.

moto invokes a queue's function once, inside SendMessage, with a hard-coded receive count of 1; a failed message is
made visible again at once and never retried (moto patch 16 turns that off). Lambda instead polls: it receives a
batch (honouring each message's visibility, so a function that delays a message with ChangeMessageVisibility sees it
again only then), invokes the function synchronously, deletes what succeeded (with ``ReportBatchItemFailures``,
everything not listed in ``batchItemFailures``; a function error keeps the whole batch), and lets the queue's redrive
policy move a message to its dead-letter queue after ``maxReceiveCount`` receives. This module does exactly that,
through the local AWS's own API and **as the function's execution role** (Lambda polls with it), so the role needs
sqs:ReceiveMessage / DeleteMessage like on AWS: a missing permission is a 403 in the stack log.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

log = logging.getLogger("omnireel_local.event_sources")

POLL_INTERVAL_S = 0.2  # between empty receives (Lambda long-polls; a short interval keeps local latency low)


class SqsEventSources:
    def __init__(self, account_id: str, region: str, endpoint: str, role_credentials: Callable[[str, str], Any]):
        self.account_id, self.region, self.endpoint = account_id, region, endpoint
        self._role_credentials = role_credentials  # (role arn, function name) -> identities.Credentials
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="sqs-event-sources", daemon=True)
        self._thread.start()

    def shutdown(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)

    def _mappings(self) -> list[Any]:
        from moto.awslambda.utils import get_backend

        backend = get_backend(self.account_id, self.region)
        return [
            esm
            for esm in list(backend._event_source_mappings.values())
            if esm.enabled and esm.event_source_arn.startswith("arn:aws:sqs:")
        ]

    def _run(self) -> None:
        while not self._stop.is_set():
            busy = False
            for esm in self._mappings():
                try:
                    busy |= self._poll(esm)
                except Exception:
                    log.exception("polling %s for %s failed", esm.event_source_arn, esm.function_arn)
            if not busy:
                self._stop.wait(POLL_INTERVAL_S)

    def _client(self, role_arn: str, function_name: str) -> Any:
        import boto3

        credentials = self._role_credentials(role_arn, function_name)
        return boto3.client("sqs", endpoint_url=self.endpoint, region_name=self.region, **credentials.boto())

    def _poll(self, esm: Any) -> bool:
        """One receive and invocation for ``esm``; True if it found messages."""
        from moto.awslambda.utils import get_backend

        function = get_backend(self.account_id, self.region).get_function(esm.function_arn)
        sqs = self._client(str(function.role), function.function_name)
        _, _, _, _, owner, name = esm.event_source_arn.split(":", 5)
        url = f"{self.endpoint}/{owner}/{name}"
        received = sqs.receive_message(
            QueueUrl=url,
            MaxNumberOfMessages=min(int(esm.batch_size or 10), 10),
            AttributeNames=["All"],
            MessageAttributeNames=["All"],
            WaitTimeSeconds=0,
        ).get("Messages", [])
        if not received:
            return False
        event = {"Records": [_record(m, esm.event_source_arn, self.region) for m in received]}
        started = time.monotonic()
        payload, errored, _ = function._invoke_lambda(json.dumps(event))
        log.info("%s: %d message(s) -> %s (%.0f ms, %s)", name, len(received), function.function_name,
                 (time.monotonic() - started) * 1000, "error" if errored else "ok")  # fmt: skip
        if errored:
            return True  # the whole batch becomes visible again after the queue's visibility timeout
        failed = (
            _batch_item_failures(payload) if "ReportBatchItemFailures" in (esm.function_response_types or []) else set()
        )
        done = [m for m in received if m["MessageId"] not in failed]
        for start in range(0, len(done), 10):
            chunk = done[start : start + 10]
            entries = [{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(chunk)]
            sqs.delete_message_batch(QueueUrl=url, Entries=entries)
        return True


def _record(message: dict[str, Any], queue_arn: str, region: str) -> dict[str, Any]:
    attributes = {
        name: {
            "stringValue": value.get("StringValue"),
            "binaryValue": value.get("BinaryValue"),
            "stringListValues": [],
            "binaryListValues": [],
            "dataType": value.get("DataType"),
        }
        for name, value in (message.get("MessageAttributes") or {}).items()
    }
    return {
        "messageId": message["MessageId"],
        "receiptHandle": message["ReceiptHandle"],
        "body": message["Body"],
        "attributes": message.get("Attributes") or {},
        "messageAttributes": attributes,
        "md5OfBody": message.get("MD5OfBody"),
        "eventSource": "aws:sqs",
        "eventSourceARN": queue_arn,
        "awsRegion": region,
    }


def _batch_item_failures(payload: str) -> set[str]:
    try:
        answer = json.loads(payload or "null")
    except ValueError:
        return set()
    failures = answer.get("batchItemFailures") if isinstance(answer, dict) else None
    return {f["itemIdentifier"] for f in failures or [] if isinstance(f, dict) and "itemIdentifier" in f}
