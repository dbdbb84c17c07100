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
