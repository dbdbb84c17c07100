"""The fault suite's hostile consumers (issue 25; bench/hostile_consumers.py), on a stack of their own: slow,
trickling, hanging, failing and unresolvable receivers, and callers aiming at each other's receivers. No job is lost,
every batch finishes, no receiver accepts another caller's delivery. (The job phases: test_faults.py.)"""

from __future__ import annotations

import pytest

from bench.fault_suite import RunResult
from bench.hostile_consumers import HostileResult

from .parts import assert_no_violation, run_part

pytestmark = [pytest.mark.e2e, pytest.mark.reliability, pytest.mark.timeout(1200)]  # a hang only: see test_faults


@pytest.fixture(scope="module")
def result() -> RunResult:
    return run_part(only={"hostile_consumers"}, batch_faults=False)


def test_the_run_has_no_violation(result: RunResult) -> None:
    assert result.hostile is not None and not result.jobs  # this file's part only
    assert_no_violation(result)


def _hostile(result: RunResult) -> HostileResult:
    assert result.hostile is not None, "the hostile consumers phase did not run"
    return result.hostile


def test_hostile_consumers_lose_no_job_and_leave_no_batch_unfinished(result: RunResult) -> None:
    hostile = _hostile(result)
    assert not hostile.lost_jobs, hostile.lost_jobs
    # One terminal event of each batch never reached the batch tracker; the reconciler counted it.
    assert hostile.dropped_batch_events >= len(hostile.batches)
    assert not hostile.unfinished_batches, [(b.name, b.status, b.counts) for b in hostile.batches]
    for batch in hostile.batches:
        assert hostile.batch_events.get(batch.batch_id) == batch.total, (batch.name, hostile.batch_events)
        assert hostile.batch_completed_deliveries[batch.batch_id] == 1, hostile.batch_completed_deliveries
    assert not hostile.batch_jobs_with_two_events


def test_no_receiver_accepts_a_delivery_of_another_callers_job(result: RunResult) -> None:
    hostile = _hostile(result)
    assert hostile.secrets_distinct
    assert hostile.forged_refused  # A's own secret cannot sign for B's receiver
    # A's jobs named B's receiver: B's receiver saw them (so the path was exercised) and refused every one.
    seen_by_b = hostile.receivers["B/polite"].snapshot()
    assert seen_by_b and all(not d.verified for d in seen_by_b)
    assert hostile.not_owner_accepted == []


def test_slow_trickling_hanging_failing_and_unresolvable_receivers_get_every_event_once_recovered(
    result: RunResult,
) -> None:
    hostile = _hostile(result)
    assert not any(hostile.undelivered.values()), hostile.undelivered
    # The hanging receiver's first attempts were cut at the deadline and retried.
    hung = sum(1 for r in hostile.jobs.values() if r == "A/hang")
    assert hostile.hang_attempts >= 3 * hung
    # Duplicates only where the receiver answered after the sender's deadline, never from another record's failure.
    assert not hostile.duplicates.get("other"), "\n".join(hostile.duplicate_details)
    assert hostile.ok
