"""The batch reconciler: a batch never waits for an event that was lost, nor for an intake that stopped.

Run on a schedule (ReconcileBatchesFunction). It reads the batches table's sparse ``open-items`` index (lines not yet
counted terminal, batch records not yet published), oldest first, and repairs what is older than ``grace_s``:

- a line whose job is terminal but was never counted (its terminal event never reached BatchEventsQueue, or was
  dead-lettered there): counted now from the job record, its in-flight slot freed in the same transaction
  (``BatchStore.record_terminal``: conditional on the line not being counted, so a late real event and this repair
  count it exactly once between them), then the batch completes if that was its last line;
- a line whose job was never created (submitted, then every start attempt failed): its job is failed with the
  reason, whose ``job.failed`` counts it as any event does;
- an API batch whose lines were not all queued (POST /batches answered 503 and was not resent): every line not yet
  submitted fails with the reason, and the intake is closed;
- a dropped file's batch whose splitter stopped (its step dead-lettered): ended at its cursor, as for a deleted file
  (``truncated.code = SplitFailed``). Intakes are ended only after 4 x ``grace_s`` without a checkpoint (1 h by
  default), since a live split step may wait behind other batches' chunks;
- a batch whose last line was counted but whose ``batch.completed`` was not published (a claimant that died):
  published.

Every repair is a conditional write that a concurrent normal path would also make once, so at most one of them wins.
The count of repairs is the ``batch_repairs`` metric, alarmed on (template: BatchReconcilerRepairsAlarm): each one is
an event that was lost, which the dead-letter queue alarms and docs/operations.md follow up.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from omnireel.aws.batch_store import BATCH_ITEM, TERMINAL_COUNTERS, Batch, BatchStore
from omnireel.aws.job_store import JobStore
from omnireel.batches.fanout import LineFailure, fail_line_job, reject_line
from omnireel.batches.progress import Progress
from omnireel.jobs.job import iso, now, parse_time
from omnireel.runtime.observability import logger


@dataclass
class Repairs:
    lines_counted: int = 0  # terminal jobs whose event was lost: counted (and their slots freed) here
    slots_freed: int = 0
    jobs_failed: int = 0  # submitted lines whose job never existed
    intakes_ended: int = 0  # batches whose intake stopped: unqueued lines failed, or the split ended at its cursor
    batches_completed: int = 0  # batch.completed published here
    details: list[str] = field(default_factory=list)

    @property
    def total(self) -> int:
        return self.lines_counted + self.jobs_failed + self.intakes_ended + self.batches_completed


@dataclass
class Reconciler:
    store: BatchStore
    jobs: JobStore
    progress: Progress
    failure: LineFailure
    grace_s: int
    per_shard: int = 100
    # An intake is ended only after this much silence: longer than a line's grace, because a healthy split step can
    # wait in a busy batch queue behind other batches' chunks (INTAKE_STALL_FACTOR x the grace: 1 h by default).
    intake_stall_factor: int = 4

    def run(self, moment: datetime | None = None) -> Repairs:
        moment = moment or now()
        cutoff = moment - timedelta(seconds=self.grace_s)
        repairs = Repairs()
        touched: set[str] = set()
        for item in self.store.open_items(iso(cutoff), per_shard=self.per_shard):
            try:
                if item["item"] == BATCH_ITEM:
                    self._batch(item["batch_id"], cutoff, repairs)
                else:
                    if self._line(item, cutoff, repairs):
                        touched.add(item["batch_id"])
            except Exception:  # noqa: BLE001 - one broken item must not stop the others; the next run retries it
                logger.exception("batch reconcile item failed", extra={"batch_id": item.get("batch_id"),
                                                                       "item": item.get("item")})  # fmt: skip
        for batch_id in touched:  # a counted line may have been the batch's last
            if self.progress.complete_if_done(batch_id, redelivery=False) is not None:
                repairs.batches_completed += 1
        return repairs

    # ------------------------------------------------------------ lines
    def _line(self, item: dict, cutoff: datetime, repairs: Repairs) -> bool:
        batch_id, number = item["batch_id"], int(item["line"])
        job = self.jobs.find(item["job_id"])
        if job is None:
            # Submitted (a slot held) but its job was never written: fail it; its job.failed counts the line.
            batch = self.store.find(batch_id)
            if batch is None:
                return False
            fail_line_job(self.failure, batch, number, code="BatchLineFailed",
                          message="its job could not be started (every attempt failed)")  # fmt: skip
            repairs.jobs_failed += 1
            repairs.details.append(f"{batch_id} line {number}: job never created, failed")
            return False
        if job.status.value not in TERMINAL_COUNTERS:
            return False  # still running: its own event (or the job deadline sweep) ends it
        ended = parse_time(job.updated_at)
        if ended and ended > cutoff:
            return False  # terminal only recently: its event is probably on its way
        counted = self.store.record_terminal(
            batch_id,
            number,
            job_id=job.job_id,
            status=job.status.value,
            video=job.artifacts.video,
            error=job.error.message if job.error else None,
            release_slot=item.get("submitted") == "accepted",
        )
        if not counted:
            return False  # the real event counted it meanwhile
        repairs.lines_counted += 1
        if item.get("submitted") == "accepted":
            repairs.slots_freed += 1
        repairs.details.append(f"{batch_id} line {number}: {job.status.value} job counted (its event was lost)")
        logger.warning(
            "batch line counted by the reconciler: its terminal event was lost",
            extra={"batch_id": batch_id, "line": number, "job_id": job.job_id, "status": job.status.value},
        )
        return True

    # ------------------------------------------------------------ batch records
    def _batch(self, batch_id: str, cutoff: datetime, repairs: Repairs) -> None:
        batch = self.store.find(batch_id)
        if batch is None or batch.event_published_at:
            return
        if batch.completed_at is not None:
            claimed = parse_time(batch.completed_at)
            if claimed and claimed < cutoff and self.progress.complete_if_done(batch_id, redelivery=True):
                repairs.batches_completed += 1  # its claimant died before publishing
            return
        if batch.split_done:
            if batch.terminal >= batch.total and self.progress.complete_if_done(batch_id, redelivery=False):
                repairs.batches_completed += 1
            return
        updated = parse_time(batch.updated_at)
        stalled = cutoff - timedelta(seconds=self.grace_s * (self.intake_stall_factor - 1))
        if updated > stalled:
            return  # the intake may still be moving
        if batch.source == "api":
            self._end_api_intake(batch, repairs)
        else:
            self._end_file_intake(batch, repairs)

    def _end_api_intake(self, batch: Batch, repairs: Repairs) -> None:
        reason = "the batch's jobs could not all be queued (POST /batches failed and was not resent)"
        failed = sum(1 for number in range(1, batch.total + 1) if reject_line(self.failure, batch, number, reason))
        if self.store.mark_split_done(batch.batch_id):
            repairs.intakes_ended += 1
            repairs.details.append(f"{batch.batch_id}: API intake ended, {failed} unqueued line(s) failed")
            logger.warning("batch intake ended by the reconciler", extra={"batch_id": batch.batch_id,
                                                                           "failed_lines": failed})  # fmt: skip
        self.progress.complete_if_done(batch.batch_id, redelivery=False)

    def _end_file_intake(self, batch: Batch, repairs: Repairs) -> None:
        message = f"the batch file's splitter stopped at line {batch.split_line + 1} (its work item kept failing)"
        if self.store.truncate_split(
            batch.batch_id, offset=batch.split_offset, line=batch.split_line, message=message, code="SplitFailed"
        ):
            repairs.intakes_ended += 1
            repairs.details.append(f"{batch.batch_id}: file intake ended at line {batch.split_line + 1}")
            logger.warning("batch split ended by the reconciler", extra={"batch_id": batch.batch_id})
        if self.progress.complete_if_done(batch.batch_id, redelivery=False):
            repairs.batches_completed += 1
