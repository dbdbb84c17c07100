"""bench/orchestration_overhead.py: each job's model time is its own requests' service time, told apart by digest."""

from bench.orchestration_overhead import attribute_model_times

SAMPLE = {"images": "s-img", "videos": "s-vid"}


def entry(kind: str, started: float, seconds: float, digest: str, status: int = 200) -> list:
    return [f"/v1/{kind}", status, started, started + seconds, digest]


def test_each_variant_gets_its_own_service_time_not_the_pairs_mean():
    """Ours reached the video emulator 0.06 s later and ended later: under the pair mean both got 9.03 s, so 0.03 s
    moved from the sample's overhead into ours. Told apart, each job keeps its own time."""
    served = {
        "images": [entry("images", 10.00, 4.80, "o-img"), entry("images", 10.01, 4.78, "s-img")],
        "videos": [entry("videos", 15.10, 9.00, "s-vid"), entry("videos", 15.16, 9.06, "o-vid")],
    }
    own, pair_mean = attribute_model_times([(9.9, 30.0)], served, {0: SAMPLE})
    assert round(own[("sample", 0)][0], 6) == 4.78 and round(own[("sample", 0)][1], 6) == 9.00
    assert round(own[("ours", 0)][0], 6) == 4.80 and round(own[("ours", 0)][1], 6) == 9.06
    assert [round(v, 6) for v in pair_mean[0]] == [4.79, 9.03]


def test_only_requests_that_started_inside_the_pairs_window_and_succeeded_count():
    served = {
        "images": [
            entry("images", 1.0, 4.7, "warm-up"),  # before the window
            entry("images", 10.0, 4.7, "o-img"),
            entry("images", 10.0, 0.1, "s-img", status=500),  # a failed attempt, retried
            entry("images", 10.2, 4.7, "s-img"),
        ],
        "videos": [
            entry("videos", 15.0, 8.9, "s-vid"),
            entry("videos", 15.0, 8.95, "o-vid"),
            entry("videos", 40.0, 9, "next pair"),
        ],
    }
    own, pair_mean = attribute_model_times([(9.0, 30.0)], served, {0: SAMPLE})
    assert set(own) == {("sample", 0), ("ours", 0)} and set(pair_mean) == {0}
    assert round(own[("ours", 0)][1], 6) == 8.95


def test_pairs_not_told_apart_fall_back_to_the_mean_or_to_nothing():
    same_bodies = {
        "images": [entry("images", 10.0, 4.7, "s-img"), entry("images", 10.0, 4.8, "s-img")],
        "videos": [entry("videos", 15.0, 8.9, "s-vid"), entry("videos", 15.0, 9.0, "o-vid")],
    }
    own, pair_mean = attribute_model_times([(9.0, 30.0)], same_bodies, {0: SAMPLE})
    assert own == {} and [round(v, 6) for v in pair_mean[0]] == [4.75, 8.95]
    # The sample's job failed (no digests on record): its pair cannot be split.
    own, pair_mean = attribute_model_times([(9.0, 30.0)], same_bodies, {})
    assert own == {} and 0 in pair_mean
    # Three video requests in the window (a retry that succeeded twice, or another pair overlapping): nothing.
    three = {**same_bodies, "videos": same_bodies["videos"] + [entry("videos", 16.0, 9.0, "o-vid")]}
    assert attribute_model_times([(9.0, 30.0)], three, {0: SAMPLE}) == ({}, {})
