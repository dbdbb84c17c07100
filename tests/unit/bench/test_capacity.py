"""The queueing helpers of bench/capacity.py agree with closed forms."""

import math

import pytest

from bench.capacity import (
    erlang_c,
    exponential,
    mmc_mean_wait,
    servers_needed,
    simulate_queue,
    simulate_scale_to_zero,
)


def test_erlang_c_known_values():
    assert erlang_c(1, 0.5) == pytest.approx(0.5)  # M/M/1: P(wait) = rho
    assert erlang_c(2, 1.0) == pytest.approx(1 / 3)
    assert erlang_c(3, 3.0) == 1.0 and erlang_c(3, 0.0) == 0.0


def test_mm1_mean_wait_closed_form():
    rate, service = 0.05, 10.0  # rho 0.5
    assert mmc_mean_wait(rate, service, 1) == pytest.approx(0.5 * service / (1 - 0.5))
    assert math.isinf(mmc_mean_wait(0.2, 10.0, 1))


@pytest.mark.parametrize(("servers", "rho", "seed"), [(1, 0.6, 1), (3, 0.7, 2), (8, 0.75, 3)])
def test_simulation_matches_erlang_c(servers, rho, seed):
    service = 9.4
    rate = rho * servers / service
    sim = simulate_queue(rate, exponential(service), servers, jobs=60_000, seed=seed)
    assert sim.mean_wait == pytest.approx(mmc_mean_wait(rate, service, servers), rel=0.12)
    assert float((sim.waits > 0).mean()) == pytest.approx(erlang_c(servers, rate * service), abs=0.03)
    assert sim.utilization == pytest.approx(rho, abs=0.03)


def test_servers_needed_is_stable_and_minimal():
    rate, service = 1000 / 3600, 9.4
    c = servers_needed(rate, service)
    assert c > rate * service
    assert mmc_mean_wait(rate, service, c) <= 0.5 * service < mmc_mean_wait(rate, service, c - 1)


def test_scale_to_zero_rare_jobs_pay_provisioning_and_idle_tail():
    rate = 1 / 36_000  # one job per 10 h: every job finds zero instances
    res = simulate_scale_to_zero(rate, 9.4, jobs=400, seed=4, provision=500.0, alarm_delay=100.0, idle_timeout=900.0)
    assert res.cold_fraction > 0.9
    assert res.mean_wait == pytest.approx(600.0, rel=0.05)
    assert res.billed_fraction == pytest.approx(rate * (500.0 + 9.4 + 900.0), rel=0.15)


def test_batch_model_defaults_match_the_template():
    import yaml

    from bench.capacity import BATCH_IN_FLIGHT, REPO

    class Loader(yaml.SafeLoader):
        pass

    Loader.add_multi_constructor("!", lambda loader, suffix, node: None)
    template = yaml.load((REPO / "template.yaml").read_text(), Loader=Loader)  # noqa: S506 - SafeLoader subclass
    assert template["Parameters"]["BatchMaxInFlightJobs"]["Default"] == BATCH_IN_FLIGHT


def test_a_batch_through_one_slot_is_sequential():
    from bench.capacity import simulate_batch

    result = simulate_batch(200, 1, 1, 4.0, 1, 9.0, overhead_s=1.0, video_ready_at=[0.0], seed=1, idle_timeout=0)
    assert result.makespan == pytest.approx(200 * 14.0, rel=0.02)
    wide = simulate_batch(200, 50, 1, 4.0, 1, 9.0, overhead_s=1.0, video_ready_at=[0.0], seed=1, idle_timeout=0)
    assert wide.makespan == pytest.approx(200 * 9.0, rel=0.03)  # the video pool is the bottleneck
