"""Slow DNS at submit time (issue 33 item 2) through the front door of the local stack: a webhook host whose lookup
takes 30 s (the local resolver hook for ``.test`` names, ``delay_s``).

- ``POST /jobs`` answers a clear 400 within the submit-time bound. On main it answered 500 after 15.5 s: the API's
  check called ``getaddrinfo`` unbounded and the API function hit its Timeout.
- A 4-line ``POST /batches`` (lines 1, 2 and 4 aimed at the slow host, line 3 without a webhook) completes within a
  bounded wait: the slow lines fail with the reason, line 3 succeeds, the counts add up to 4. On main BatchSubmit
  timed out (two 30 s lookups fill its 60 s), its chunk came back only after the queue's 360 s visibility timeout,
  each redelivery looked line 1 up again, and the batch stayed ``running`` past the bound.
"""

from __future__ import annotations

import json
import time
import urllib.request
import uuid

import pytest

from omnireel.webhooks.submit_check import SUBMIT_RESOLVE_TIMEOUT_S
from tests.support.frontdoor import developer_door, new_user
from tests.support.stack import LocalStack

from .helpers import SMALL_MEDIA, platform_faults, wait_for

pytestmark = pytest.mark.e2e

DELAY_S = 30  # far past the submit-time bound and the API function's 15 s Timeout
BATCH_BOUND_S = 240  # generous: a shared 2-core machine; the batch takes well under a minute when idle


def _slow_host(stack: LocalStack) -> str:
    host = f"slow-{uuid.uuid4().hex[:8]}.hooks.test"
    platform_faults(stack, {"dns": {host: {"delay_s": DELAY_S}}})
    return host


def test_post_jobs_with_a_slow_webhook_host_answers_a_clear_400_at_once(stack: LocalStack) -> None:
    host = _slow_host(stack)
    try:
        door = developer_door(stack.state())
        body = json.dumps({"prompt": "a kite over a slow resolver", "webhook": f"http://{host}:9/hooks"}).encode()
        started = time.monotonic()
        reply = door.request("POST", "/jobs", body, [("Idempotency-Key", f"slow-dns-{host}")])
        took = time.monotonic() - started
        # Another caller, at the same time of the stack's life, is not held up by it.
        _, other = new_user(stack.state())
        quick = door.as_(other).request("POST", "/jobs", json.dumps({"prompt": "a kite, no webhook"}).encode(), [])
    finally:
        platform_faults(stack, {})
    assert reply.status == 400, (reply.status, reply.body, took)
    assert reply.json["error"]["code"] == "WebhookResolveTimeout"
    message = reply.json["error"]["message"]
    assert host in message and f"did not resolve within {SUBMIT_RESOLVE_TIMEOUT_S:g} s" in message, message
    assert took < SUBMIT_RESOLVE_TIMEOUT_S + 5, f"answered after {took:.1f} s"  # well inside the API's 15 s Timeout
    assert quick.status == 202, quick.body


def test_a_batch_with_a_slow_webhook_host_completes_with_its_lines_failed_with_the_reason(stack: LocalStack) -> None:
    host = _slow_host(stack)
    door = developer_door(stack.state())
    jobs: list[dict] = []
    for n in range(1, 5):
        job: dict = {"prompt": f"a heron {n} at dusk", "seed": n, **SMALL_MEDIA}
        if n != 3:
            job["webhook"] = f"http://{host}:9/hooks"
        jobs.append(job)
    try:
        reply = door.request("POST", "/batches", json.dumps({"jobs": jobs}).encode(), [])
        assert reply.status == 202, reply.body
        batch_id = reply.json["batch_id"]
        batch = wait_for(
            lambda: (
                (r := door.request("GET", f"/batches/{batch_id}", b"", [])).status == 200
                and r.json["status"] == "completed"
                and r.json
            ),
            timeout=BATCH_BOUND_S,
            what=f"batch {batch_id} to complete (a slow webhook host must not leave it running)",
        )
    finally:
        platform_faults(stack, {})
    assert batch["counts"] == {
        "total": 4, "accepted": 1, "rejected": 3, "succeeded": 1, "failed": 3, "cancelled": 0,
    }  # fmt: skip
    with urllib.request.urlopen(batch["manifest"]["url"], timeout=60) as response:  # noqa: S310 - presigned, loopback
        manifest = {row["line"]: row for row in map(json.loads, response.read().decode().splitlines())}
    assert sorted(manifest) == [1, 2, 3, 4]
    for n in (1, 2, 4):
        row = manifest[n]
        assert row["status"] == "failed", row
        assert f"line {n}: " in row["error"] and "did not resolve within" in row["error"] and host in row["error"], row
    assert manifest[3]["status"] == "succeeded"
