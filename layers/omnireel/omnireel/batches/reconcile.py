"""The batch reconciler: a batch never waits for an event that was lost, nor for an intake that stopped.

Run on a schedule (ReconcileBatchesFunction). It reads the batches table's sparse ``open-items`` index (lines not yet
counted terminal, batch records not yet published), oldest first, and repairs what is older than ``grace_s``:

- a line whose job is terminal but was never counted (its terminal event never reached BatchEventsQueue, or was
  dead-lettered there): counted now from the job record, its in-flight slot freed in the same transaction
  (``BatchStore.record_terminal``: conditional on the line not being counted, so a late real event and this repair
  count it exactly once between them), then the batch completes if that was its last line. If the event was never
  sent at all (its sender killed between the job record and the publish), it is sent first: webhooks and subscribers
  need it too;
- a line whose job was never created (submitted, then every start attempt failed): its job is failed with the
  reason, whose ``job.failed`` counts it as any event does;
- a line holding a slot whose job was written but whose execution never started (its submitter killed between the
  job record and StartExecution, and the work item that would have retried it dead-lettered or lost): the job's own
  execution is started (``Workflow.start``: the name stored with the job, so a live submitter's start and this one
  make one execution), and the line is ended by that execution as any other. Without it the job waited for the job
  deadline's ``WorkflowNotStarted`` (omnireel.jobs.deadline: 10 minutes), failing a line that could run;
- an API batch whose lines were not all queued (POST /batches answered 503 and was not resent): every line not yet
  submitted fails with the reason, and the intake is closed;
- a dropped file's batch whose splitter stopped (its step dead-lettered): ended at its cursor, as for a deleted file
  (``truncated.code = SplitFailed``). Intakes are ended only after 4 x ``grace_s`` without a checkpoint (1 h by
  default), since a live split step may wait behind other batches' chunks;
- a batch whose last line was counted but whose ``batch.completed`` was not published (a claimant that died):
  published;
- a work item dead-lettered in BatchDeadLetterQueue (every receive of it failed: the process was killed each time,
  so even the last receive's safety net could not run): its lines that never got a record fail with that reason, a
  split step ends the batch at its cursor; the message is then deleted (nothing is left for a redrive to do). Terminal
  job events dead-lettered there are left alone (their lines are counted from the job records, above);
- a batch whose intake is done but some of whose lines never got a record (their work item was lost, however: a
  dead-letter message deleted or expired, ...), once the batch has been silent for ``lost_line_silence`` (the larger
  of 4 x ``grace_s`` and ``LOST_LINE_MIN_SILENCE_S``, longer than a chunk waits between two backpressure re-queues,
  each of which marks the batch as moving): those lines fail with the reason. Which lines exist is the batch's own
  count for an API batch (1..total) and the dropped file's job lines for a file (read again by version).

Every repair is a conditional write that a concurrent normal path would also make once, so at most one of them wins.
The count of repairs is the ``batch_repairs`` metric, alarmed on (template: BatchReconcilerRepairsAlarm): each one is
an event that was lost, which the dead-letter queue alarms and docs/operations.md follow up.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from omnireel.aws.batch_queue import DeadLetters
from omnireel.aws.batch_store import BATCH_ITEM, BatchStore
from omnireel.aws.inbox_store import InboxStore
from omnireel.aws.job_store import JobStore
from omnireel.aws.workflow import Workflow
from omnireel.batches.batch import MAX_FILE_BYTES, Line, split_lines
from omnireel.batches.fanout import (
    MAX_RETRY_DELAY_S,
    LineFailure,
    fail_line_job,
    reject_line,
    send_missing_event,
    start_never_started,
)
from omnireel.batches.progress import Progress
from omnireel.batches.record import COUNTED_AS, TERMINAL_COUNTERS, Batch
from omnireel.core.clock import iso, now, parse_time
from omnireel.core.errors import PublishFailed
from omnireel.runtime.observability import logger

# A batch with unrecorded lines is taken for lost only after this much silence at least: several backpressure
# re-queue delays (each re-queue marks the batch as moving), whatever the grace.
LOST_LINE_MIN_SILENCE_S = 6 * MAX_RETRY_DELAY_S


@dataclass
class Repairs:
    lines_counted: int = 0  # terminal jobs whose event was lost: counted (and their slots freed) here
    events_sent: int = 0  # terminal line jobs whose event was never sent (its sender killed first): sent here
    slots_freed: int = 0
    jobs_failed: int = 0  # submitted lines whose job never existed
    jobs_started: int = 0  # submitted lines whose job existed but whose execution never started: started here
    intakes_ended: int = 0  # batches whose intake stopped: unqueued lines failed, or the split ended at its cursor
    batches_completed: int = 0  # batch.completed published here
    lines_lost: int = 0  # lines that never got a record (dead-lettered or lost work items): failed with the reason
    dead_letters: int = 0  # dead-lettered work items handled (and deleted from the dead-letter queue)
    details: list[str] = field(default_factory=list)

    def counts(self) -> dict[str, int]:
        """Every count above by name (the run's report: ReconcileBatchesFunction's result)."""
        return {name: value for name, value in vars(self).items() if isinstance(value, int)}

    @property
    def total(self) -> int:
        return (
            self.lines_counted + self.events_sent + self.jobs_failed + self.jobs_started + self.intakes_ended
            + self.batches_completed + self.lines_lost
        )  # fmt: skip


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
    dead_letter_queue: DeadLetters | None = None  # BatchDeadLetterQueue (None: not read)
    inbox: InboxStore | None = None  # to list a dropped file's job lines (None: only API batches' lost lines fail)
    lost_line_min_silence_s: int = LOST_LINE_MIN_SILENCE_S
    workflow: Workflow | None = None  # to start a line's job whose execution never started (None: left to the deadline)

    @property
    def lost_line_silence_s(self) -> int:
        return max(self.grace_s * self.intake_stall_factor, self.lost_line_min_silence_s)

    def run(self, moment: datetime | None = None) -> Repairs:
        moment = moment or now()
        cutoff = moment - timedelta(seconds=self.grace_s)
        repairs = Repairs()
        touched: set[str] = set()
        if self.dead_letter_queue is not None:
            try:
                touched |= self._dead_letters(self.dead_letter_queue, repairs)
            except Exception:  # noqa: BLE001 - the open items below are repaired anyway; the next run retries
                logger.exception("batch dead-letter queue could not be read")
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
        status = COUNTED_AS.get(job.status.value, job.status.value)
        if status not in TERMINAL_COUNTERS:
            self._start_if_never_started(item, job, cutoff, repairs)
            return False  # running: its own event (or the job deadline sweep) ends it
        ended = parse_time(job.updated_at)
        if ended and ended > cutoff:
            return False  # terminal only recently: its event is probably on its way
        extra = {"batch_id": batch_id, "line": number, "job_id": job.job_id, "status": job.status.value}
        try:
            if send_missing_event(self.failure, job):  # never sent (not lost on the way): every consumer needs it
                repairs.events_sent += 1
                repairs.details.append(f"{batch_id} line {number}: {job.status.value} job's event sent (never was)")
                logger.warning("batch line's terminal event was never sent: sent by the reconciler", extra=extra)
        except PublishFailed:
            if ended and (cutoff - ended).total_seconds() + self.grace_s < self.lost_line_silence_s:
                raise  # the next run tries again (the item's failure is logged by run)
            # Failing for longer than a lost line may stay silent: the batch is not held for it any longer.
            logger.exception("batch line counted without its terminal event: it could not be sent", extra=extra)
        counted = self.store.record_terminal(
            batch_id,
            number,
            job_id=job.job_id,
            status=status,
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

    def _start_if_never_started(self, item: dict, job, cutoff: datetime, repairs: Repairs) -> None:
        """An accepted line's job still ``accepted`` since before the grace whose execution does not exist: started."""
        created = parse_time(job.created_at)
        if self.workflow is None or item.get("submitted") != "accepted" or created is None or created > cutoff:
            return  # (within the grace its submitter may be starting it now)
        if not start_never_started(self.workflow, job):
            return  # started (its first step has not run yet), or no longer accepted
        repairs.jobs_started += 1
        repairs.details.append(f"{item['batch_id']} line {item['line']}: accepted job's execution started (never was)")
        logger.warning("batch line's job was never started: started by the reconciler",
                       extra={"batch_id": item["batch_id"], "line": item["line"], "job_id": job.job_id})  # fmt: skip

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
            elif batch.accepted + batch.rejected < batch.total:  # some line was never submitted (nor rejected)
                silent_since = cutoff - timedelta(seconds=self.lost_line_silence_s - self.grace_s)
                if parse_time(batch.updated_at) <= silent_since:
                    self._fail_unrecorded_lines(batch, repairs)
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

    def _end_file_intake(self, batch: Batch, repairs: Repairs, message: str = "") -> None:
        message = (
            message or f"the batch file's splitter stopped at line {batch.split_line + 1} (its work item kept failing)"
        )
        if self.store.truncate_split(
            batch.batch_id, offset=batch.split_offset, line=batch.split_line, message=message, code="SplitFailed"
        ):
            repairs.intakes_ended += 1
            repairs.details.append(f"{batch.batch_id}: file intake ended at line {batch.split_line + 1}")
            logger.warning("batch split ended by the reconciler", extra={"batch_id": batch.batch_id})
        if self.progress.complete_if_done(batch.batch_id, redelivery=False):
            repairs.batches_completed += 1

    # ------------------------------------------------------------ lost work items
    def _dead_letters(self, queue: DeadLetters, repairs: Repairs) -> set[str]:
        touched: set[str] = set()
        left: list[str] = []
        try:
            for receipt, body in queue.receive():
                if (body or {}).get("kind") not in ("lines", "split"):
                    left.append(receipt)  # a job event (counted from its job record) or unknown: the operator's
                    continue
                assert body is not None
                touched |= self._dead_letter(queue, receipt, body, repairs)
        finally:
            for receipt in left:  # visible again at once: the queue's depth alarm keeps showing them
                queue.release(receipt)
        return touched

    def _dead_letter(self, queue: DeadLetters, receipt: str, body: dict, repairs: Repairs) -> set[str]:
        """One dead-lettered work item: its unrecorded lines fail, or a split step still at the cursor ends the batch
        there; then the message is deleted (a redrive would find nothing left to do)."""
        touched: set[str] = set()
        batch = self.store.find(str(body.get("batch_id")))
        if batch is not None and body.get("kind") == "lines":
            reason = "its work item failed on every receive and was dead-lettered (see the batch_submit log)"
            numbers = [Line.from_message(item).number for item in body.get("lines") or []]
            failed = sum(1 for n in numbers if reject_line(self.failure, batch, n, reason, code="BatchLineLost"))
            repairs.lines_lost += failed
            if failed:
                repairs.details.append(f"{batch.batch_id}: dead-lettered chunk, {failed} line(s) failed")
                logger.warning("batch lines failed: their work item was dead-lettered",
                               extra={"batch_id": batch.batch_id, "failed_lines": failed})  # fmt: skip
            touched.add(batch.batch_id)
        elif batch is not None and not batch.split_done and batch.split_offset == int(body.get("offset", -1)):
            message = (f"the batch file's splitter stopped at line {batch.split_line + 1} (its work item failed "
                       "on every receive and was dead-lettered)")  # fmt: skip
            self._end_file_intake(batch, repairs, message)
        repairs.dead_letters += 1
        queue.delete(receipt)
        return touched

    def _fail_unrecorded_lines(self, batch: Batch, repairs: Repairs) -> None:
        """Fail every line of a silent batch that was never submitted: its work item is gone."""
        expected = self._line_numbers(batch)
        if expected is None:
            return
        recorded = {int(item["item"].split("#", 1)[1]) for item in self.store.lines(batch.batch_id)}
        reason = (f"it was never submitted, and the batch had not moved for {self.lost_line_silence_s} s: its work "
                  "item was lost (dead-lettered or expired)")  # fmt: skip
        failed = sum(
            1
            for n in expected
            if n not in recorded and reject_line(self.failure, batch, n, reason, code="BatchLineLost")
        )
        if failed:
            repairs.lines_lost += failed
            repairs.details.append(f"{batch.batch_id}: {failed} line(s) never submitted, failed")
            logger.warning("batch lines failed: never submitted", extra={"batch_id": batch.batch_id,
                                                                         "failed_lines": failed})  # fmt: skip
        if self.progress.complete_if_done(batch.batch_id, redelivery=False):
            repairs.batches_completed += 1

    def _line_numbers(self, batch: Batch) -> list[int] | None:
        """The batch's job line numbers: 1..total for an API batch; a dropped file's non-blank lines (before a
        truncation), read again by version. None when they cannot be known now (logged; the next run tries again)."""
        if batch.source == "api":
            return list(range(1, batch.total + 1))
        if self.inbox is None or batch.source_version is None:
            logger.warning("batch lost lines not failed: the file's lines cannot be read here",
                           extra={"batch_id": batch.batch_id})  # fmt: skip
            return None
        bucket, key = batch.source.removeprefix("s3://").split("/", 1)
        try:
            data = self.inbox.read(bucket, key, MAX_FILE_BYTES, batch.source_version)
        except Exception:  # noqa: BLE001 - a file gone since: its lines cannot be named; the run goes on
            extra = {"batch_id": batch.batch_id}
            logger.exception("batch lost lines not failed: the file could not be read", extra=extra)
            return None
        end = batch.truncated.truncated_at_line if batch.truncated else None
        return [line.number for line in split_lines(data, 0, final=True)[0] if end is None or line.number < end]
