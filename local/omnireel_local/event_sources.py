"""SQS event source mappings for the local stack: Lambda's queue pollers, with batches and partial batch responses.

moto 5.2.5 runs an SQS event source mapping inline: ``SendMessage`` itself invokes the function synchronously with
the one message just sent, deletes it on success, and knows nothing of ``BatchSize`` windows, ``FunctionResponseTypes:
ReportBatchItemFailures`` (partial batch responses) or ``ScalingConfig.MaximumConcurrency``. A producer's SendMessage
would then block for the consumer's whole run, and a template's concurrency bound would not exist locally. AWS runs
the mapping as a poller fleet owned by the Lambda service; this module is that fleet (``patches.lambda_`` patch 15
detaches moto's inline delivery and hands each SQS mapping here).

As on AWS:
- the poller reads the queue as the function's execution role (``sqs:ReceiveMessage``/``DeleteMessage``/
  ``GetQueueAttributes`` must be in the template, IAM is enforced);
- at most ``MaximumConcurrency`` invocations run at once for the mapping (AWS's minimum 2; without the setting, the
  local default is ``DEFAULT_CONCURRENCY``);
- a batch is up to ``BatchSize`` messages (gathered over at most ``MaximumBatchingWindowInSeconds``);
- a mapping updated to ``Enabled: false`` stops receiving: its ``State`` is ``Disabling`` while a receive or an
  invocation it began is still under way (a long poll ends within ``RECEIVE_WAIT_S``; messages it took are delivered),
  then ``Disabled`` (``state_of``, read by ``GetEventSourceMapping``: patch 15b); ``Enabled: true`` resumes it;
- a successful invocation deletes its messages, except those named in ``batchItemFailures`` when the mapping reports
  item failures; a failed invocation deletes nothing, so its messages come back after the visibility timeout and end in
  the queue's redrive (dead-letter) target after ``maxReceiveCount`` receives, which SQS itself enforces.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger("omnireel_local.event_sources")

DEFAULT_CONCURRENCY = 4
# Long polling as Lambda's own pollers do it (20 s, SQS's maximum): an idle queue costs one ReceiveMessage per poller
# per 20 s instead of one per second (11 pollers at 1 s kept an idle stack at ~15 % of a core). A message sent
# meanwhile ends the wait at once (moto wakes the waiting receive), so delivery is not slower. Shutdown does not wait
# for these waits: the threads are daemons, and a poller that wakes after shutdown delivers nothing.
RECEIVE_WAIT_S = 20
SHUTDOWN_DELIVERY_WAIT_S = 5  # shutdown waits this long at most for invocations already under way
DISABLED_RECHECK_S = 1.0  # a disabled mapping's pollers look at its Enabled flag this often (no AWS call)

# The running fleets (one per stack process), for ``state_of``.
_FLEETS: list[SqsPollers] = []


@dataclass
class SqsMapping:
    uuid: str
    queue_arn: str
    function_arn: str
    batch_size: int = 10
    window_s: float = 0.0
    concurrency: int = DEFAULT_CONCURRENCY
    report_item_failures: bool = False
    stats: dict[str, int] = field(default_factory=lambda: {"invocations": 0, "errors": 0, "item_failures": 0})
    active: int = 0  # pollers inside a receive or an invocation (guarded by SqsPollers._idle)

    @classmethod
    def from_spec(cls, esm_uuid: str, spec: dict[str, Any]) -> SqsMapping:
        scaling = spec.get("ScalingConfig") or {}
        return cls(
            uuid=esm_uuid,
            queue_arn=spec["EventSourceArn"],
            function_arn=spec["FunctionArn"],
            batch_size=int(spec.get("BatchSize") or 10),
            window_s=float(spec.get("MaximumBatchingWindowInSeconds") or 0),
            concurrency=max(2, int(scaling.get("MaximumConcurrency") or DEFAULT_CONCURRENCY)),
            report_item_failures="ReportBatchItemFailures" in (spec.get("FunctionResponseTypes") or []),
        )


def lambda_record(message: dict[str, Any], queue_arn: str, region: str) -> dict[str, Any]:
    """One ``Records[]`` entry of the event Lambda sends for an SQS batch."""
    attributes = {}
    for name, value in (message.get("MessageAttributes") or {}).items():
        attributes[name] = {
            "stringValue": value.get("StringValue"),
            "binaryValue": value.get("BinaryValue"),
            "stringListValues": [],
            "binaryListValues": [],
            "dataType": value.get("DataType"),
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


def failed_item_ids(payload: str) -> set[str] | None:
    """The message ids a partial batch response names; None when the response is malformed (AWS then treats the
    whole batch as failed)."""
    try:
        response = json.loads(payload) if payload else None
    except ValueError:
        return None
    if not response:
        return set()
    if not isinstance(response, dict):
        return None
    failures = response.get("batchItemFailures")
    if failures is None:
        return set()
    if not isinstance(failures, list):
        return None
    ids = set()
    for failure in failures:
        item = failure.get("itemIdentifier") if isinstance(failure, dict) else None
        if not item:
            return None
        ids.add(item)
    return ids


def state_of(esm_uuid: str, enabled: bool) -> str | None:
    """The ``State`` of a polled SQS mapping as Lambda reports it; None when no fleet polls it."""
    for fleet in list(_FLEETS):
        state = fleet.state(esm_uuid, enabled)
        if state is not None:
            return state
    return None


class SqsPollers:
    """``concurrency`` polling threads per mapping; ``shutdown()`` stops them (bounded join). ``enabled_of(uuid)``:
    the mapping's ``Enabled`` setting as the Lambda API last set it."""

    def __init__(
        self,
        mappings: list[SqsMapping],
        *,
        function_of: Callable[[str], Any],
        invoke: Callable[[Any, str], Any],
        sqs_client_for: Callable[[str], Any],
        queue_url_of: Callable[[str], str],
        region: str,
        enabled_of: Callable[[str], bool] = lambda _uuid: True,
    ):
        self.mappings = mappings
        self._enabled_of = enabled_of
        self._function_of = function_of  # function ARN -> moto LambdaFunction
        self._invoke = invoke  # (function, payload) -> InvokeResult, synchronous
        self._sqs_client_for = sqs_client_for  # role ARN -> SQS client signed as that role
        self._queue_url_of = queue_url_of
        self._region = region
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._delivering = 0  # invocations under way (shutdown waits for them, bounded)
        self._idle = threading.Condition()

    def state(self, esm_uuid: str, enabled: bool) -> str | None:
        """``Enabled``; ``Disabling`` while a receive or invocation begun before the update is under way; then
        ``Disabled``."""
        mapping = next((m for m in self.mappings if m.uuid == esm_uuid), None)
        if mapping is None:
            return None
        if enabled:
            return "Enabled"
        with self._idle:
            return "Disabling" if mapping.active else "Disabled"

    def start(self) -> None:
        _FLEETS.append(self)
        for mapping in self.mappings:
            log.info(
                "sqs event source %s -> %s: batch %d, window %.1f s, concurrency %d, item failures %s",
                mapping.queue_arn, mapping.function_arn, mapping.batch_size, mapping.window_s,
                mapping.concurrency, mapping.report_item_failures,
            )  # fmt: skip
            for n in range(mapping.concurrency):
                thread = threading.Thread(
                    target=self._poll, args=(mapping,), name=f"sqs-poller-{mapping.uuid[:8]}-{n}", daemon=True
                )
                thread.start()
                self._threads.append(thread)

    def shutdown(self) -> None:
        """Stop polling. Waits (bounded) for invocations under way; threads still inside a long poll are left to it:
        they are daemons, and one that receives messages after this delivers nothing (the messages become visible again
        after the visibility timeout, as when a mapping is disabled on AWS)."""
        self._stop.set()
        with self._idle:
            self._idle.wait_for(lambda: self._delivering == 0, timeout=SHUTDOWN_DELIVERY_WAIT_S)
        if self in _FLEETS:
            _FLEETS.remove(self)

    def _begin(self, mapping: SqsMapping) -> bool:
        """Counts this poller in ``mapping.active`` if the mapping is enabled (checked under the same lock as
        ``state``, so ``Disabled`` is never reported while a receive may still begin); False if it is disabled."""
        with self._idle:
            if not self._enabled_of(mapping.uuid):
                return False
            mapping.active += 1
            return True

    def _end(self, mapping: SqsMapping) -> None:
        with self._idle:
            mapping.active -= 1
            self._idle.notify_all()

    def _poll(self, mapping: SqsMapping) -> None:
        queue_url = None
        while not self._stop.is_set():
            try:
                fn = self._function_of(mapping.function_arn)
                sqs = self._sqs_client_for(str(fn.role))
                if queue_url is None:  # the Lambda service knows the queue from its ARN (no sqs:GetQueueUrl)
                    queue_url = self._queue_url_of(mapping.queue_arn)
                if not self._begin(mapping):  # disabled (UpdateEventSourceMapping Enabled=false): receive nothing
                    self._stop.wait(DISABLED_RECHECK_S)
                    continue
                try:
                    messages = self._receive(sqs, queue_url, mapping)
                    if messages:
                        with self._idle:
                            if self._stop.is_set():  # received during shutdown: not delivered, visible again later
                                return
                            self._delivering += 1
                        try:
                            self._deliver(sqs, queue_url, mapping, fn, messages)
                        finally:
                            with self._idle:
                                self._delivering -= 1
                                self._idle.notify_all()
                finally:
                    self._end(mapping)
            except Exception:  # keep polling, as the Lambda service does; the log says what went wrong
                if self._stop.is_set():  # the stack is stopping (its endpoints close under a waiting receive)
                    return
                log.exception("sqs event source %s: poll failed", mapping.uuid)
                self._stop.wait(1.0)

    def _receive(self, sqs: Any, queue_url: str, mapping: SqsMapping) -> list[dict[str, Any]]:
        messages: list[dict[str, Any]] = []
        window_ends = time.monotonic() + mapping.window_s
        while not self._stop.is_set() and len(messages) < mapping.batch_size:
            wanted = min(10, mapping.batch_size - len(messages))
            got = sqs.receive_message(
                QueueUrl=queue_url,
                MaxNumberOfMessages=wanted,
                WaitTimeSeconds=RECEIVE_WAIT_S if not messages else 0,
                AttributeNames=["All"],
                MessageAttributeNames=["All"],
            ).get("Messages", [])
            messages.extend(got)
            if not got and (not messages or time.monotonic() >= window_ends):
                break
            if messages and time.monotonic() >= window_ends and len(got) < wanted:
                break
        return messages

    def _deliver(self, sqs: Any, queue_url: str, mapping: SqsMapping, fn: Any, messages: list[dict[str, Any]]) -> None:
        event = {"Records": [lambda_record(m, mapping.queue_arn, self._region) for m in messages]}
        result = self._invoke(fn, json.dumps(event))
        mapping.stats["invocations"] += 1
        if result.errored:
            mapping.stats["errors"] += 1
            log.warning("sqs event source %s: %s failed; %d message(s) retried after the visibility timeout",
                        mapping.uuid, mapping.function_arn, len(messages))  # fmt: skip
            return
        failed: set[str] | None = set()
        if mapping.report_item_failures:
            failed = failed_item_ids(result.payload)
            if failed is None:
                mapping.stats["errors"] += 1
                log.warning("sqs event source %s: malformed batchItemFailures; whole batch retried", mapping.uuid)
                return
        mapping.stats["item_failures"] += len(failed)
        done = [m for m in messages if m["MessageId"] not in failed]
        for start in range(0, len(done), 10):
            page = done[start : start + 10]
            entries = [{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(page)]
            sqs.delete_message_batch(QueueUrl=queue_url, Entries=entries)
