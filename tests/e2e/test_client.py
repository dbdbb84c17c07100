"""Issue 28: the Python client (``omnireel_client``) against the local stack, as an app uses it: signed requests through
the front door, stage-by-stage waits, downloads, paging, cancellation, batches, webhooks, two callers, asyncio.

The clean-install path (``pip install ./client`` into a fresh Python 3.10+ environment, then the examples of
docs/client.md) is tests/e2e/test_client_docs.py."""

from __future__ import annotations

import asyncio
import json
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from omnireel_client import (
    AsyncClient,
    Client,
    ConflictError,
    InvalidRequestError,
    InvalidWebhookError,
    Job,
    JobFailedError,
    NotFoundError,
    WaitTimeout,
)
from tests.support.frontdoor import new_user
from tests.support.stack import LocalStack

from .helpers import decode_mp4, png_size

FAST = {"video": {"num_inference_steps": 2}}
TIMEOUT_S = 120


@pytest.fixture(scope="module")
def client(stack: LocalStack) -> Client:
    return Client.local(stack.home)


def test_run_waits_stage_by_stage_and_downloads_real_media(client: Client, tmp_path: Path) -> None:
    stages: list[str] = []
    job = client.run("a paper boat on a rainy street", timeout=TIMEOUT_S, on_progress=lambda j: stages.append(j.status),
                     seed=5, **FAST)  # fmt: skip
    assert job.succeeded and job.done and job.error is None
    assert stages[-1] == "succeeded" and stages == sorted(set(stages), key=stages.index)  # each stage once, in order
    assert set(job.stage_times) >= {"accepted", "generating_image", "staging_video", "rendering_video", "succeeded"}
    assert job.timings["total_s"] is not None and job.timings["total_s"] > 0
    assert job.video is not None and job.video.expires_at is not None and not job.video.expired
    saved = job.download(tmp_path)
    assert set(saved) == {"image", "video"}
    width, height = (int(side) for side in job.request["image"]["size"].split("x"))
    assert png_size(saved["image"]) == (width, height)
    video = job.request["video"]
    assert decode_mp4(saved["video"]) == (video["num_frames"], video["width"], video["height"])


def test_a_finished_jobs_event_is_the_one_consumers_received(stack: LocalStack, client: Client) -> None:
    """GET /jobs/{id}/event (issue 37 item 4: the page downloads it): the same event the topic carried, 404
    EventNotPublished before; another caller gets the job's 404."""
    job = client.submit("a lantern on a pier", **FAST)
    with pytest.raises(NotFoundError) as early:
        job.event()
    assert early.value.code == "EventNotPublished"
    job.wait(TIMEOUT_S)
    event = job.event()
    published = [
        e for e in (json.loads(line) for line in stack.cli("events", "--job", job.job_id, "--json", check=True)
                    .stdout.splitlines()) if e["event_type"] == "job.succeeded"
    ]  # fmt: skip
    assert len(published) == 1
    assert {k: event[k] for k in ("event_id", "event_type", "occurred_at", "job_id", "status", "timings")} == {
        k: published[0][k] for k in ("event_id", "event_type", "occurred_at", "job_id", "status", "timings")
    }
    assert event["artifacts"]["video"]["url"].startswith("http")
    _, credentials = new_user(stack.state())
    with pytest.raises(NotFoundError) as other:
        Client(client.api_url, client.region, credentials).job(job.job_id)
    assert other.value.code == "JobNotFound"


def test_a_retry_with_the_same_key_is_the_same_job(client: Client) -> None:
    first = client.submit("one job, however often it is sent", idempotency_key="app-key-1", **FAST)
    again = client.submit("one job, however often it is sent", idempotency_key="app-key-1", **FAST)
    assert again.job_id == first.job_id and first.idempotency_key == "app-key-1"
    with pytest.raises(ConflictError) as other:
        client.submit("a different request under the same key", idempotency_key="app-key-1")
    assert other.value.status == 409
    assert client.submit("generated keys differ", **FAST).idempotency_key != first.idempotency_key


def test_a_refused_request_lists_every_problem(client: Client) -> None:
    with pytest.raises(InvalidRequestError) as refused:
        client.submit("", seed="x", video={"num_frames": 16})
    error = refused.value
    assert (error.status, error.code) == (400, "InvalidRequest")
    assert {p.field for p in error.problems} == {"prompt", "seed", "video.num_frames"}
    assert all(p.field in str(error) for p in error.problems)


def test_paging_over_every_job_and_filtering(client: Client) -> None:
    submitted = {client.submit(f"page me {i}", **FAST).job_id for i in range(5)}
    listed = [summary.job_id for summary in client.jobs(page_size=2)]
    assert submitted <= set(listed) and len(listed) == len(set(listed))  # every job, each once, across pages
    first = client.jobs_page(limit=2)
    assert len(first.jobs) == 2 and first.next_cursor
    assert client.jobs_page(limit=2, cursor=first.next_cursor).jobs[0].job_id == listed[2]
    for summary in client.jobs(status="succeeded", page_size=3):
        assert summary.status == "succeeded"


def test_cancel_is_idempotent_and_a_finished_job_cannot_be_cancelled(client: Client) -> None:
    job = client.submit("cancel me", **FAST)
    cancelled = job.cancel()
    assert cancelled.status == "cancelled" and cancelled.cancellation is not None
    assert not cancelled.cancellation.already and cancelled.cancellation.note
    again = client.cancel(job.job_id)
    assert again.status == "cancelled" and again.cancellation is not None and again.cancellation.already
    with pytest.raises(JobFailedError) as failed:
        job.wait(10, raise_on_failure=True)
    assert failed.value.job.status == "cancelled"
    done = client.run("finished first", timeout=TIMEOUT_S, **FAST)
    with pytest.raises(ConflictError):
        done.cancel()


def test_wait_is_bounded(client: Client) -> None:
    job = client.submit("a short wait", **FAST)
    started = time.monotonic()
    with pytest.raises(WaitTimeout) as timed_out:
        job.wait(0.1)
    assert time.monotonic() - started < 5 and timed_out.value.last is job
    job.wait(TIMEOUT_S)


def test_another_caller_sees_and_cancels_nothing_of_mine(stack: LocalStack, client: Client) -> None:
    mine = client.submit("mine only", **FAST)
    _, credentials = new_user(stack.state())
    other = Client(client.api_url, client.region, credentials)
    with pytest.raises(NotFoundError):
        other.job(mine.job_id)
    with pytest.raises(NotFoundError):
        other.cancel(mine.job_id)
    assert mine.job_id not in {summary.job_id for summary in other.jobs()}
    assert other.webhook_secret().secret != client.webhook_secret().secret
    mine.wait(TIMEOUT_S)


def test_a_batch_and_its_counts(client: Client) -> None:
    counts: list[int] = []
    batch = client.submit_batch(["a fox", {"prompt": "a hen", **FAST}, {"prompt": ""}])
    assert batch.counts.total == 3
    batch.wait(TIMEOUT_S, on_progress=lambda b: counts.append(b.counts.done))
    assert batch.done and (batch.counts.succeeded, batch.counts.failed) == (2, 1) and counts[-1] == 3
    assert batch.manifest is not None and batch.manifest.url.startswith("http")
    assert client.batch(batch.batch_id).counts == batch.counts


def test_verify_webhook_accepts_our_signature_only(client: Client) -> None:
    from standardwebhooks.webhooks import Webhook

    secret = client.webhook_secret()
    body = b'{"event_type": "job.succeeded", "job_id": "j-1"}'
    stamp = time.time()
    signature = Webhook(secret.secret).sign("msg_1", datetime.fromtimestamp(stamp, tz=UTC), body.decode())
    headers = {"Webhook-Id": "msg_1", "Webhook-Timestamp": str(int(stamp)), "Webhook-Signature": signature}
    event = client.verify_webhook(headers, body, secret)
    assert (event.id, event.type, event.job_id) == ("msg_1", "job.succeeded", "j-1")
    with pytest.raises(InvalidWebhookError):
        client.verify_webhook(headers, body.replace(b"j-1", b"j-2"), secret)  # tampered
    with pytest.raises(InvalidWebhookError):
        client.verify_webhook(headers, body, "whsec_" + "A" * 43 + "=")  # someone else's secret


def test_the_asyncio_twin(stack: LocalStack) -> None:
    async def main() -> tuple[str, list[str], int]:
        client = AsyncClient.local(stack.home)
        seen: list[str] = []

        async def progress(job: object) -> None:
            seen.append(job.status)  # type: ignore[attr-defined]

        job = await client.run("an async lighthouse", timeout=TIMEOUT_S, on_progress=progress, **FAST)
        listed = [summary async for summary in client.jobs(page_size=2)]
        return job.status, seen, len(listed)

    status, seen, listed = asyncio.run(main())
    assert status == "succeeded" and seen[-1] == "succeeded" and listed >= 1


def test_a_job_object_is_typed(client: Client) -> None:
    job = client.job(client.submit("typed", **FAST).job_id)
    assert isinstance(job, Job) and job.created_at is not None and job.created_at.tzinfo is not None
    assert job.request is not None and job.request["prompt"] == "typed"
    job.wait(TIMEOUT_S)
