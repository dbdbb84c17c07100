"""bench/fairness.py's arithmetic: the FCFS replay of a run, the hand-over, and utilisation from pool samples."""

from __future__ import annotations

import pytest

from bench.capacity import VIDEO_MODEL_S
from bench.fairness import (
    JobTimes,
    Sample,
    container_busy,
    default_b_every,
    handover,
    job_times,
    simulate_fcfs,
    utilisation,
)


def _job(job_id: str, caller: str, accepted: float, image: tuple[float, float], video: tuple[float, float]) -> JobTimes:
    """Ready for its video slot as its image ended (no staging time)."""
    return JobTimes(job_id, caller, accepted, image[0], image[1], image[1], video[0], video[1], "succeeded")


def test_fcfs_replays_the_same_occupancy_in_arrival_order() -> None:
    """One image slot, one video slot, no hand-over (each job starts as the previous ends): A1 and A2 arrive at 0,
    B at 1. Served round-robin, B went second; first come, first served it waits for both A jobs."""
    jobs = [
        _job("a1", "A", 0.0, (0.0, 4.0), (4.0, 12.0)),
        _job("b1", "B", 1.0, (4.0, 8.0), (12.0, 20.0)),
        _job("a2", "A", 0.0, (8.0, 12.0), (20.0, 28.0)),
    ]
    fcfs = simulate_fcfs(jobs, image_slots=1, video_slots=1)
    assert fcfs["a1"] == (0.0, 12.0)
    assert fcfs["a2"] == (4.0, 20.0)  # second in arrival order (ties by id)
    assert fcfs["b1"] == (7.0, 27.0)  # starts at 8, video 20 -> 28, arrived at 1


def test_handover_is_the_gap_between_a_freed_slot_and_the_next_waiting_job() -> None:
    # the second job waited (arrived at 0) and started 0.5 s after the first ended; the third did not wait
    assert handover([(0.0, 0.0, 4.0), (0.0, 4.5, 9.0), (20.0, 20.0, 24.0)]) == pytest.approx(0.5)


def test_utilisation_counts_only_samples_with_a_queue() -> None:
    samples = [
        Sample(0.0, {"image": (1, 1, 3)}),
        Sample(1.0, {"image": (0, 1, 2)}),  # a slot idle while work waits
        Sample(2.0, {"image": (0, 1, 0)}),  # no queue: not counted
    ]
    assert utilisation(samples, "image") == (0.5, 2)
    assert utilisation(samples, "video") == (None, 0)
    assert container_busy(samples, "image", [(0.0, 0.5)]) == 0.5


def test_job_times_reads_a_record() -> None:
    record = {
        "status": "succeeded",
        "queued_video_at": "2026-12-04T10:00:08.000Z",
        "stage_times": {
            "accepted": "2026-12-04T10:00:00.000Z",
            "queued": "2026-12-04T10:00:00.100Z",
            "generating_image": "2026-12-04T10:00:03.000Z",
            "staging_video": "2026-12-04T10:00:07.000Z",
            "rendering_video": "2026-12-04T10:00:10.000Z",
            "succeeded": "2026-12-04T10:00:19.000Z",
        },
    }
    times = job_times("j", "A", record)
    assert times is not None
    assert (times.start_wait, times.end_to_end) == (3.0, 19.0)
    assert times.video_queued - times.image_end == 1.0
    assert job_times("j", "A", {"status": "failed", "stage_times": {"accepted": "2026-12-04T10:00:00Z"}}) is None


@pytest.mark.parametrize("scale", [0.05, 0.1, 0.5, 1.0, 2.0])
def test_b_alone_stays_below_its_fair_share_of_the_video_slot(scale: float) -> None:
    """B's default arrival interval leaves room for the hand-over (up to 1 s a render here): B's renders take at most
    its fair share with two callers (every other slot), so each B job meets no backlog of B's own. The former default
    (12 s) gave B 0.74 of the slot at real model times: its waits grew job by job."""
    render = VIDEO_MODEL_S * scale + 1.0
    assert render / default_b_every(scale) <= 0.5
    assert VIDEO_MODEL_S / 12.0 > 0.5  # the interval this replaces: over B's share at scale 1
