"""The pending counters' healing path, run by the deadline schedule (FailOverdueJobs, every 5 minutes).

The +1 and -1 are written in the job's own transactions, so the counters cannot drift through a crash or a duplicate
event. What could still move one: a job record removed by hand or by TTL while open, an item edited by an operator, a
restore. For each caller with a counter, the heal recounts the caller's open jobs from the jobs table's sparse
``caller-open-jobs`` index and writes the recount if the two differ, conditionally: only if no job of that caller was
counted or ended since the counter was read, and only once the counter has been quiet for ``QUIET_S`` (the index is
eventually consistent; a job written a moment ago may not be in it yet). A counter that stays busy is healed on a
later, quieter run.
"""

from __future__ import annotations

from datetime import timedelta

from omnireel.aws.job_store import JobStore
from omnireel.aws.usage_store import UsageStore
from omnireel.core.clock import iso, now
from omnireel.runtime.observability import logger

QUIET_S = 60
MAX_CALLERS_PER_RUN = 1000


def heal_pending_counters(*, jobs: JobStore, usage: UsageStore) -> dict[str, int]:
    """Recount and fix every drifted counter; returns {caller: new count} for those fixed now."""
    healed: dict[str, int] = {}
    quiet_before = iso(now() - timedelta(seconds=QUIET_S))
    for caller in usage.counters(MAX_CALLERS_PER_RUN):
        counter = usage.counter(caller)
        if counter is None or str(counter.get("changed_at", "")) >= quiet_before:
            continue
        actual = jobs.count_open(caller)
        counted = int(counter.get("pending", 0))
        if actual == counted:
            continue
        if usage.set_pending(caller, actual, seen_changes=int(counter.get("changes", 0)), quiet_before=quiet_before):
            logger.warning("pending counter healed", extra={"caller": caller, "was": counted, "now": actual})
            healed[caller] = actual
    return healed
