"""Issue 34 item 7: `omnireel submit --wait` / `status` show a waiting job's place in the queue."""

from __future__ import annotations

import io
from types import SimpleNamespace

from omnireel_cli.progress import JobDisplay, job_line
from omnireel_client.models import JobState

QUEUE = {"kind": "image", "position": 2, "callers": 3, "enqueued_at": "2026-12-04T12:00:01.000Z"}


def test_the_progress_line_shows_the_jobs_place_among_its_callers_jobs():
    line = job_line("1a2b3c4d-0000", "queued", {"accepted": "2026-12-04T12:00:00Z"}, 4.0, QUEUE)
    assert "queued for a GPU (2 of your jobs ahead, 3 callers waiting) 4.0s..." in line
    assert "ahead" not in job_line("1a2b3c4d-0000", "generating_image", {}, 1.0)


def test_plain_output_names_the_place_and_the_client_keeps_the_queue():
    state = JobState(job_id="1a2b3c4d-0000", status="accepted")
    state._update({"status": "queued", "stage_times": {}, "queue": QUEUE})
    assert state.queue == QUEUE
    stream = io.StringIO()
    display = JobDisplay(state.job_id, stream=stream)
    display.update(SimpleNamespace(status=state.status, stage_times={}, queue=state.queue))
    assert "job 1a2b3c4d: queued for a GPU (2 of your jobs ahead, 3 callers waiting)" in stream.getvalue()
    state._update({"status": "expired", "stage_times": {}, "queue": None})
    assert state.queue is None and state.done  # expired is terminal: --wait ends
