"""SQS (batch queue) -> the fan-out: ``split`` steps of a dropped .jsonl file and chunks of ``lines`` -> jobs.

Partial batch responses through Powertools' ``BatchProcessor``: only a record that fails is reported in
``batchItemFailures`` and comes back after the queue's visibility timeout; the others are deleted. On its last
receive (``BATCH_MAX_RECEIVES``, the queue's maxReceiveCount) a work item that still fails ends its lines instead of
dead-lettering them (``omnireel.batches.fanout``). Every step is idempotent, so a redelivered message never makes a
line's job twice. Concurrency is the event source mapping's ``MaximumConcurrency`` (template: BatchSubmitConcurrency);
the in-flight bound is ``BATCH_MAX_IN_FLIGHT_JOBS`` (template: BatchMaxInFlightJobs).

The invocation's end (``context.get_remaining_time_in_millis()``, less ``RESERVE_S`` to answer) is every record's
deadline: a line or split step that would not fit before it is queued again as a new work item instead of being cut
by the Timeout (``omnireel.batches.fanout``), so a slow webhook lookup in one record never fails the other record of
the invocation (BatchSize 2), and the last receive's safety net always gets to run. The same rule as the webhook
delivery function (each attempt ends before the invocation does).
"""

import json
import time

from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from aws_lambda_powertools.utilities.typing import LambdaContext

from omnireel.aws import adapters
from omnireel.batches.batch import Line
from omnireel.batches.fanout import Fanout
from omnireel.runtime.handler import lambda_handler
from omnireel.runtime.observability import MetricUnit, logger, metrics
from omnireel.runtime.settings import BatchSettings

settings = BatchSettings.from_env()
fanout = Fanout(
    store=adapters.batch_store(settings, eager=True),
    queue=adapters.batch_queue(settings, eager=True),
    inbox=adapters.inbox_store(),
    jobs=adapters.job_store(settings),
    workflow=adapters.workflow(settings),
    artifacts=adapters.artifact_store(settings),
    publisher=adapters.event_publisher(settings),
    presign_seconds=settings.presign_seconds,
    default_video_steps=settings.default_video_steps,
    max_in_flight=settings.batch_max_in_flight_jobs,
    retry_base_s=settings.batch_retry_base_seconds,
    allow_loopback_http=settings.webhook_allow_loopback_http,
    max_deferral_s=settings.batch_max_deferral_seconds,
)
# An entire failed batch is reported record by record too (not raised): the same response shape either way.
processor = BatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)
# Kept free at the invocation's end: the partial batch response and the metrics flush.
RESERVE_S = 2.0
_invocation = {"deadline": 0.0, "records": 0}  # time.monotonic() of this invocation's usable end; records started


def record_handler(record: SQSRecord) -> None:
    body = json.loads(record.body)
    receives = int(record.attributes.approximate_receive_count or 1)
    final = receives >= settings.batch_max_receives
    first = _invocation["records"] == 0  # the invocation's first record always moves (its first line, its step)
    _invocation["records"] += 1
    deadline = _invocation["deadline"]
    if body["kind"] == "split":
        fanout.split_step(
            body["batch_id"], int(body["offset"]), int(body["line"]), redelivered=receives > 1, final=final,
            deadline=deadline, first=first,
        )  # fmt: skip
    elif body["kind"] == "lines":
        lines = [Line.from_message(item) for item in body["lines"]]
        queued_at = body.get("queued_at")
        outcome = fanout.submit_lines(
            body["batch_id"],
            lines,
            int(body.get("attempt", 0)),
            queued_at=int(queued_at) if queued_at is not None else None,
            final=final,
            deadline=deadline,
            first=first,
        )
        for name, count in outcome.items():
            if count:
                metrics.add_metric(name=f"batch_lines_{name}", unit=MetricUnit.Count, value=count)
    else:
        logger.error("unknown batch work item", extra={"kind": body.get("kind")})


@lambda_handler()
def handler(event: dict, context: LambdaContext) -> dict:
    _invocation["deadline"] = time.monotonic() + context.get_remaining_time_in_millis() / 1000 - RESERVE_S
    _invocation["records"] = 0
    return dict(
        process_partial_response(event=event, record_handler=record_handler, processor=processor, context=context)
    )
