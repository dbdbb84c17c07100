"""The fan-out's two work items, as the BatchSubmit function runs them from the batch queue.

``split``: read the next ``SPLIT_STEP_BYTES`` of the dropped file version, queue its lines as chunks, checkpoint the
cursor on the batch record (conditionally: only the holder of the current cursor moves it) and queue the next step.
No step runs long (a 10 MB file is at most ten steps), a step that dies is re-run from its checkpoint, and a re-run
step only re-queues chunks (harmless: every line's job is idempotent).

``lines``: each line goes through the single-job path (``parse_job_request_json`` + ``submit_job``); a bad line
becomes one failed job (``reject_submission`` + ``finish_job``: a ``job.failed`` event) whose reason starts with
``line N:``. Backpressure: an accepted line takes an in-flight slot (``BatchStore.submit_line``) before its job
starts and gives it back when the job is terminal (``batch_progress``); with no slot free, the rest of the chunk is
queued again with a delay that grows with each attempt, so at most ``max_in_flight`` jobs of one batch run at once (a
per-batch cap since issue 34: every job then waits for its GPU slot in admission's fair queue, omnireel.admission). The
wait is bounded: a line still without a slot ``max_deferral_s`` after it was first queued fails with that reason.

A work item on its last receive (the queue's ``maxReceiveCount``) does not go to the dead-letter queue silently: a
split step that still fails ends the batch at its cursor (as a deleted file does: ``truncated``), and a line that
still fails becomes a failed job naming the error, so the batch completes either way.

Time (issue 33 item 2): a line's webhook host is looked up once, bounded (``omnireel.webhooks.submit_check``: a host
that does not answer within ``resolve_timeout_s`` fails the line with that reason; the lines of a chunk that share a
host wait for it once), and only while the line has no record (a line already submitted is never looked up again).
Each line's work is budgeted against the invocation's ``deadline``: a line starts only if a lookup and its writes fit
before it (the invocation's first line always starts), and the lines that do not fit are queued again as a new work
item (``continued``; no receive is spent), so BatchSubmit returns before its Timeout, and a slow chunk never takes the
other record of its invocation down with it. A split step that no longer fits is queued again the same way.
"""

from __future__ import annotations

import json
import random
import time
from dataclasses import dataclass
from urllib.parse import urlsplit

from omnireel.aws.artifact_store import ArtifactStore
from omnireel.aws.batch_queue import BatchQueue
from omnireel.aws.batch_store import BatchStore
from omnireel.aws.event_publisher import EventPublisher
from omnireel.aws.inbox_store import InboxStore
from omnireel.aws.job_store import JobStore
from omnireel.aws.workflow import Workflow
from omnireel.batches.batch import MAX_FILE_BYTES, SPLIT_STEP_BYTES, Line, line_natural_key, split_lines
from omnireel.batches.progress import Progress
from omnireel.batches.record import Batch
from omnireel.core.bounded import bounded
from omnireel.core.errors import InvalidRequest, SourceVersionGone, TooManyPendingJobs
from omnireel.core.ids import job_id_for
from omnireel.jobs.job import BatchRef, Job, JobError, JobStatus
from omnireel.jobs.outcome import finish_job
from omnireel.jobs.request import parse_job_request_json
from omnireel.jobs.submission import reject_submission, submit_job
from omnireel.runtime.observability import logger
from omnireel.usage.limits import counted_as
from omnireel.webhooks.submit_check import SUBMIT_RESOLVE_TIMEOUT_S, Lookups, check_webhook_target
from omnireel.webhooks.target import Resolver, system_resolver

MAX_RETRY_DELAY_S = 60
# What one line's writes may take besides its lookup (DynamoDB transaction, job record, StartExecution or a failed
# job's record and event, with the SDK's retries): a line starts only with this much time left (plus its lookup's).
LINE_WORK_S = 4.0
# A split step (a 1 MiB ranged read, up to ~40 chunk messages, the checkpoint) starts only with this much time left.
SPLIT_WORK_S = 10.0


@dataclass
class Fanout:
    store: BatchStore
    queue: BatchQueue
    inbox: InboxStore
    jobs: JobStore
    workflow: Workflow
    artifacts: ArtifactStore
    publisher: EventPublisher
    presign_seconds: int
    default_video_steps: int
    max_in_flight: int
    retry_base_s: int = 2
    allow_loopback_http: bool = False  # WEBHOOK_ALLOW_LOOPBACK_HTTP, as for single jobs
    max_deferral_s: int = 604800  # BATCH_MAX_DEFERRAL_SECONDS (template: BatchMaxDeferralSeconds)
    resolve: Resolver = system_resolver  # the webhook host lookup (bounded per line: resolve_timeout_s)
    resolve_timeout_s: float = SUBMIT_RESOLVE_TIMEOUT_S

    # ------------------------------------------------------------ split
    def split_step(
        self,
        batch_id: str,
        offset: int,
        line: int,
        *,
        redelivered: bool,
        final: bool = False,
        deadline: float | None = None,
        first: bool = True,
    ) -> str:
        """One split step. ``deadline`` (``time.monotonic()``): the invocation's usable end; a step that would not fit
        before it (and is not the invocation's ``first`` work) is queued again as it is, to run in a fresh one."""
        if deadline is not None and not first and deadline - time.monotonic() < SPLIT_WORK_S:
            self.queue.send_split(batch_id, offset, line)
            return "continued"
        batch = self._batch(batch_id)
        if batch.split_done or batch.split_offset != offset:
            # Someone holding this cursor already moved it. A redelivery of a step whose run died after its
            # checkpoint but before queueing the next step re-queues that step (a duplicate is refused above).
            if redelivered and not batch.split_done and batch.split_offset > offset:
                self.queue.send_split(batch_id, batch.split_offset, batch.split_line)
            if redelivered and batch.split_done and batch.truncated:  # died after truncating, before completing
                self._progress().complete_if_done(batch_id, redelivery=True)
            return "stale"
        try:
            return self._split(batch, offset, line)
        except SourceVersionGone as exc:
            # The file version was deleted (or overwritten, unversioned bucket) mid-split: no later step can read
            # it either, so the batch is the lines read so far, with the reason; it completes once they are terminal.
            return self.end_split(batch_id, offset, line, f"the batch file stopped being readable at line {line + 1}: "
                                  f"{exc.message}")  # fmt: skip
        except Exception as exc:
            if not final:
                raise
            # The last receive: the next failure would dead-letter the step and leave the batch running forever.
            logger.exception("batch split step failed on its last attempt", extra={"batch_id": batch_id})
            reason = f"the batch file could not be split past line {line}: {type(exc).__name__} on every attempt"
            return self.end_split(batch_id, offset, line, reason, code="SplitFailed")

    def end_split(self, batch_id: str, offset: int, line: int, reason: str, *, code: str = "SourceVersionGone") -> str:
        """End the batch at the cursor ``offset`` (file line ``line`` + 1 not read), once, with ``reason``."""
        if not self.store.truncate_split(batch_id, offset=offset, line=line, message=bounded(reason), code=code):
            return "stale"
        logger.warning("batch split truncated", extra={"batch_id": batch_id, "line": line + 1, "reason": reason})
        # Every line read may be terminal already (or none was read): no job event would complete the batch.
        self._progress().complete_if_done(batch_id, redelivery=False)
        return "truncated"

    def _split(self, batch: Batch, offset: int, line: int) -> str:
        batch_id = batch.batch_id
        bucket, key = batch.source.removeprefix("s3://").split("/", 1)  # the key as S3 named it (no unquoting)
        assert batch.source_version is not None and batch.size is not None
        window = self.inbox.read(bucket, key, SPLIT_STEP_BYTES - 1, batch.source_version, offset=offset)
        final = offset + len(window) >= batch.size
        lines, consumed, numbered = split_lines(window, line, final=final)
        if consumed == 0 and not final:
            # One line longer than a whole step (so longer than any valid line): read on to its end.
            while b"\n" not in window and offset + len(window) < batch.size and len(window) <= MAX_FILE_BYTES:
                window += self.inbox.read(
                    bucket, key, SPLIT_STEP_BYTES - 1, batch.source_version, offset=offset + len(window)
                )
            end = window.find(b"\n")
            lines, consumed, numbered = split_lines(window[: end + 1] if end >= 0 else window, line, final=True)
        if lines:
            self.queue.send_lines(batch_id, lines, queued_at=int(time.time()))
        to_offset, to_line = offset + consumed, line + numbered
        done = to_offset >= batch.size
        if self.store.advance_split(
            batch_id, offset=offset, to_offset=to_offset, to_line=to_line, done=done, emitted=len(lines)
        ):
            if not done:
                self.queue.send_split(batch_id, to_offset, to_line)
            logger.info("batch split step", extra={"batch_id": batch_id, "lines": len(lines), "offset": to_offset})
            return "done" if done else "continued"
        return "stale"

    # ------------------------------------------------------------ lines
    def submit_lines(
        self,
        batch_id: str,
        lines: list[Line],
        attempt: int,
        *,
        queued_at: int | None = None,
        final: bool = False,
        deadline: float | None = None,
        first: bool = True,
    ) -> dict[str, int]:
        """One chunk of lines. ``queued_at``: when they were first queued (None for work items queued before it was
        carried: counted from now). ``final``: the message's last receive, so a line that still fails is failed
        with the error rather than dead-lettered with its chunk. ``deadline`` (``time.monotonic()``): the
        invocation's usable end; the lines that do not fit before it are queued again (``continued``). ``first``:
        this is the invocation's first work item, whose first line always starts (so every invocation moves on)."""
        queued_at = int(time.time()) if queued_at is None else queued_at
        outcome = {"accepted": 0, "rejected": 0, "already": 0, "deferred": 0, "dropped": 0, "expired": 0, "failed": 0}
        lookups = Lookups(self.resolve)  # one lookup per host for the whole chunk
        batch: Batch | None = None
        slowest = 0.0  # the longest a line of this chunk took (writes included): a loaded stack's lines take longer
        for index, line in enumerate(lines):
            timeout_s = self.resolve_timeout_s
            started, waited = time.monotonic(), lookups.waited_s
            if deadline is not None:
                left = deadline - started
                host = webhook_host(line)
                work = max(LINE_WORK_S, 1.5 * slowest)
                need = work + (self.resolve_timeout_s if host and host not in lookups.answers else 0)
                if (index > 0 or not first) and left < need:
                    rest = lines[index:]
                    self.queue.send_lines(batch_id, rest, attempt=attempt, queued_at=queued_at)
                    outcome["continued"] = len(rest)
                    extra = {"batch_id": batch_id, "continued": len(rest), "left_s": round(left, 1)}
                    logger.info(
                        "batch lines continued in a new work item: no time left in this invocation", extra=extra
                    )
                    break
                timeout_s = max(0.5, min(self.resolve_timeout_s, left - work))
            batch = batch or self._batch(batch_id)
            try:
                result = self._submit_line(batch, line, lookups, timeout_s)
            except Exception as exc:
                if not final:
                    raise
                logger.exception("batch line failed on its last attempt", extra={"batch_id": batch_id,
                                                                                  "line": line.number})  # fmt: skip
                reason = f"could not be submitted: {type(exc).__name__} on every attempt"
                result = "rejected" if self._reject(batch, line, reason) else self._fail_accepted(batch, line, reason)
            if result == "over_limit":  # the owner is at CallerMaxPendingJobs: the line waits as for a slot
                if time.time() - queued_at > self.max_deferral_s:
                    reason = (f"its owner had CallerMaxPendingJobs jobs pending for {self.max_deferral_s} s "
                              "(BatchMaxDeferralSeconds) after the line was queued")  # fmt: skip
                    # Not recorded yet (the usual case): failed as a line that never got a slot; else its job fails.
                    result = (
                        "expired" if self._reject(batch, line, reason) else self._fail_accepted(batch, line, reason)
                    )
                else:
                    result = "deferred"
            elif result == "deferred" and time.time() - queued_at > self.max_deferral_s:
                # Bounded wait: the line fails with the reason rather than re-queueing for ever. The next lines still
                # go through the normal path (a bad one fails with its own reason; a slot may have come free).
                reason = (
                    f"no in-flight slot became free within {self.max_deferral_s} s (BatchMaxDeferralSeconds) "
                    "of the line being queued"
                )
                result = "expired" if self._reject(batch, line, reason) else "already"
                logger.warning("batch line expired waiting for a slot", extra={"batch_id": batch_id,
                                                                               "line": line.number})  # fmt: skip
            if result == "deferred":
                rest = lines[index:]
                delay = min(MAX_RETRY_DELAY_S, self.retry_base_s * 2 ** min(attempt, 6))
                delay = max(1, int(delay * random.uniform(0.5, 1.0)))
                self.queue.send_lines(batch_id, rest, attempt=attempt + 1, delay_s=delay, queued_at=queued_at)
                # The batch is waiting, not lost: its record says it moved (the reconciler fails a batch's unrecorded
                # lines only after it has been silent for long: omnireel.batches.reconcile).
                self.store.touch(batch_id)
                outcome["deferred"] = len(rest)
                logger.info(
                    "batch backpressure: no in-flight slot, or the owner is at CallerMaxPendingJobs",
                    extra={"batch_id": batch_id, "deferred": len(rest), "delay_s": delay, "attempt": attempt},
                )
                break
            outcome[result] += 1
            slowest = max(slowest, time.monotonic() - started - (lookups.waited_s - waited))
        return outcome

    def _submit_line(self, batch: Batch, line: Line, lookups: Lookups | None = None, timeout_s: float = 0) -> str:
        natural_key = line_natural_key(batch.natural_key, line.number)
        job_id = job_id_for(natural_key)
        ref = BatchRef(batch_id=batch.batch_id, line=line.number)
        if batch.truncated and line.number >= batch.truncated.truncated_at_line:
            return "dropped"  # queued by a split step that died before its checkpoint; the file is gone since
        # Read first: a line already recorded (a redelivered or continued chunk) is never validated or looked up again.
        recorded = self.store.line(batch.batch_id, line.number)
        if recorded is not None and recorded.get("submitted") != "accepted":
            return "already"
        try:
            if line.error:
                raise InvalidRequest(line.error)
            assert line.text is not None
            request = parse_job_request_json(line.text, default_video_steps=self.default_video_steps)
            if request.webhook and recorded is None:  # where it may be sent, checked as for a single job, bounded
                check_webhook_target(
                    request.webhook,
                    allow_loopback_http=self.allow_loopback_http,
                    timeout_s=timeout_s or self.resolve_timeout_s,
                    lookups=lookups,
                )
        except InvalidRequest as exc:
            submitted = self.store.submit_line(batch.batch_id, line.number, job_id, accepted=False, max_in_flight=None)
            if not submitted and self.store.line(batch.batch_id, line.number) is None:
                return "dropped"  # the batch was truncated before this line (submit_line's condition)
            fail_line_job(self._line_failure(), batch, line.number, code=exc.code, message=exc.message)
            return "rejected"
        fresh = False
        if recorded is None and self.jobs.at_limit(counted_as(batch.owner)):
            # Its owner is at CallerMaxPendingJobs: the line waits before it takes a slot or a record (a recorded
            # line without a job would look lost to the reconciler), and is tried again with the chunk.
            return "over_limit"
        if recorded is None:
            fresh = self.store.submit_line(
                batch.batch_id, line.number, job_id, accepted=True, max_in_flight=self.max_in_flight
            )
            if not fresh:
                recorded = self.store.line(batch.batch_id, line.number)
                if recorded is None:
                    now_batch = self._batch(batch.batch_id)
                    if now_batch.truncated and line.number >= now_batch.truncated.truncated_at_line:
                        return "dropped"
                    return "deferred"
        if recorded is not None and recorded.get("submitted") != "accepted":
            return "already"
        # Holding a slot (now or from an earlier run that died before the start): make sure the job runs.
        try:
            submit_job(
                request,
                source=batch.source,
                source_version=batch.source_version,
                natural_key=natural_key,
                owner=batch.owner,
                batch=ref,
                jobs=self.jobs,
                workflow=self.workflow,
            )
        except TooManyPendingJobs:
            # A batch counts its lines as they are queued (issue 34 item 5): this one waits, holding its slot, and is
            # submitted again with the chunk's next try (its line is recorded accepted: no slot is taken twice).
            return "over_limit"
        return "accepted" if fresh else "already"

    def _reject(self, batch: Batch, line: Line, reason: str) -> bool:
        """Fail a line that was never submitted, once (``submit_line``'s condition): its job is a failed job whose
        reason names the line. False: the line was submitted already (its own job ends it) or is past a truncation."""
        return reject_line(self._line_failure(), batch, line.number, reason)

    def _fail_accepted(self, batch: Batch, line: Line, reason: str) -> str:
        """The last attempt at a line that holds a slot but whose job did not start: its job (made now if it was
        never written) fails with the reason; that job.failed counts the line and frees the slot."""
        recorded = self.store.line(batch.batch_id, line.number)
        if recorded is None or recorded.get("submitted") != "accepted":
            return "already"
        fail_line_job(self._line_failure(), batch, line.number, code="BatchLineFailed", message=reason)
        return "failed"

    def _line_failure(self) -> LineFailure:
        return LineFailure(self.store, self.jobs, self.artifacts, self.publisher, self.presign_seconds)

    def _progress(self) -> Progress:
        return Progress(self.store, self.artifacts, self.publisher, self.presign_seconds)

    def _batch(self, batch_id: str) -> Batch:
        batch = self.store.find(batch_id)
        if batch is None:
            raise RuntimeError(f"no batch {batch_id}")
        return batch


def webhook_host(line: Line) -> tuple[str, int] | None:
    """The (host, port) a line's webhook check would look up, read cheaply for the time budget (validation proper is
    ``parse_job_request_json``'s); None for a line without a webhook. Anything unclear counts as a lookup."""
    if not line.text or "webhook" not in line.text:
        return None
    try:
        data = json.loads(line.text)
        url = data.get("webhook") if isinstance(data, dict) else None
        if not isinstance(url, str):
            return None
        parts = urlsplit(url)
        return parts.hostname or "", parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        return ("", 0)


@dataclass
class LineFailure:
    """What failing a line's job needs (the fan-out and the reconciler share it)."""

    store: BatchStore
    jobs: JobStore
    artifacts: ArtifactStore
    publisher: EventPublisher
    presign_seconds: int


def reject_line(deps: LineFailure, batch: Batch, number: int, reason: str, *, code: str = "BatchLineFailed") -> bool:
    """Record the line as submitted-and-rejected (once: False if it was already submitted, or lies past a
    truncation) and fail its job with ``line N: <reason>``: one ``job.failed``, counted into the batch by its event."""
    job_id = job_id_for(line_natural_key(batch.natural_key, number))
    if not deps.store.submit_line(batch.batch_id, number, job_id, accepted=False, max_in_flight=None):
        return False
    fail_line_job(deps, batch, number, code=code, message=reason)
    return True


def send_missing_event(deps: LineFailure, job: Job) -> bool:
    """A terminal line job whose one event was never sent: its sender was killed between the job record (a rejected
    line's job is created failed) and the publish, and the retried work item finds the line recorded and skips it.
    Sent now (``finish_job`` publishes once: a job whose event was sent gets nothing); True if this call sent it."""
    if not job.status.terminal:  # finish_job would move it on instead
        return False
    finished = finish_job(job.job_id, job.status, step_error=None, jobs=deps.jobs, artifacts=deps.artifacts,
                          publisher=deps.publisher, presign_seconds=deps.presign_seconds, job=job)  # fmt: skip
    return finished.event is not None


def start_never_started(workflow: Workflow, job: Job) -> bool:
    """A line's job still ``accepted`` whose execution does not exist (its submitter was killed between the job record
    and StartExecution, and the work item that would have retried it is gone): its own execution (the name stored
    with the job, so a concurrent start makes the same one) is started now; True if this call started it."""
    if job.status is not JobStatus.ACCEPTED or workflow.started(job.job_id, job.execution):
        return False
    workflow.start(job.job_id, job.execution)
    return True


def fail_line_job(deps: LineFailure, batch: Batch, number: int, *, code: str, message: str) -> None:
    """The line's job as a failed job (created failed if it does not exist; one that exists and is not terminal is
    failed with the same error; a terminal one keeps its outcome) and its one ``job.failed`` (``finish_job``
    publishes once)."""
    text = bounded(f"line {number}: {message}")
    job = reject_submission(
        natural_key=line_natural_key(batch.natural_key, number),
        source=batch.source,
        source_version=batch.source_version,
        owner=batch.owner,
        batch=BatchRef(batch_id=batch.batch_id, line=number),
        error=JobError(stage="accept", code=code, message=text),
        jobs=deps.jobs,
    )
    finish_job(
        job.job_id,
        JobStatus.FAILED,
        step_error={"Error": code, "Cause": json.dumps({"code": code, "message": text})},
        jobs=deps.jobs,
        artifacts=deps.artifacts,
        publisher=deps.publisher,
        presign_seconds=deps.presign_seconds,
    )
