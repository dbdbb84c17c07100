"""``Job.wait`` returns once the job has ended *and* its terminal event is out (``event_published_at``).

The API turns a job's status terminal a moment before the event is published and recorded (finish_job: transition,
publish, record). A client that waited for the status alone and then asked for the event got 404 EventNotPublished
(tests/e2e/test_client.py failed once so, in a make test run at f999ec2). The scripted API below answers exactly that
window, then the recorded event: both the sync and the asyncio client must wait through it."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from omnireel_client import AsyncClient, Client, WaitTimeout

from .conftest import ACCEPTED, CREDENTIALS

JOB_ID = ACCEPTED["job_id"]
BASE = {"job_id": JOB_ID, "created_at": "2026-12-05T16:00:00Z", "updated_at": "2026-12-05T16:00:09Z",
        "source": "api", "stage_times": {}, "timings": {}, "artifacts": {}}  # fmt: skip
RUNNING = {**BASE, "status": "rendering_video", "event_published_at": None}
ENDED_EVENT_PENDING = {**BASE, "status": "succeeded", "event_published_at": None}
ENDED = {**BASE, "status": "succeeded", "event_published_at": "2026-12-05T16:00:10Z"}


def _wait(url: str, flavour: str, timeout: float) -> Any:
    if flavour == "sync":
        client = Client(url, "eu-west-1", CREDENTIALS, timeout=5.0)
        return client.job(JOB_ID).wait(timeout)

    async def waited() -> Any:
        client = AsyncClient(url, "eu-west-1", CREDENTIALS, timeout=5.0)
        job = await client.job(JOB_ID)
        return await job.wait(timeout)

    return asyncio.run(waited())


@pytest.mark.parametrize("flavour", ["sync", "async"])
def test_wait_returns_when_the_event_is_out_not_when_the_status_ends(api, flavour: str) -> None:
    url, script = api
    script.answers = [(200, RUNNING, {}, 0.0), (200, ENDED_EVENT_PENDING, {}, 0.0), (200, ENDED_EVENT_PENDING, {}, 0.0),
                      (200, ENDED, {}, 0.0)]  # fmt: skip
    job = _wait(url, flavour, timeout=30)
    assert job.status == "succeeded" and job.event_published_at is not None
    assert len(script.seen) == 4  # job() and three polls: through the window, not back at the first "succeeded"


@pytest.mark.parametrize("flavour", ["sync", "async"])
def test_a_wait_that_runs_out_says_the_event_is_not_out(api, flavour: str) -> None:
    url, script = api
    script.answers = [(200, ENDED_EVENT_PENDING, {}, 0.0)]
    with pytest.raises(WaitTimeout, match=r"is still succeeded \(its terminal event is not out yet\)"):
        _wait(url, flavour, timeout=0.3)


@pytest.mark.parametrize("flavour", ["sync", "async"])
def test_an_api_without_the_field_is_taken_at_its_status(api, flavour: str) -> None:
    """An API from before ``event_published_at``: the job's status decides, as it did."""
    url, script = api
    old = {key: value for key, value in ENDED_EVENT_PENDING.items() if key != "event_published_at"}
    script.answers = [(200, old, {}, 0.0)]
    assert _wait(url, flavour, timeout=30).status == "succeeded"
    assert len(script.seen) == 2  # job() and the first poll
