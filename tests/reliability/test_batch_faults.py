"""The fault suite's batch faults (issue 33; bench/batch_faults.py), on a stack of their own: slow DNS for webhook
hosts, BatchSubmit crashes and timeouts. Every accepted batch completes with its counts adding up, each line's job
with one terminal event. (The job phases: test_faults.py.)"""

from __future__ import annotations

import pytest

from bench.fault_suite import RunResult

from .parts import assert_no_violation, run_part

# A hang only: the phase bounds itself. It took ~100 s alone and 285 s at load 19 on 2 cores (2026-12-04).
pytestmark = [pytest.mark.e2e, pytest.mark.reliability, pytest.mark.timeout(1200)]


@pytest.fixture(scope="module")
def result() -> RunResult:
    return run_part(only={"batch_faults"}, hostile_batches=None)


def test_the_run_has_no_violation(result: RunResult) -> None:
    assert result.batch_faults is not None and not result.jobs  # this file's part only
    assert_no_violation(result)


def test_every_accepted_batch_completes_under_slow_dns_and_batch_submit_crashes(result: RunResult) -> None:
    faults = result.batch_faults
    assert faults is not None, "the batch faults phase did not run"
    assert not faults.unfinished, [(b.name, b.status, b.counts) for b in faults.batches]
    assert not faults.bad_counts, faults.bad_counts
    for batch in faults.batches:  # one terminal event per line's job, none missing
        assert faults.events_per_batch.get(batch.batch_id) == batch.total, (batch.name, faults.events_per_batch)
    # Slow lines fail with the bounded lookup's reason; BatchSubmit answered before its (lowered) Timeout every time.
    assert not faults.bad_reasons, faults.bad_reasons
    assert faults.timeouts == 0
    # The faults really happened: invocations killed, and a chunk that was lost had its lines failed with the reason.
    assert faults.crashes >= 2
    assert faults.dead_lettered_lines >= 1
