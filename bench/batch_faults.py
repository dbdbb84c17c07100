"""The fault suite's "slow DNS / BatchSubmit crashes and timeouts" phase (issue 33 item 2): every accepted batch
completes, with counts that add up to its total, whatever happens to the fan-out.

On the reliability stack (bench/fault_suite.py), through the front door and the inbox bucket, two callers:

1. **Dead-lettered chunk.** Every BatchSubmit invocation is killed 0.05 s in (``lambda_crash`` rate 1.0) while one
   small batch is submitted, so its chunk fails every receive and lands in BatchDeadLetterQueue (the batch queue's
   visibility timeout and maxReceiveCount are lowered for the phase so that takes a minute, not 30). ReconcileBatches
   fails its unrecorded lines with the reason ("dead-lettered"), and the batch completes.
2. **Slow DNS, crashes and a tight Timeout at once.** BatchSubmit's Timeout is lowered (``BATCH_SUBMIT_TIMEOUT_S``)
   and its invocations are killed at a rate (each one's first, then ``CRASH_RATE``); batches from both callers
   (``POST /batches``) and one ``.jsonl`` drop mix lines without a webhook, lines whose webhook host takes 30 s to
   resolve (the local resolver hook, ``delay_s``), and invalid lines. Slow lines fail with "did not resolve within";
   the others run.

Checked for every batch: ``completed``; ``accepted + rejected == total`` and ``succeeded + failed + cancelled ==
total``; one terminal event per line's job (from the suite's event collector, waited for after completion: the
subscriber drains its queue behind the counts); and BatchSubmit never timed out
(the stack log's "timed out" lines for it). ``--lines N`` (bench/reliability.py) adds one N-line drop (10,000: the
issue's loaded-machine run) whose lines fail fast (an invalid field, or the slow host) so the fan-out, not the
pipeline, is what is measured.
"""

from __future__ import annotations

import json
import re
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from bench.hostile_consumers import Caller, _developer, _second_caller
from bench.localstack import PROGRESS_EVENTS, EventCollector, IsolatedStack, consumer_paused

SLOW_HOST = "slow-submit.hooks.test"
SLOW_DELAY_S = 30  # far past the submit-time bound (omnireel.webhooks.submit_check.SUBMIT_RESOLVE_TIMEOUT_S)
BATCH_SUBMIT_TIMEOUT_S = 20  # a third of the template's 60 s: a lookup (5 s) and a few lines' writes on a loaded stack
VISIBILITY_S = 25  # the batch queue's visibility timeout for the phase (template: 360 s); above the Timeout
CRASH_RATE = 0.25
DEAD_LETTER_RECEIVES = 2  # the batch queue's maxReceiveCount while the first batch's chunk is made to dead-letter
# After the batches complete, the subscriber's queue may still hold their terminal events (a 10,000-line drop's events
# arrive faster than one receiver drains them): waited for, bounded, at this rate at least.
DRAIN_EVENTS_PER_S = 50
TINY_VIDEO = {"num_frames": 5, "width": 256, "height": 192, "num_inference_steps": 2}


@dataclass
class FaultBatch:
    name: str
    caller: str
    batch_id: str
    total: int
    slow_lines: set[int]
    status: str = "?"
    counts: dict[str, int] = field(default_factory=dict)
    manifest: dict[int, dict[str, Any]] = field(default_factory=dict)


@dataclass
class BatchFaultsResult:
    batches: list[FaultBatch]
    unfinished: list[str]  # batch ids not completed by the deadline
    bad_counts: list[str]  # completed, but the counts do not add up
    bad_reasons: list[str]  # a slow line that did not fail with the lookup's reason, or a dead-lettered one without it
    events_per_batch: dict[str, int]  # distinct line jobs with a terminal event, per batch
    crashes: int  # BatchSubmit invocations killed by the fault hook
    timeouts: int  # BatchSubmit invocations cut by their Timeout (must be 0)
    dead_lettered_lines: int  # lines failed because their work item was lost (dead-lettered, or their job never made)
    seconds: float
    lines: int = 0

    @property
    def ok(self) -> bool:
        return not (
            self.unfinished
            or self.bad_counts
            or self.bad_reasons
            or self.timeouts
            or any(self.events_per_batch.get(b.batch_id, 0) != b.total for b in self.batches)
        )


def _job(n: int, *, slow: bool = False, bad: bool = False) -> dict[str, Any]:
    video = dict(TINY_VIDEO, width=250) if bad else TINY_VIDEO  # 250: not a multiple of 16 (a fast, clear failure)
    job: dict[str, Any] = {"prompt": f"batch fault line {n}: a lighthouse in fog", "seed": n, "video": video}
    if slow:
        job["webhook"] = f"http://{SLOW_HOST}:9/hooks"
    return job


def _mix(size: int, offset: int) -> tuple[list[dict[str, Any]], set[int]]:
    """Lines 1..size: every third aimed at the slow host, every fifth invalid, the rest plain jobs."""
    jobs, slow = [], set()
    for n in range(1, size + 1):
        is_slow = n % 3 == 1
        jobs.append(_job(offset + n, slow=is_slow, bad=n % 5 == 0 and not is_slow))
        if is_slow:
            slow.add(n)
    return jobs, slow


def _stack_log_timeouts(stack: IsolatedStack, function: str) -> int:
    path = stack.home / "logs" / "stack.log"
    if not path.exists():
        return 0
    pattern = re.compile(rf"lambda \S*{function}\S*: timed out after")
    return sum(1 for line in path.read_text(errors="replace").splitlines() if pattern.search(line))


def _depth(sqs: Any, queue_url: str) -> int:
    found = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["All"])["Attributes"]
    return int(found["ApproximateNumberOfMessages"]) + int(found["ApproximateNumberOfMessagesNotVisible"])


def _queue_url(stack: IsolatedStack, logical: str) -> str:
    return str(stack.state["provisioned"]["resources"][logical]["id"])


def _post_batch(caller: Caller, jobs: list[dict[str, Any]], key: str) -> str:
    reply = caller.api("POST", "/batches", {"jobs": jobs}, {"Idempotency-Key": key})
    if reply.status_code != 202:
        raise RuntimeError(f"POST /batches ({caller.name}): HTTP {reply.status_code}: {reply.text[:300]}")
    return str(reply.json()["batch_id"])


def _drop(stack: IsolatedStack, lines: list[dict[str, Any]], name: str, timeout_s: float = 120) -> str:
    """A .jsonl drop (a real S3 PUT into the inbox); its batch id from the object's tag."""
    bucket = stack.output("InboxBucketName")
    key = f"prompts/{name}.jsonl"
    s3 = stack.client("s3")
    body = "\n".join(json.dumps(line) for line in lines).encode() + b"\n"
    version = s3.put_object(Bucket=bucket, Key=key, Body=body)["VersionId"]
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        tags = s3.get_object_tagging(Bucket=bucket, Key=key, VersionId=version).get("TagSet", [])
        found = {t["Key"]: t["Value"] for t in tags}
        batch_id = found.get("omnireel-batch-id") or found.get("omnireel-job-id")
        if batch_id:
            return batch_id
        time.sleep(0.3)
    raise TimeoutError(f"s3://{bucket}/{key} was not picked up within {timeout_s:.0f} s")


def _wait(condition: Callable[[], bool], deadline: float, every: float = 1.0) -> bool:
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(every)
    return condition()


def run_batch_faults(
    stack: IsolatedStack,
    collector: EventCollector,
    *,
    batch_size: int = 6,
    drop_lines: int = 0,
    timeout_s: float = 300,
    log: Callable[[str], None] = print,
) -> BatchFaultsResult:
    started = time.monotonic()
    a, b = _developer(stack), _second_caller(stack)
    callers = {"A": a, "B": b}
    work_queue = _queue_url(stack, "BatchQueue")
    sqs = stack.client("sqs")
    lam = stack.client("lambda")
    function = stack.function_name("BatchSubmitFunction")
    original_timeout = lam.get_function_configuration(FunctionName=function)["Timeout"]
    attributes = sqs.get_queue_attributes(QueueUrl=work_queue, AttributeNames=["VisibilityTimeout", "RedrivePolicy"])
    original_visibility = attributes["Attributes"]["VisibilityTimeout"]
    original_redrive = attributes["Attributes"]["RedrivePolicy"]
    dead_letter_queue = _queue_url(stack, "BatchDeadLetterQueue")
    dead_letters_before = _depth(sqs, dead_letter_queue)
    timeouts_before = _stack_log_timeouts(stack, "BatchSubmit")
    crashes_before = sum(1 for f in stack.injected() if f["kind"] == "lambda_crash" and "BatchSubmit" in f["key"])
    dns = {SLOW_HOST: {"delay_s": SLOW_DELAY_S}}
    run_id = uuid.uuid4().hex[:6]
    batches: list[FaultBatch] = []
    deadline = started + timeout_s
    try:
        for kind in ("images", "videos"):  # the pipeline is not what this phase measures
            stack.emulator(kind, {"faults": {kind: None}})
        # A receive takes the queue's visibility timeout when it starts: with BatchSubmit's consumer paused (its
        # State Disabled: no receive under way), every receive after the change takes the new one.
        with consumer_paused(stack.client("lambda"), stack.function_name("BatchSubmitFunction")):
            sqs.set_queue_attributes(QueueUrl=work_queue, Attributes={"VisibilityTimeout": str(VISIBILITY_S)})
            stack.update_function("BatchSubmitFunction", Timeout=BATCH_SUBMIT_TIMEOUT_S)

        # 1. A chunk whose every receive is killed: dead-lettered, then failed by the reconciler with the reason. The
        # queue's maxReceiveCount is lowered for this step (a crash loop reaches the dead-letter queue in two receives
        # instead of five: the local pollers long-poll, so receives of a message come ~20 s apart).
        sqs.set_queue_attributes(QueueUrl=work_queue, Attributes={"RedrivePolicy": json.dumps(
            {**json.loads(original_redrive), "maxReceiveCount": DEAD_LETTER_RECEIVES})})  # fmt: skip
        stack.platform_faults({"dns": dns, "lambda_crash": {"BatchSubmit": {"rate": 1.0, "after_s": 0.05}}})
        jobs = [_job(900 + n) for n in range(1, 4)]
        dead = FaultBatch("dead-lettered", "A", _post_batch(a, jobs, f"bf-dead-{run_id}"), len(jobs), set())
        batches.append(dead)

        def dead_lettered() -> bool:
            return _depth(sqs, dead_letter_queue) > dead_letters_before or _view(a, dead) == "completed"

        _wait(dead_lettered, min(deadline, time.monotonic() + 180), every=1)
        sqs.set_queue_attributes(QueueUrl=work_queue, Attributes={"RedrivePolicy": original_redrive})
        log(f"batch faults: the first batch's chunk was dead-lettered ({dead.status}, {dead.counts})")

        # 2. Slow DNS, crashes at a rate and a tight Timeout, two callers, the API and a drop.
        stack.platform_faults({"dns": dns, "lambda_crash": {"BatchSubmit": {"rate": CRASH_RATE, "after_s": 0.3,
                                                                             "first": True}}})  # fmt: skip
        for index, (caller, size) in enumerate((("A", batch_size), ("B", batch_size), ("A", batch_size + 3))):
            jobs, slow = _mix(size, 1000 * (index + 1))
            batch_id = _post_batch(callers[caller], jobs, f"bf-{index}-{run_id}")
            batches.append(FaultBatch(f"api-{index}", caller, batch_id, size, slow))
        jobs, slow = _mix(batch_size, 5000)
        batches.append(FaultBatch("drop", "-", _drop(stack, jobs, f"batch-faults-{run_id}"), batch_size, slow))
        if drop_lines:
            big = [_job(10_000 + n, slow=n % 50 == 1, bad=n % 50 != 1) for n in range(1, drop_lines + 1)]
            big_id = _drop(stack, big, f"batch-faults-big-{run_id}", timeout_s=600)
            big_slow = {n for n in range(1, drop_lines + 1) if n % 50 == 1}
            batches.append(FaultBatch(f"drop-{drop_lines}", "-", big_id, drop_lines, big_slow))
        log(f"batch faults: {len(batches)} batches, {sum(x.total for x in batches)} lines submitted")
        _wait(lambda: all([_view(callers.get(x.caller, a), x) == "completed" for x in batches]), deadline, every=2)
    finally:
        stack.platform_faults({})
        restore = {"VisibilityTimeout": original_visibility, "RedrivePolicy": original_redrive}
        sqs.set_queue_attributes(QueueUrl=work_queue, Attributes=restore)
        stack.update_function("BatchSubmitFunction", Timeout=original_timeout)

    unfinished = [x.batch_id for x in batches if x.status != "completed"]
    bad_counts, bad_reasons = [], []
    dead_lettered = 0
    for x in batches:
        if x.status != "completed":
            continue
        c = x.counts
        if not (c.get("accepted", 0) + c.get("rejected", 0) == c.get("total") == x.total and
                c.get("succeeded", 0) + c.get("failed", 0) + c.get("cancelled", 0) == x.total):  # fmt: skip
            bad_counts.append(f"{x.name} {x.batch_id}: {c}")
        x.manifest = _manifest(stack, callers.get(x.caller, a), x)
        for n in x.slow_lines:
            error = (x.manifest.get(n) or {}).get("error") or ""
            if "did not resolve within" not in error and not _lost(error):
                bad_reasons.append(f"{x.name} line {n}: {error or x.manifest.get(n)}")
        dead_lettered += sum(1 for row in x.manifest.values() if _lost(row.get("error") or ""))
    if dead.status == "completed" and not any(_lost(r.get("error") or "") for r in dead.manifest.values()):
        bad_reasons.append(f"dead-lettered batch: no line failed with a lost work item's reason: {dead.manifest}")
    # The counts above come from the batch records; the events are the subscriber's, which may lag behind them.
    drained = time.monotonic() + max(30.0, sum(x.total for x in batches) / DRAIN_EVENTS_PER_S)
    _wait(lambda: all(len(jobs) >= x.total for x, jobs in _terminal_per_batch(collector, batches)), drained, every=2)
    per_batch = {x.batch_id: jobs for x, jobs in _terminal_per_batch(collector, batches)}
    return BatchFaultsResult(
        batches=batches,
        unfinished=unfinished,
        bad_counts=bad_counts,
        bad_reasons=bad_reasons,
        events_per_batch={i: len(jobs) for i, jobs in per_batch.items()},
        crashes=sum(1 for f in stack.injected() if f["kind"] == "lambda_crash" and "BatchSubmit" in f["key"])
        - crashes_before,
        timeouts=_stack_log_timeouts(stack, "BatchSubmit") - timeouts_before,
        dead_lettered_lines=dead_lettered,
        seconds=time.monotonic() - started,
        lines=sum(x.total for x in batches),
    )


def _lost(error: str) -> bool:
    """A line failed because its work item was lost: dead-lettered while the line had no record (the dead-letter
    path's reason), or recorded with a slot but without a job (the reconciler's "could not be started"). Which of the
    two a killed chunk's line gets depends on where each kill landed: both name the loss."""
    return "dead-lettered" in error or "could not be started" in error


def _terminal_per_batch(collector: EventCollector, batches: list[FaultBatch]) -> list[tuple[FaultBatch, set[str]]]:
    """Per batch, the distinct line jobs the subscriber received a terminal event for (progress events not counted)."""
    ids: dict[str, set[str]] = {x.batch_id: set() for x in batches}
    for received in list(collector.received):
        ref, kind = received.event.get("batch"), received.event.get("event_type")
        if isinstance(ref, dict) and ref.get("batch_id") in ids and kind not in PROGRESS_EVENTS:
            ids[ref["batch_id"]].add(str(received.event.get("job_id")))
    return [(x, ids[x.batch_id]) for x in batches]


def _view(caller: Caller, batch: FaultBatch) -> str:
    reply = caller.api("GET", f"/batches/{batch.batch_id}")
    if reply.status_code == 200:
        view = reply.json()
        batch.status, batch.counts = view.get("status", "?"), view.get("counts") or {}
    return batch.status


def _manifest(stack: IsolatedStack, caller: Caller, batch: FaultBatch) -> dict[int, dict[str, Any]]:
    view = caller.api("GET", f"/batches/{batch.batch_id}").json()
    url = (view.get("manifest") or {}).get("url")
    if not url:
        return {}
    rows = stack.http.get(url, timeout=60).text.splitlines()
    return {int(row["line"]): row for row in map(json.loads, rows) if row}


def report_section(result: BatchFaultsResult, table: Callable[[list[str], list[list[Any]]], str]) -> str:
    rows = [
        [x.name, x.caller, x.total, x.status, x.counts.get("accepted", "-"), x.counts.get("rejected", "-"),
         x.counts.get("succeeded", "-"), x.counts.get("failed", "-"), len(x.slow_lines),
         result.events_per_batch.get(x.batch_id, 0)]
        for x in result.batches
    ]  # fmt: skip
    # every check behind the phase's verdict (``ok``), so a failed one says which (the first 10 reasons of each kind)
    shown = [*result.bad_counts[:10], *result.bad_reasons[:10]]
    off = sum(1 for x in result.batches if result.events_per_batch.get(x.batch_id, 0) != x.total)
    return "\n".join(
        [
            "## Slow DNS, BatchSubmit crashes and timeouts (issue 33 item 2)",
            "",
            f"A webhook host whose lookup takes {SLOW_DELAY_S} s on every third line, BatchSubmit's Timeout lowered to "
            f"{BATCH_SUBMIT_TIMEOUT_S} s, its invocations killed (rate {CRASH_RATE}, and every one while the first "
            f"batch was submitted, so its chunk was dead-lettered), the batch queue's visibility timeout {VISIBILITY_S}"
            " s. Every accepted batch must complete with counts adding up to its total.",
            "",
            f"- batches: **{len(result.batches)}** ({result.lines} lines) in {result.seconds:.0f} s; unfinished: "
            f"**{len(result.unfinished)}**; counts not adding up: **{len(result.bad_counts)}**",
            f"- BatchSubmit invocations killed: **{result.crashes}**; cut by their Timeout: **{result.timeouts}**",
            f"- lines failed because their work item was lost (dead-lettered, or recorded without a job): "
            f"**{result.dead_lettered_lines}**",
            f"- verdict: **{'ok' if result.ok else 'failed'}**; slow lines with another reason: "
            f"**{len(result.bad_reasons)}**; batches whose terminal events (counted by the subscriber) differ from "
            f"their lines: **{off}**",
            *(f"  - {line[:300]}" for line in shown),
            "",
            table(
                [
                    "batch",
                    "caller",
                    "lines",
                    "status",
                    "accepted",
                    "rejected",
                    "succeeded",
                    "failed",
                    "slow lines",
                    "terminal events",
                ],
                rows,
            ),
        ]
    )
