"""Lambda: every invocation runs the real handler code in the local Lambda runner, asynchronously where AWS invokes
asynchronously (``AsyncInvoker``: S3, SNS and schedule events, with retries and the on-failure destination), and SQS
event source mappings are polled by the local poller fleet (``event_sources.py``) instead of inline."""

from __future__ import annotations

import json
import logging
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from ..lambda_runner import InvokeResult
from .cards import LOCAL_DESIGN, MOTO_BUG, Context, Patch, iso_now

log = logging.getLogger("omnireel_local.moto")

ASYNC_RETRY_DELAYS_S = (1.0, 2.0)
ASYNC_WORKERS_PER_FUNCTION = 8  # asynchronous invocations of one function running (or retrying) at once

# SQS event source mappings created since the patches were applied: (uuid, spec); run by event_sources.SqsPollers.
SQS_EVENT_SOURCES: list[tuple[str, dict[str, Any]]] = []


class AsyncInvoker:
    """Event-driven (asynchronous) Lambda invocations, as the Lambda service runs them for S3 and SNS.

    The caller's request returns at once; the function runs on a background thread; a failed invocation is retried
    ``MaximumRetryAttempts`` times (EventInvokeConfig, default 2) and then sent to its ``OnFailure`` destination.

    Each function has its own queue (``ASYNC_WORKERS_PER_FUNCTION`` threads), as on AWS, where a function's
    asynchronous invocations wait in that function's own queue: one function's backlog (a slow schedule, retries
    sleeping between attempts) never delays another function's events. One shared pool did: with 300 jobs waiting for
    admission, the healing schedule's runs held every worker and SNS -> AsyncResult deliveries waited 7 minutes.
    """

    def __init__(self, run: Callable[[Any, str], InvokeResult], sqs_send: Callable[[str, str], None]):
        self._run = run
        self._sqs_send = sqs_send
        self._pools: dict[str, ThreadPoolExecutor] = {}
        self._lock = threading.Lock()

    def _pool(self, fn: Any) -> ThreadPoolExecutor:
        name = str(fn.function_name)
        with self._lock:
            if name not in self._pools:
                self._pools[name] = ThreadPoolExecutor(
                    max_workers=ASYNC_WORKERS_PER_FUNCTION, thread_name_prefix=f"lambda-async-{name[-24:]}"
                )
            return self._pools[name]

    def run(self, fn: Any, payload: str) -> InvokeResult:
        """A synchronous invocation (what an event source mapping's poller does)."""
        return self._run(fn, payload)

    def submit(self, fn: Any, payload: str, source: str) -> Future[None]:
        """Queue one asynchronous invocation; the future completes when it ended (retries and destination included)."""
        return self._pool(fn).submit(self._invoke, fn, payload, source)

    def submit_held(self, fn: Any, payload: str, source: str, released: Callable[[], bool], max_s: float) -> None:
        """Deliver once ``released()`` (or after ``max_s`` at the latest): a late event, as S3 may deliver one."""

        def hold_then_invoke() -> None:
            deadline = time.monotonic() + max_s
            while not released() and time.monotonic() < deadline:
                time.sleep(0.05)
            self._invoke(fn, payload, source)

        self._pool(fn).submit(hold_then_invoke)

    def _invoke(self, fn: Any, payload: str, source: str) -> None:
        config = fn.event_invoke_config[0].config if getattr(fn, "event_invoke_config", None) else {}
        retries = int(config.get("MaximumRetryAttempts", 2))
        result: InvokeResult | None = None
        attempt = 0
        for attempt in range(1, retries + 2):
            try:
                result = self._run(fn, payload)
            except Exception:
                log.exception("async invocation of %s crashed", fn.function_name)
                result = None
            if result is not None and not result.errored:
                return
            log.warning(
                "async invocation of %s from %s failed (attempt %d of %d): %s",
                fn.function_name,
                source,
                attempt,
                retries + 1,
                (result.payload if result else "crash")[:300],
            )
            if attempt <= retries:
                time.sleep(ASYNC_RETRY_DELAYS_S[min(attempt - 1, len(ASYNC_RETRY_DELAYS_S) - 1)])
        destination = (config.get("DestinationConfig") or {}).get("OnFailure", {}).get("Destination")
        if not destination:
            return
        record = {
            "version": "1.0",
            "timestamp": iso_now(),
            "requestContext": {
                "requestId": str(uuid.uuid4()),
                "functionArn": f"{fn.function_arn}:$LATEST",
                "condition": "RetriesExhausted",
                "approximateInvokeCount": attempt,
            },
            "requestPayload": json.loads(payload),
            "responseContext": {"statusCode": 200, "executedVersion": "$LATEST", "functionError": "Unhandled"},
            "responsePayload": json.loads(result.payload) if result else None,
        }
        if destination.split(":")[2] == "sqs":
            self._sqs_send(destination, json.dumps(record))
            log.warning("async invocation of %s: retries exhausted, sent to %s", fn.function_name, destination)

    def shutdown(self) -> None:
        with self._lock:
            pools = list(self._pools.values())
        for pool in pools:
            pool.shutdown(wait=False, cancel_futures=True)


def install_runner(ctx: Context) -> None:
    from moto.awslambda.models import LambdaFunction

    def _invoke_lambda(self: Any, event: Any = None) -> tuple[str, bool, str]:
        payload = event if isinstance(event, str) else json.dumps(event if event is not None else {})
        result = ctx.run(self, payload)
        return result.payload, result.errored, ""

    LambdaFunction._invoke_lambda = _invoke_lambda


def install_sqs_event_sources(ctx: Context) -> None:
    from moto.awslambda.models import LambdaBackend

    original_create_esm = LambdaBackend.create_event_source_mapping

    def create_event_source_mapping(self: Any, spec: dict[str, Any]) -> Any:
        from moto.sqs.models import sqs_backends

        esm = original_create_esm(self, spec)
        if ":sqs:" in str(spec.get("EventSourceArn")):
            for queue in sqs_backends[self.account_id][self.region_name].queues.values():
                if queue.queue_arn == spec["EventSourceArn"]:
                    queue.lambda_event_source_mappings.pop(esm.function_arn, None)
            SQS_EVENT_SOURCES.append((esm.uuid, dict(spec)))
        return esm

    LambdaBackend.create_event_source_mapping = create_event_source_mapping


def install_event_source_state(ctx: Context) -> None:
    from moto.awslambda.models import EventSourceMapping

    from .. import event_sources

    original = EventSourceMapping.get_configuration

    def get_configuration(self: Any) -> dict[str, Any]:
        config = original(self)
        state = event_sources.state_of(self.uuid, bool(self.enabled))
        if state is not None:  # an SQS mapping the local poller fleet runs
            config["State"] = state
        return config

    EventSourceMapping.get_configuration = get_configuration


CARDS = [
    Patch(
        "1",
        "Lambda runs the real handlers in the local runner",
        aws="Invoke, Step Functions tasks, SNS, S3 and SQS event sources run the function's code in its runtime.",
        moto="LambdaFunction._invoke_lambda runs code only in Docker (lambci images); there is no Docker here.",
        test="tests/e2e/test_pipeline.py::test_api_path_produces_a_decodable_mp4",
        upstream=LOCAL_DESIGN,
        installs=install_runner,
    ),
    Patch(
        "15",
        "SQS event source mappings are polled, not run inside SendMessage",
        aws="The Lambda service polls the queue as the function's role: BatchSize, MaximumConcurrency, "
        "ReportBatchItemFailures, the queue's redrive policy.",
        moto="create_event_source_mapping delivers inline inside SendMessage, one message per invocation, no partial "
        "batch responses and no concurrency bound (the sender blocks for the consumer's whole run).",
        test="tests/e2e/test_batches.py::test_a_dropped_jsonl_with_bad_lines_runs_every_line_once",
        upstream=MOTO_BUG,
        installs=install_sqs_event_sources,
    ),
    Patch(
        "15b",
        "A disabled SQS event source mapping stops polling, and its State says when it has",
        aws="UpdateEventSourceMapping Enabled=false stops the mapping's pollers; State is Disabling while batches "
        "already taken finish, then Disabled. Enabled=true resumes it.",
        moto="update_event_source_mapping sets a flag that patch 15's pollers (the local design that replaces moto's "
        "inline delivery) must read, and State reads Disabled at once, while a receive may still be under way.",
        test="tests/e2e/test_event_source_disable.py::"
        "test_a_disabled_mapping_receives_nothing_until_it_is_enabled_again",
        upstream=LOCAL_DESIGN,
        installs=install_event_source_state,
    ),
]
