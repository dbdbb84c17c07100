"""Admission's use cases: no job calls a model endpoint before it holds a slot on it (issue 34).

- ``acquire`` (the stage's Lambda, before its model call): the fast path, one DynamoDB transaction. A free slot and
  nobody waiting: granted. Otherwise the stage answers "not admitted" and the state machine parks the job in
  ``WaitFor<Kind>Slot`` (``.waitForTaskToken``; its timeout is the job's queue limit).
- ``wait`` (that state's Lambda): already holding a slot answers the token at once; else the job's waiting entry goes
  into the queue (the job becomes ``queued`` and ``job.queued`` is published, first admission only) and ``dispatch``
  runs once, so a slot freed meanwhile is never lost.
- ``dispatch`` (after every release, after every enqueue, from the healing schedule): while slots are free and jobs
  wait, the caller served least recently gets the next slot (round-robin across callers), its oldest job first; the
  grant is one transaction and then SendTaskSuccess. A refused answer gives the slot back only if the job has ended:
  Step Functions refuses a token whose wait is over (timed out, stopped) and one answered already (the healer took the
  grant for lost and answered it first), and in the second case the job runs on this grant. A wait that timed out
  ends its job (RecordExpired, RecordFailure: ``leave`` frees the slot); a stopped execution's slot is the healer's.
- ``release``: when the stage ends (the image call returned; the async video result arrived; the job ended).
- ``heal`` (every minute): capacity from DescribeEndpoint; slots of jobs that ended or whose execution is gone are
  released; a grant whose job still waits (its dispatcher died between the grant and SendTaskSuccess) has its token
  answered again; entries of such jobs leave the queue; the counts are re-derived from the items; dispatch; metrics.

``Gate`` is the API for every caller of admission, the functions and ``bench/fairness.py`` alike.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from omnireel.admission.pool import (
    KINDS,
    Holder,
    Kind,
    Pool,
    WaitingEntry,
    caller_key,
    capacity_of,
    entry_key,
    next_callers,
)
from omnireel.core.clock import iso, now, parse_time
from omnireel.core.errors import JobConflict, JobNotFound
from omnireel.events.job_events import QueuePosition, build_queued_event
from omnireel.jobs.job import Job, JobStatus
from omnireel.runtime.observability import logger

if TYPE_CHECKING:
    from omnireel.aws.admission_store import AdmissionMetrics, AdmissionStore, EndpointInstances
    from omnireel.aws.event_publisher import EventPublisher
    from omnireel.aws.job_store import JobStore
    from omnireel.aws.workflow import TaskCallbacks, Workflow

CAPACITY_MAX_AGE_S = 60  # a wait refreshes the pool's capacity (DescribeEndpoint) when it is older than this
SERVED_MEMORY_S = 86400  # the healing schedule forgets a caller's last turn after a day without waiting work
_MAX_GRANTS_PER_DISPATCH = 200  # bounded work per call; the healing schedule continues
# A wait for a slot of a job admitted before (a retried image call, the video stage): its timeout. The video wait's
# TimeoutSeconds is VideoCallbackTimeoutSeconds (statemachine/pipeline.asl.json).
REQUEUE_SECONDS = 300
# A cancelled job's render still runs at SageMaker and holds its video slot until its result arrives; the healing
# schedule frees the slot after this long anyway (the result was lost).
RENDER_BOUND_S = 6 * 3600
# The image step's function timeout (template.yaml: GenerateImageFunction's Timeout; a test in
# tests/unit/template/test_timeouts.py keeps them equal). A job cancelled while its image step was calling the
# endpoint: the step holds the image slot until the endpoint answers, and frees it then; a step that ran when its job
# was cancelled has ended this long after, so the healing schedule frees the slot by then anyway.
IMAGE_STEP_TIMEOUT_S = 150


@dataclass(frozen=True)
class PoolConfig:
    """An endpoint kind's configuration: the endpoint's name and the requests one instance serves at once."""

    endpoint: str
    per_instance: int


@dataclass
class Gate:
    store: AdmissionStore
    jobs: JobStore
    callbacks: TaskCallbacks
    pools: dict[Kind, PoolConfig] = field(default_factory=dict)  # needed by wait and heal (capacity)
    instances: EndpointInstances | None = None  # needed by wait and heal (DescribeEndpoint)
    grace_s: float = 60  # heal leaves a grant or a wait younger than this alone (its step is starting)

    # ------------------------------------------------------------ the fast path
    def acquire(self, job_id: str, kind: Kind, *, task_token: str | None = None) -> bool:
        """Take a slot for the job's stage if it holds one or one is free with nobody waiting (one AWS call).
        ``task_token``: taken for a waiting job, whose token the grant answers (kept on the holder for the healer)."""
        return self.store.try_grant(kind, job_id, iso(now()), task_token=task_token) != "refused"

    # ------------------------------------------------------------ the slow path
    def wait(self, job_id: str, kind: Kind, task_token: str, *, publisher: EventPublisher | None = None) -> str:
        """Park the job until a slot is granted (see the module docstring). Returns what happened: ``granted`` (the
        token is answered), ``queued`` (it waits) or ``ended`` (the job is terminal: nothing to wait for)."""
        if self.store.holds(kind, job_id):
            self.callbacks.succeed(task_token, {"admitted": True, "kind": kind})
            return "granted"
        job = self.jobs.get(job_id)
        if job.status.terminal:
            logger.info("a terminal job does not wait", extra={"job_id": job_id, "status": job.status})
            return "ended"
        pool = self._pool_for_wait(kind)
        if pool.waiting <= 0 and pool.free > 0 and self.acquire(job_id, kind, task_token=task_token):
            # The fast path was refused before the pool existed or its capacity was refreshed (a scale-out): admitted
            # now, the job never waited (no queued status, no job.queued).
            if not self._answer(job_id, kind, task_token):
                self.dispatch(kind)  # the job had ended: its slot went back, and the next job may take it
            return "granted"
        first = job.status in (JobStatus.ACCEPTED, JobStatus.QUEUED)  # never admitted: its queue limit applies
        key = caller_key(job.owner)
        if kind == "image" and first:
            try:
                job = self.jobs.transition(job_id, JobStatus.QUEUED)
            except JobConflict:
                job = self.jobs.get(job_id)
                if job.status.terminal:
                    return "ended"
        enqueued_at = _enqueued_at(job, kind, first)
        # Within a caller, first come first served: a job waiting for its first slot is ordered by its acceptance
        # (executions start in any order), a later wait by when it began.
        sk = entry_key(key, job.created_at if first else enqueued_at, job_id)
        deadline = None
        if first and job.request is not None:
            deadline = iso(parse_time(job.created_at) + timedelta(seconds=job.request.queue_limit_seconds))
        entry = WaitingEntry(
            kind=kind, sk=sk, job_id=job_id, caller_key=key, task_token=task_token, enqueued_at=enqueued_at,
            deadline=deadline,
        )  # fmt: skip
        self.jobs.set_fields(job_id, waiting_entry=f"{kind}|{sk}", **{f"queued_{kind}_at": enqueued_at})
        added = self.store.enqueue(entry)
        if publisher is not None and first and not job.queued_published_at:
            # The job's status is queued: job.queued says so, once, even when a release's dispatch granted it a slot
            # between the enqueue and here (the status and its stage time already showed it waiting).
            self._publish_queued(job_id, entry, publisher)
        if self.store.holds(kind, job_id):  # granted since the enqueue
            if not added:  # a retried wait: the grant answered the token this retry replaced (AdmissionStore.enqueue)
                self.callbacks.succeed(task_token, {"admitted": True, "kind": kind})
            # else the dispatcher that granted this entry answers its token (or, if it died first, the healer does):
            # a second answer is refused by Step Functions, and the dispatcher would take that for a dead wait
            return "granted"
        self.dispatch(kind)
        return "queued"

    def dispatch(self, kind: Kind) -> int:
        """Grant free slots to waiting jobs, fairly (see the module docstring); return how many were granted."""
        return self._dispatch(kind)[0]

    def _dispatch(self, kind: Kind) -> tuple[int, Pool | None]:
        """``dispatch``, and the pool as read after its last grant."""
        granted = 0
        pool = None
        for _ in range(_MAX_GRANTS_PER_DISPATCH):
            pool = self.store.pool(kind)
            if pool is None or pool.free <= 0 or pool.waiting <= 0:
                return granted, pool
            entry = self._next_entry(pool)
            if entry is None:  # the counts drifted from the items (a crash between them): heal re-counts
                logger.warning("admission counts and entries disagree", extra={"kind": kind, "waiting": pool.waiting})
                return granted, pool
            if not self.store.grant(entry, iso(now())):
                continue  # raced with another dispatcher or a cancel: look again
            if not self._answer(entry.job_id, kind, entry.task_token):
                continue  # an ended job's slot went back: look again
            granted += 1
        return granted, self.store.pool(kind)

    # ------------------------------------------------------------ releases
    def release(self, job_id: str, kind: Kind) -> bool:
        """The stage's slot is free again (once); the next waiting job gets it."""
        released = self.store.release(kind, job_id)
        if released:
            self.dispatch(kind)
        return released

    def held(self, job_id: str, kind: Kind) -> HeldSlot:
        """The slot ``acquire`` took, released once (at the end of the model call, or when the step leaves)."""
        return HeldSlot(self, job_id, kind)

    def leave(self, job: Job) -> None:
        """The job ended (any terminal transition, or a cancel): out of the queue, and every slot it holds freed -
        except the video slot of a render SageMaker still runs (a cancel cannot stop it: async_result frees it when the
        render's result arrives), and the image slot of an image call the endpoint still serves (its step frees it
        when the endpoint answers: ``_image_call_may_run``)."""
        if job.waiting_entry:
            kind, sk = _split_entry(job.waiting_entry)
            self.store.remove(kind, sk, sk.split("#", 1)[0])
        for kind in KINDS:
            if kind == "video" and _render_still_runs(job):
                continue
            if kind == "image" and _image_call_may_run(job):
                continue  # the step frees it when the endpoint answers (a busy model gets no second call)
            self.release(job.job_id, kind)

    def queue_seconds(self, job_id: str) -> int:
        """The wait's timeout when the job's stage was not admitted: what is left of its queue limit on its first
        admission (at least 1 s: an expired limit ends the wait at once), else ``REQUEUE_SECONDS``."""
        job = self.jobs.get(job_id)
        if job.status in (JobStatus.ACCEPTED, JobStatus.QUEUED) and job.request is not None:
            limit = parse_time(job.created_at) + timedelta(seconds=job.request.queue_limit_seconds)
            return max(1, math.ceil((limit - now()).total_seconds()))
        return REQUEUE_SECONDS

    # ------------------------------------------------------------ the view
    def position(self, job: Job) -> QueuePosition | None:
        """Where a waiting job stands: its caller's jobs ahead of it and the callers sharing the queue."""
        if not job.waiting_entry or job.status.terminal:
            return None
        kind, sk = _split_entry(job.waiting_entry)
        entry = self.store.entry(kind, sk)
        if entry is None:  # granted (or removed) since
            return None
        pool = self.store.pool(kind)
        callers = len(pool.callers_waiting()) if pool else 1
        return QueuePosition(
            kind=kind,
            position=self.store.ahead(kind, entry.caller_key, sk),
            callers=max(1, callers),
            enqueued_at=entry.enqueued_at,
        )

    # ------------------------------------------------------------ healing
    def heal(self, *, workflow: Workflow, metrics: AdmissionMetrics | None = None) -> dict[str, Any]:
        """The healing schedule's run (see the module docstring); returns what it repaired, per kind.

        It runs every minute on every stack, mostly with nothing to repair: an idle pool costs four calls
        (DescribeEndpoint, the capacity's write, the two item queries); dispatch runs when this run repaired anything
        or the pool it read has a free slot and a job waiting. Only when the run changed
        the items, or they disagree with the counts, are the pool and the items read again and the counts written."""
        report: dict[str, Any] = {}
        pools: list[Pool] = []
        oldest: dict[str, float] = {}  # kind -> seconds the oldest waiting job has waited
        for kind in self.pools:
            # These first reads only decide whether anything needs doing (the capacity's write returns the pool).
            pool = self.refresh(kind)
            holders = self.store.holders(kind)
            released = resumed = 0
            for holder in holders:
                if not self._alive(holder.job_id, workflow, grace_from=holder.granted_at, kind=kind):
                    released += self.store.release(kind, holder.job_id)
                elif self._answer_lost(holder):
                    resumed += 1
            entries = self.store.entries(kind)
            dropped = 0
            for entry in entries:
                if not self._alive(entry.job_id, workflow, grace_from=entry.enqueued_at):
                    dropped += self.store.remove(kind, entry.sk, entry.caller_key)
            recounted = False
            if released or dropped or self._drifted(pool, holders, entries):
                # Counted again from a fresh read: the pool, then the items at once, then the conditional write.
                # The recount must follow its reads closely: a release and a fast-path grant between the holders'
                # read and the write leave the pool's counts as read (the condition holds) while the read missed
                # the new holder, and the write would undercount the slots in use.
                pool = self.store.pool(kind) or pool
                entries = self.store.entries(kind)
                holders = self.store.holders(kind)
                if self._drifted(pool, holders, entries):
                    queued, served = self._counts(pool, entries)
                    recounted = self.store.recount(
                        pool, in_use=len(holders), waiting=len(entries), queued=queued, served=served
                    )
            if released or dropped or recounted or (pool.free > 0 and pool.waiting > 0):
                granted, last_read = self._dispatch(kind)
                pool = last_read or pool
            else:
                # The pool as read just now (unchanged by this run) has no free slot or nobody waiting: a dispatch
                # would read it again to find the same. A release or an enqueue after that read runs its own dispatch.
                granted = 0
            pools.append(pool)
            still_waiting = self.store.entries(kind) if pool.waiting else []
            oldest[kind] = max(((now() - parse_time(e.enqueued_at)).total_seconds() for e in still_waiting), default=0)
            report[kind] = {
                "capacity": pool.capacity,
                "in_use": pool.in_use,
                "waiting": pool.waiting,
                "released": released,
                "resumed": resumed,
                "dropped": dropped,
                "recounted": recounted,
                "granted": granted,
                "oldest_wait_s": int(oldest[kind]),
            }
        if metrics is not None:
            metrics.publish(pools, oldest)
        return report

    @staticmethod
    def _counts(pool: Pool, entries: list[WaitingEntry]) -> tuple[dict[str, int], dict[str, str]]:
        """The per-caller maps the items say: waiting entries per caller, and the turns still remembered."""
        queued: dict[str, int] = {}
        for entry in entries:
            queued[entry.caller_key] = queued.get(entry.caller_key, 0) + 1
        cutoff = iso(now() - timedelta(seconds=SERVED_MEMORY_S))
        return queued, {k: v for k, v in pool.served.items() if k in queued or v >= cutoff}

    def _drifted(self, pool: Pool, holders: list[Holder], entries: list[WaitingEntry]) -> bool:
        queued, served = self._counts(pool, entries)
        return (pool.in_use, pool.waiting, pool.queued, pool.served) != (len(holders), len(entries), queued, served)

    def refresh(self, kind: Kind) -> Pool:
        """Capacity from the endpoint's instances in service (DescribeEndpoint) x per-instance concurrency."""
        config = self.pools[kind]
        instances = self.instances.count(config.endpoint) if self.instances else 1
        return self.store.ensure_pool(
            kind,
            endpoint=config.endpoint,
            instances=instances,
            per_instance=config.per_instance,
            capacity=capacity_of(kind, instances, config.per_instance),
            at=iso(now()),
        )

    # ------------------------------------------------------------ internals
    def _pool_for_wait(self, kind: Kind) -> Pool:
        pool = self.store.pool(kind)
        stale = (
            pool is None
            or not pool.capacity_at
            or ((now() - parse_time(pool.capacity_at)).total_seconds() > CAPACITY_MAX_AGE_S)
        )
        if stale and kind in self.pools:
            return self.refresh(kind)
        if pool is None:
            raise RuntimeError(f"no {kind} pool and no endpoint configured to make one")
        return pool

    def _next_entry(self, pool: Pool) -> WaitingEntry | None:
        """The oldest entry of the least recently served caller; among callers never served (or served at the same
        moment), the one whose oldest entry waited longest."""
        order = next_callers(pool)
        if not order:
            return None
        first_turn = pool.served.get(order[0], "")
        tied = [key for key in order if pool.served.get(key, "") == first_turn][:10] + order[:1]
        heads = [head for key in dict.fromkeys(tied) if (head := self.store.head(pool.kind, key)) is not None]
        if not heads:
            for key in order[1:10]:  # a caller counted but with no entry left: try the next ones
                if (head := self.store.head(pool.kind, key)) is not None:
                    return head
            return None
        return min(heads, key=lambda head: (head.sk.split("#")[1], head.job_id))

    def _answer(self, job_id: str, kind: Kind, task_token: str) -> bool:
        """SendTaskSuccess for a grant. Refused, the slot goes back only if the job has ended (or vanished): Step
        Functions refuses alike a token whose wait is over and one answered already, and a token the healer answered
        first (it took this grant for lost) belongs to a job that now runs on the grant; releasing it let a second job
        call the model on the same slot. A wait that timed out ends its job (``leave`` frees the slot then), a stopped
        execution's slot is freed by the healer. True if this answer resumed the job."""
        if self.callbacks.succeed(task_token, {"admitted": True, "kind": kind}):
            return True
        try:
            ended = self.jobs.get(job_id).status.terminal
        except JobNotFound:
            ended = True
        extra = {"job_id": job_id, "kind": kind}
        if ended:
            logger.info("granted slot's job has ended: released", extra=extra)
            self.store.release(kind, job_id)
        else:
            logger.info("grant's answer refused (answered already, or its wait ends by itself): kept", extra=extra)
        return False

    def _alive(self, job_id: str, workflow: Workflow, *, grace_from: str, kind: Kind | None = None) -> bool:
        """Does the job still need its slot or entry? Not if it ended, vanished, its execution is not running (a crash
        after a grant), or it holds an image slot past its image stage (a lost release). A grant or wait younger than
        ``grace_s`` is left alone (its step is starting)."""
        try:
            job = self.jobs.get(job_id)
        except JobNotFound:
            return False
        if job.status.terminal:
            if kind == "image":
                return _image_call_may_run(job)
            return kind == "video" and _render_still_runs(job) and _age_s(grace_from) < RENDER_BOUND_S
        if grace_from and _age_s(grace_from) < self.grace_s:
            return True
        if kind == "image" and job.status not in _BEFORE_THE_IMAGE:  # its image stage ended: a lost release
            return False
        return workflow.running(job.execution)

    def _answer_lost(self, holder: Holder) -> bool:
        """A grant whose answer may be lost: the dispatcher died between the grant and SendTaskSuccess, so the job
        holds the slot while its execution still waits in WaitFor<Kind>Slot (until its queue limit: an hour by
        default, the slot held all that time). Once the grant is older than ``grace_s`` and the job has not moved on
        to the stage it waited for, the grant's token is answered again: Step Functions accepts a token once, so a
        token answered already is refused and nothing happens twice. True if this answer resumed the job."""
        if not holder.task_token or _age_s(holder.granted_at) < self.grace_s:
            return False
        try:
            job = self.jobs.get(holder.job_id)
        except JobNotFound:
            return False
        waiting = (
            job.status in (JobStatus.ACCEPTED, JobStatus.QUEUED)
            if holder.kind == "image"
            else job.status is JobStatus.STAGING_VIDEO and job.async_invocation is None
        )
        if not waiting or not self.callbacks.succeed(holder.task_token, {"admitted": True, "kind": holder.kind}):
            return False
        logger.warning("a granted job's answer was lost: answered again", extra={"job_id": holder.job_id})
        return True

    def _publish_queued(self, job_id: str, entry: WaitingEntry, publisher: EventPublisher) -> None:
        """job.queued with the place the job took: its caller's jobs ahead of its entry (none once it was granted:
        a grant takes a caller's oldest entry) and the callers sharing the queue."""
        job = self.jobs.get(job_id)
        pool = self.store.pool(entry.kind)
        queue = QueuePosition(
            kind=entry.kind,
            position=self.store.ahead(entry.kind, entry.caller_key, entry.sk) if self.store.entry(entry.kind, entry.sk)
            else 0,
            callers=max(1, len(pool.callers_waiting()) if pool else 1),
            enqueued_at=entry.enqueued_at,
        )  # fmt: skip
        publisher.publish(build_queued_event(job, queue))
        self.jobs.set_fields(job_id, queued_published_at=iso(now()))


def _enqueued_at(job: Job, kind: Kind, first: bool) -> str:
    """The entry's time, stable across retries of the same wait (its sort key is built from it)."""
    if kind == "image" and first and job.stage_times.get(JobStatus.QUEUED.value):
        return job.stage_times[JobStatus.QUEUED.value]
    recorded = job.queued_image_at if kind == "image" else job.queued_video_at
    if recorded and job.waiting_entry and job.waiting_entry.startswith(f"{kind}|"):
        return recorded
    return iso(now())


def _split_entry(value: str) -> tuple[Kind, str]:
    kind, sk = value.split("|", 1)
    if kind not in KINDS:
        raise ValueError(f"not an admission entry: {value}")
    return kind, sk


class HeldSlot:
    """A slot taken by ``Gate.acquire``: ``release`` frees it once, however many paths call it."""

    def __init__(self, gate: Gate, job_id: str, kind: Kind):
        self._gate, self._job_id, self._kind, self._done = gate, job_id, kind, False

    def release(self) -> None:
        if not self._done:
            self._done = True
            self._gate.release(self._job_id, self._kind)


_BEFORE_THE_IMAGE = (JobStatus.ACCEPTED, JobStatus.QUEUED, JobStatus.GENERATING_IMAGE)


def _render_still_runs(job: Job) -> bool:
    """A cancelled job whose render SageMaker had accepted: it runs to its end (async inference has no cancel)."""
    return job.status is JobStatus.CANCELLED and job.async_invocation is not None


def _image_call_may_run(job: Job) -> bool:
    """A job cancelled in its image stage (``generating_image``, not yet ``staging_video``): a real-time inference
    cannot be stopped, so the endpoint may still be serving its step's call, on the job's image slot. Within
    ``IMAGE_STEP_TIMEOUT_S`` of the cancel only: the cancel stopped the execution (no step of it starts after), and a
    step that was running then has ended by that time. Not a failed job: the state machine fails a job only once its
    step's invocation has ended (its result, or its timeout), so its call is over - and a step killed during the call
    (a crash: the slot it held is a lost release) must not keep the slot from the next job for minutes."""
    started = job.stage_times.get(JobStatus.GENERATING_IMAGE.value)
    ended = job.stage_times.get(JobStatus.CANCELLED.value)
    if job.status is not JobStatus.CANCELLED or not started or not ended:
        return False
    return JobStatus.STAGING_VIDEO.value not in job.stage_times and _age_s(ended) < IMAGE_STEP_TIMEOUT_S


def _age_s(moment: str) -> float:
    return (now() - parse_time(moment)).total_seconds()
