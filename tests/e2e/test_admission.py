"""Issue 34 items 1, 2, 6 and 7 through the front door: one fair queue in front of the GPUs, two callers.

The local image endpoint has one slot (1 instance x ImageConcurrencyPerInstance 1); its emulator's latency is raised to
6 s per image, so caller A's jobs wait in admission's queue while one renders.

- caller B's job, submitted after A's, starts before A's later ones (free slots go round-robin across callers);
- a waiting job's GET /jobs/{id} shows ``queued`` with its place among its caller's own jobs and the callers sharing;
- a job with ``max_queue_seconds: 1`` behind the full pool ends ``expired`` with one job.expired and no model call;
- cancelling a waiting job calls no model and says nothing was rendered or billed.

On main every job called the image endpoint at once (no queue, no ``queued``, no ``max_queue_seconds``: a 400).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.frontdoor import FrontDoorClient, developer_door, new_user
from tests.support.loopback import http
from tests.support.stack import LocalStack

from .helpers import JobEvents, wait_for

pytestmark = pytest.mark.e2e

SMALL = {"image": {"size": "256x256", "num_inference_steps": 1}, "video": {"width": 128, "height": 128,
         "num_frames": 5, "fps": 4, "num_inference_steps": 1}}  # fmt: skip
TIMEOUT_S = 240


@pytest.fixture
def doors(stack: LocalStack) -> tuple[FrontDoorClient, FrontDoorClient]:
    state = stack.state()
    a = developer_door(state)
    _, b_credentials = new_user(state)
    return a, a.as_(b_credentials)


def _image_faults(url: str, faults: dict[str, Any] | None) -> None:
    """The image emulator's faults (None: none)."""
    http().put(f"{url}/_emulator/config", json={"faults": {"images": faults}}, timeout=10).raise_for_status()


@pytest.fixture
def slow_images(stack: LocalStack) -> Iterator[str]:
    url = stack.outputs["OMNIREEL_EMULATOR_IMAGE_MODEL_URL"]
    _image_faults(url, {"latency_s": 6})
    try:
        yield url
    finally:
        _image_faults(url, None)


def _submit(door: FrontDoorClient, prompt: str, **fields: Any) -> str:
    reply = door.post_json({"prompt": prompt, **SMALL, **fields}, ("Idempotency-Key", uuid.uuid4().hex))
    assert reply.status == 202, reply.body
    return reply.json["job_id"]


def _job(door: FrontDoorClient, job_id: str) -> dict[str, Any]:
    reply = door.request("GET", f"/jobs/{job_id}")
    assert reply.status == 200, reply.body
    return reply.json


def _image_requests(url: str) -> int:
    stats = http().get(f"{url}/_emulator/stats", timeout=10).json()
    return int(stats["routes"].get("images", {}).get("requests", 0))


def _quiet(url: str) -> None:
    """No image request in flight or waiting at the emulator (an earlier test's jobs are done with the model)."""

    def idle() -> bool:
        pool = http().get(f"{url}/_emulator/stats", timeout=10).json()["concurrency"]["images"]
        return pool.get("in_flight", 0) == 0 and not pool.get("waiting", 0)

    wait_for(lambda: idle() and (time.sleep(3) or idle()), 180, "the image model to be idle")


def _settled(door: FrontDoorClient, job_ids: list[str]) -> None:
    terminal = {"succeeded", "failed", "cancelled", "expired"}
    wait_for(lambda: all(_job(door, j)["status"] in terminal for j in job_ids), TIMEOUT_S, "the jobs to end")


def test_a_second_callers_job_starts_before_the_first_callers_later_jobs_and_shows_its_place(
    stack: LocalStack, doors: tuple[FrontDoorClient, FrontDoorClient], slow_images: str
) -> None:
    a, b = doors
    a_jobs = [_submit(a, f"a lantern {i} over still water") for i in range(4)]

    def two_queued() -> list[dict[str, Any]] | None:
        # queued with its entry in the queue: the status comes first (WaitForSlot moves the job to queued, then
        # enqueues), and a job granted since its entry was read shows no place either (a CI run read queue None)
        views = [v for v in (_job(a, j) for j in a_jobs) if v["status"] == "queued" and v.get("queue")]
        return views if len(views) >= 2 else None

    waiting = wait_for(two_queued, 120, "two of A's jobs to queue")
    # each waiting job shows its place among A's own jobs (read one after the other: a grant may come in between)
    assert all(v["queue"]["kind"] == "image" and 0 <= v["queue"]["position"] < len(a_jobs) for v in waiting)
    assert max(v["queue"]["position"] for v in waiting) >= 1
    b_job = _submit(b, "a kite over the dunes")
    view = wait_for(lambda: (v := _job(b, b_job))["status"] != "accepted" and v, 120, "B's job to move")
    if view["status"] == "queued" and view["queue"]:  # behind A's running job, first of its caller's, sharing with A
        assert view["queue"]["position"] == 0 and view["queue"]["callers"] == 2
    _settled(b, [b_job])
    _settled(a, a_jobs)
    a_started = sorted(_job(a, j)["stage_times"]["generating_image"] for j in a_jobs)
    b_started = _job(b, b_job)["stage_times"]["generating_image"]
    # first come first served would start B after all of A's jobs; round-robin starts it before A's last ones
    assert b_started < a_started[-1], (b_started, a_started)
    assert sum(t > b_started for t in a_started) >= len(waiting) - 1, (b_started, a_started)


def test_a_job_not_admitted_within_max_queue_seconds_expires_without_a_model_call(
    stack: LocalStack, doors: tuple[FrontDoorClient, FrontDoorClient], slow_images: str
) -> None:
    a, b = doors
    _quiet(slow_images)
    events = JobEvents(stack)
    try:
        busy = [_submit(a, f"a busy lighthouse {i}") for i in range(2)]
        wait_for(lambda: any(_job(a, j)["status"] == "queued" for j in busy), 120, "the pool to be full")
        before = _image_requests(slow_images)
        late = _submit(b, "never admitted", max_queue_seconds=1)
        received = events.until(
            lambda seen: any(e["job_id"] == late and e["event_type"] == "job.expired" for e in seen), timeout=60
        )
        _settled(a, busy)
    finally:
        events.close()
    mine = [e["event_type"] for e in received if e["job_id"] == late]
    assert [t for t in mine if t != "job.queued"] == ["job.expired"] and mine.count("job.queued") <= 1
    view = _job(b, late)
    assert view["status"] == "expired" and view["error"]["code"] == "QueueTimeExceeded"
    assert "nothing was rendered or billed" in view["error"]["message"]
    assert "generating_image" not in view["stage_times"]
    # only A's jobs reached the image model after the pool was full (the expired job never did)
    assert _image_requests(slow_images) - before <= len(busy)


def test_cancelling_a_waiting_job_calls_no_model_and_says_so(
    stack: LocalStack, doors: tuple[FrontDoorClient, FrontDoorClient], slow_images: str
) -> None:
    a, _ = doors
    jobs = [_submit(a, f"a lantern {i} that may be cancelled while it waits") for i in range(2)]
    waiting = wait_for(
        lambda: next((j for j in jobs if _job(a, j)["status"] == "queued"), None), 120, "one of the jobs to queue"
    )
    reply = a.request("DELETE", f"/jobs/{waiting}")
    assert reply.status == 200, reply.body
    assert reply.json["cancelled_at_stage"] == "queue" and reply.json["model_called"] is False
    assert "nothing was rendered or billed" in reply.json["note"]
    _settled(a, jobs)
    view = _job(a, waiting)
    assert view["status"] == "cancelled" and "generating_image" not in view["stage_times"]
    assert view["queue"] is None


def test_a_job_cancelled_during_its_image_call_keeps_the_busy_model_to_itself_until_the_call_ends(
    stack: LocalStack, doors: tuple[FrontDoorClient, FrontDoorClient]
) -> None:
    """The job holding the one image slot is cancelled while the endpoint serves its call (a real-time inference
    cannot be stopped): the next job waits in admission's queue until that call has ended, never inside the busy
    container. Before, the cancel freed the slot at once and the next job's request waited inside the container."""
    a, b = doors
    url = stack.outputs["OMNIREEL_EMULATOR_IMAGE_MODEL_URL"]
    _quiet(url)
    _image_faults(url, {"latency_s": 10})
    try:
        http().delete(f"{url}/_emulator/stats", timeout=10).raise_for_status()
        held = _submit(a, "a paper lamp cancelled while it is drawn")
        wait_for(lambda: _job(a, held)["status"] == "generating_image", 120, "its image call")
        following = _submit(b, "a paper lamp drawn next")
        reply = a.request("DELETE", f"/jobs/{held}")
        _image_faults(url, None)  # the call in flight keeps its 10 s; the next one is quick
        assert reply.status == 200 and reply.json["cancelled_at_stage"] == "generate_image", reply.body
        _settled(b, [following])
    finally:
        _image_faults(url, None)
    images = http().get(f"{url}/_emulator/stats", timeout=10).json()["concurrency"]["images"]
    assert images["peak_in_flight"] == 1 and images["peak_waiting"] == 0, images
    assert _job(b, following)["status"] == "succeeded" and _job(a, held)["status"] == "cancelled"
