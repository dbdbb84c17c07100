"""Issue 33 item 6: a POST /batches line holding a character SQS refuses in a message body (a raw U+FFFE or U+FFFF
in a prompt: valid UTF-8, valid JSON) is carried JSON-escaped, so the batch completes with every line handled. The
local SQS refuses such bodies as AWS does (moto patch 29b); the API used to put the line raw into the chunk, and the
whole request failed (503) on the refused entry."""

from __future__ import annotations

import json
import time

import pytest

from tests.support.frontdoor import FrontDoorClient, developer_door
from tests.support.stack import LocalStack

from .helpers import JobEvents

BATCH_TIMEOUT_S = 420  # bounded; generous because the machine is shared (2 cores)
pytestmark = [pytest.mark.e2e, pytest.mark.timeout(BATCH_TIMEOUT_S + 120)]  # the suite's 300 s would cut it first

SMALL_VIDEO = {"num_frames": 9, "width": 320, "height": 256, "num_inference_steps": 2}
POLL_S = 2.0  # GET /batches runs the API function: poll gently


def _line_events(seen: list[dict], batch_id: str) -> dict[str, dict]:
    """The batch's line jobs' terminal events, by job id."""
    return {e["job_id"]: e for e in seen if (e.get("batch") or {}).get("batch_id") == batch_id and "job_id" in e}


def _completed(door: FrontDoorClient, batch_id: str):  # type: ignore[no-untyped-def]
    """GET /batches/{id} until it says completed (bounded by BATCH_TIMEOUT_S)."""
    deadline = time.monotonic() + BATCH_TIMEOUT_S
    while time.monotonic() < deadline:
        reply = door.request("GET", f"/batches/{batch_id}", b"", [])
        if reply.status == 200 and reply.json["status"] == "completed":
            return reply
        time.sleep(POLL_S)
    raise AssertionError(f"batch {batch_id} did not complete within {BATCH_TIMEOUT_S} s")


def test_post_batches_with_characters_outside_sqs_set_completes_every_line(stack: LocalStack) -> None:
    state = stack.state()
    door = developer_door(state)
    jobs = [
        {"prompt": "a paper lantern \ufffe at dusk", "seed": 1, "video": SMALL_VIDEO},
        {"prompt": "a paper lantern \uffff at dawn", "seed": 2, "video": SMALL_VIDEO},
        {"prompt": "a plain paper lantern", "seed": 3, "video": SMALL_VIDEO},
    ]
    body = json.dumps({"jobs": jobs}, ensure_ascii=False).encode("utf-8")  # the characters raw on the wire
    assert "\ufffe".encode() in body and "\uffff".encode() in body

    events = JobEvents(stack)
    try:
        reply = door.request("POST", "/batches", body, [("Content-Type", "application/json")])

        assert reply.status == 202, reply.body
        batch_id = reply.json["batch_id"]
        view = _completed(door, batch_id)
        # Each line's job ends in its one terminal event, its prompt as sent (published JSON-escaped: raw, SNS's
        # SQS subscribers refused the body, and the jobs ended with no event while the batch's counts added up).
        mine = events.until(lambda seen: len(_line_events(seen, batch_id)) >= 3, timeout=120)
    finally:
        events.close()
    assert sorted(e["prompt"] for e in _line_events(mine, batch_id).values()) == sorted(j["prompt"] for j in jobs)
    counts = view.json["counts"]
    assert counts["total"] == 3 and counts["succeeded"] + counts["failed"] + counts["cancelled"] == 3, counts
    # Every line accepted as its job (the escaped lines are the same requests; how the jobs end is the pipeline's).
    assert (counts["accepted"], counts["rejected"]) == (3, 0), view.json
