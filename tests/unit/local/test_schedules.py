"""The local stack's EventBridge schedule rules (omnireel_local/schedules.py)."""

from __future__ import annotations

import json
import threading

import pytest

from omnireel_local import schedules


@pytest.mark.parametrize(
    ("expression", "minutes"),
    [("rate(1 minute)", 1), ("rate(5 minutes)", 5), ("rate(2 hours)", 120), ("rate(1 day)", 1440)],
)
def test_rate_expressions_run_on_the_compressed_local_clock(expression: str, minutes: int) -> None:
    assert schedules.local_period_s(expression) == minutes * schedules.LOCAL_SECONDS_PER_MINUTE


@pytest.mark.parametrize("expression", ["cron(0 12 * * ? *)", "rate(5 seconds)", "rate(minutes)", "every 5 minutes"])
def test_other_expressions_are_not_run_locally(expression: str) -> None:
    assert schedules.local_period_s(expression) is None


def test_each_period_sends_the_scheduled_event_to_every_target_until_shutdown(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(schedules, "LOCAL_SECONDS_PER_MINUTE", 0.01)
    calls: list[tuple[str, dict]] = []
    two_runs = threading.Event()

    def invoke(arn: str, payload: str) -> None:
        calls.append((arn, json.loads(payload)))
        if len(calls) >= 4:
            two_runs.set()

    rule = "arn:aws:events:us-east-1:123456789012:rule/sweep"
    scheduler = schedules.Scheduler(
        [
            {"rule_arn": rule, "expression": "rate(1 minute)", "targets": ["arn:fn:a", "arn:fn:b"]},
            {"rule_arn": "cron-rule", "expression": "cron(0 12 * * ? *)", "targets": ["arn:fn:c"]},
        ],
        invoke,
        "123456789012",
        "us-east-1",
    )
    scheduler.start()
    try:
        assert two_runs.wait(timeout=10), calls
    finally:
        scheduler.shutdown()
    settled = len(calls)
    assert {arn for arn, _ in calls} == {"arn:fn:a", "arn:fn:b"}  # the cron rule never runs locally
    event = calls[0][1]
    assert event["detail-type"] == "Scheduled Event" and event["source"] == "aws.events"
    assert event["resources"] == [rule] and event["detail"] == {}
    assert not any(t.is_alive() for t in scheduler._threads)  # stopped: nothing fires after shutdown
    assert len(calls) == settled


def test_a_tick_is_skipped_while_the_targets_previous_run_has_not_ended(monkeypatch: pytest.MonkeyPatch) -> None:
    """A local minute is 10 ms here: a run that lasts many of them is not overlapped by new runs (on AWS the next one
    comes a real minute later); once it ends, the next tick runs again."""
    from concurrent.futures import Future

    monkeypatch.setattr(schedules, "LOCAL_SECONDS_PER_MINUTE", 0.01)
    started: list[Future[None]] = []
    second = threading.Event()

    def invoke(arn: str, payload: str) -> Future[None]:
        started.append(Future())
        if len(started) == 2:
            second.set()
        return started[-1]

    scheduler = schedules.Scheduler(
        [{"rule_arn": "rule", "expression": "rate(1 minute)", "targets": ["arn:fn:slow"]}],
        invoke, "123456789012", "us-east-1",
    )  # fmt: skip
    scheduler.start()
    try:
        assert not second.wait(timeout=0.3)  # ~30 ticks while the first run has not ended: none started another
        assert len(started) == 1
        started[0].set_result(None)  # the first run ends
        assert second.wait(timeout=10)
    finally:
        scheduler.shutdown()
