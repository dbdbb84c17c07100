"""The fault suite's three parts (bench/fault_suite.py ``run``), each on an isolated stack of its own so that the scale
lane's workers run them side by side: the job phases (test_faults.py), the hostile consumers
(test_hostile_consumers.py) and the batch faults (test_batch_faults.py). Same seed and bounds for each."""

from __future__ import annotations

from typing import Any

from bench.fault_suite import RunResult, run

SEED = 3
JOBS_PER_PHASE = 3


def run_part(**options: Any) -> RunResult:
    """``run`` with the suite's seed, phase size and bounds; ``options`` choose the part (``only``, and which of the
    hostile consumers and batch faults run)."""
    return run(JOBS_PER_PHASE, SEED, phase_timeout_s=45, settle_s=3, log=lambda _: None, **options)


def assert_no_violation(result: RunResult) -> None:
    """Every job of the run has its one terminal event by its deadline, matching its record."""
    assert not result.unfinished, (
        f"jobs without a terminal event by the phase deadline: {result.unfinished}\n"
        + "\n".join(
            f"{job_id}: record {result.records.get(job_id)}\n" + "\n".join(result.trails.get(job_id, []))
            for job_id in result.unfinished
        )
    )
    violations = result.violations
    assert not violations, "\n".join(f"{v['phase']} {v['job_id']}: {v['kind']}: {v['detail']}" for v in violations)
