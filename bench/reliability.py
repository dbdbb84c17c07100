"""The fault-injection suite's long run and its report (the suite itself: bench/fault_suite.py; its short run is
tests/reliability/, in ``make test-scale``): every accepted job ends in exactly one terminal event.

    .venv-dev/bin/python bench/reliability.py --jobs 250 --seed 7 [--out docs/reliability.md|-]

Writes docs/reliability.md: the figures of the run, the hand-written findings (``NOTES``) and the table of AWS rules
the local stack enforces (kept from the page as it is). Exits 1 on an invariant violation.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.batch_faults import report_section as batch_faults_section  # noqa: E402
from bench.fault_suite import (  # noqa: E402
    HEARTBEAT_S,
    HOSTILE_BATCHES_LONG,
    STACK_PARAMETERS,
    RunResult,
    phases,
    run,
)
from bench.hostile_consumers import report_section  # noqa: E402
from bench.report import machine, quantile, table, today  # noqa: E402

RELIABILITY_MD = REPO / "docs" / "reliability.md"


# ------------------------------------------------------------------------------------------------ report
def _pcts(values: list[float]) -> str:
    if not values:
        return "-"
    return " / ".join(f"{quantile(values, q):.2f}" for q in (0.5, 0.95, 1.0))


def report(result: RunResult, command: str) -> str:
    first: dict[str, Any] = {}
    count: Counter[str] = Counter()
    for received in result.events:
        job_id = received.event.get("job_id")
        count[job_id] += 1
        first.setdefault(job_id, received)
    latency = {j: first[j].at - job.submitted_at for j, job in result.jobs.items() if j in first}
    outcome_by_phase: dict[str, Counter[str]] = defaultdict(Counter)
    codes: dict[str, Counter[str]] = defaultdict(Counter)
    for job in result.jobs.values():
        if job.job_id in first:
            event = first[job.job_id].event
            outcome_by_phase[job.phase][event["status"]] += 1
            if event.get("error"):
                codes[job.phase][f"{event['error']['stage']}/{event['error']['code']}"] += 1
        else:
            outcome_by_phase[job.phase]["lost"] += 1
    lost = [j for j in result.jobs if j not in first]
    distinct: dict[str, set[str]] = defaultdict(set)
    for received in result.events:
        distinct[received.event.get("job_id")].add(received.event.get("event_id"))
    # One terminal event per job *record* (a ttl_reuse key makes two records of one job id).
    duplicates = [j for j, job in result.jobs.items() if len(distinct[j]) > job.records]
    redelivered = [j for j, job in result.jobs.items() if count[j] > job.records and len(distinct[j]) == job.records]
    remade = [j for j, job in result.jobs.items() if job.records > 1]

    injected: Counter[str] = Counter()
    for kinds in result.emulator_outcomes.values():
        for kind, outcomes in kinds.items():
            for outcome in ("error", "throttle", "hang", "malformed"):
                if outcomes.get(outcome):
                    injected[f"{kind} {outcome} (emulator)"] += outcomes[outcome]
    for fault in result.injected:
        injected[f"{fault['kind']} (stack hook)"] += 1

    # recovery: fault -> terminal event, for faults with a timestamp and a job
    recovery: dict[str, list[float]] = defaultdict(list)
    for fault in result.injected:
        job_id = fault.get("job_id") or (fault["key"] if fault["kind"].startswith("sns") else None)
        if job_id in first:
            recovery[fault["kind"]].append(first[job_id].at - fault["t"])
    phase_rows = []
    for name, seconds in result.phase_seconds.items():
        ids = [j.job_id for j in result.by_phase(name)]
        lat = [latency[j] for j in ids if j in latency]
        o = outcome_by_phase[name]
        phase_rows.append(
            [
                name,
                len(ids),
                o["succeeded"],
                o["failed"],
                o["lost"],
                sum(1 for j in ids if count[j] > result.jobs[j].records),  # incl. same-event_id redeliveries
                _pcts(lat),
                f"{seconds:.0f}",
                ", ".join(f"{k} x{v}" for k, v in codes[name].most_common()) or "-",
            ]
        )
    kinds = Counter(v["kind"] for v in result.violations)
    lines = [
        "# Reliability: fault injection on the embedded local stack",
        "",
        f"Command: `{command}`. Machine: {machine()}. Date: {today()}. Wall time: {result.wall_s:.0f} s "
        f"(including stack start/stop). Seed {result.seed}.",
        "",
        f"Stack parameters: {', '.join(f'{k}={v}' for k, v in STACK_PARAMETERS.items())} (template parameters via "
        "`omnireel local up --parameter`); emulated model time image 0.05 s, video 0.1 s plus the real CPU render of "
        "a 5-frame 256x192 MP4. Jobs are submitted through the HTTP API (``Idempotency-Key`` = seed + index, so job "
        "ids are the same every run) or dropped in the inbox bucket; events are consumed from an SQS queue subscribed "
        "to the job-events topic.",
        "",
        "## Result",
        "",
        f"- jobs accepted: **{len(result.jobs)}**",
        f"- lost jobs (no terminal event): **{len(lost)}**",
        f"- jobs with more than one terminal event (distinct `event_id`s): **{len(duplicates)}**",
        f"- jobs whose one terminal event was delivered more than once (same `event_id`; consumers de-duplicate): "
        f"**{len(redelivered)}**",
        f"- job records made again with the same key after the first expired (`ttl_reuse`): **{len(remade)}**, "
        f"with a terminal event each: **{sum(1 for j in remade if len(distinct[j]) == result.jobs[j].records)}**",
        f"- invariant violations: **{len(result.violations)}**"
        + (f" ({', '.join(f'{k} x{v}' for k, v in kinds.most_common())})" if kinds else ""),
        "",
        "## Faults injected",
        "",
        table(["fault", "count"], sorted(injected.items())),
        "",
        "## Per phase",
        "",
        "Latency = submit -> terminal event received by the subscriber, p50 / p95 / max seconds.",
        "",
        table(
            ["phase", "jobs", "succeeded", "failed", "lost", "dup events", "latency s", "phase s", "failure codes"],
            phase_rows,
        ),
        "",
        "## Recovery time",
        "",
        "Time from the injected fault (stack hook timestamp) to the job's terminal event, p50 / p95 / max seconds. "
        f"A lost notification is recovered by the callback's HeartbeatSeconds ({HEARTBEAT_S} s here) -> "
        "ReconcileVideo, which reads the async output/failure object from S3.",
        "",
        table(
            ["fault", "n", "fault -> terminal event s"], [[k, len(v), _pcts(v)] for k, v in sorted(recovery.items())]
        ),
    ]
    if result.hostile is not None:
        lines += ["", report_section(result.hostile, table)]
    if result.batch_faults is not None:
        lines += ["", batch_faults_section(result.batch_faults, table)]
    lines += ["", NOTES.strip()]
    lines += ["", strictness_section()]
    if result.violations:
        lines += ["", "## Violations", ""]
        lines += [f"- `{v['job_id']}` ({v['phase']}): {v['kind']}: {v['detail'][:300]}" for v in result.violations[:40]]
    return "\n".join(lines) + "\n"


STRICTNESS_HEADING = "## What AWS enforces that the local stack enforces too"


def strictness_section() -> str:
    """The hand-kept table of AWS rules the local stack enforces lives in docs/reliability.md (a markdown table is no
    fit for a Python string); a rerun keeps it as it is."""
    text = RELIABILITY_MD.read_text() if RELIABILITY_MD.exists() else ""
    return text[text.index(STRICTNESS_HEADING) :].strip() if STRICTNESS_HEADING in text else ""


NOTES = """
## Findings (hand-written; the figures above are regenerated by the command)

The first run of this suite found three problems, and issue 9 three more; all are fixed and covered by tests.

1. **Truncated MP4 -> job.succeeded with a video that did not decode** (phase `malformed_video`). `check_mp4` only
   checked the `ftyp` signature. Fixed: `finalize_video` walks the output's top-level ISO-BMFF boxes with ranged reads
   (`omnireel.media.mp4.check_mp4_boxes`: every box must fit in the file, `moov` and `mdat` present), so a cut-off MP4
   fails the job with `MalformedModelOutput` (unit tests in `tests/unit/media/test_media.py`).
2. **Two deliveries of one terminal event after a crash in PublishEvent** (phases `lambda_crash`, `mixed`).
   `finish_job` publishes, then records `event_published_at`; a worker killed between the two is retried and
   publishes again. Both copies are the *same event* (same `event_id`, same body). Exactly-once delivery is not
   reachable with a standard SNS topic (delivery is at-least-once even without crashes), and publishing after the
   record instead would trade duplicates for lost events. Decision: **one terminal event per job, identified by
   `event_id`; consumers de-duplicate deliveries on it** (documented in docs/events.md and the event schema). The
   invariant checks distinct `event_id`s and that redeliveries are identical; redeliveries are counted above.
3. **A crash of InvokeVideo failed the job** while a crash in any other step was retried. Fixed: InvokeVideo retries
   `States.TaskFailed` (the step is idempotent: a retried attempt sees the recorded async invocation and never
   renders twice). Because `States.TaskFailed` matches every error name, the callback failures async_result sends
   (`VideoRenderFailed`, `VideoRequestExpired`, `MalformedModelOutput`) are stopped by the first retrier; a unit test
   keeps that list and the code in step (`tests/unit/jobs/test_state_machine_rules.py`). This run also showed that
   the local shim expired queued requests only when a worker freed up; it now expires them at the TTL.
   (Issue 11 merged InvokeVideo into GenerateImageAndVideo; issue 26 split them again: InvokeVideo is its own
   `.waitForTaskToken` state with these retriers, GenerateImage a synchronous state with its own. A crash after the
   render is queued is retried without rendering twice, and a GenerateImage crash after staging without a second
   model call: `tests/integration/pipeline/test_state_machine.py`.)

4. **An overwritten drop ran the wrong prompt** (phase `overwrite`, added with issue 9). The inbox function read "the
   key" when an event arrived, so uploading `prompts/x.txt` = "a" and at once "b" made two jobs that both ran "b".
   Fixed: the inbox bucket is versioned, each S3 event is processed with exactly the object version it names
   (`versionId`; `If-Match` on the event's ETag in an unversioned bucket), the job id derives from that version, and
   a version deleted before the read fails its job with `SourceVersionGone`. The invariant now also checks that the
   record and the event carry the prompt that was submitted.

5. **A reused `Idempotency-Key` after its record expired started nothing** (issue 9, defect 2; phase `ttl_reuse`:
   each key is posted, its job finishes, its record is deleted as DynamoDB TTL does after `JobTtlDays`, and the key
   is posted again). The execution was named after the job id, which the key determines; Step Functions keeps a name
   taken for 90 days after its execution closes, so the second `StartExecution` answered `ExecutionAlreadyExists`,
   `Workflow.start` took that for success, and the job stayed `accepted` with no event. Fixed: each record stores its
   own execution name (job id + random suffix; a retry of the same record reuses it, so a crash between the record
   write and `StartExecution` still starts exactly one execution), an `ExecutionAlreadyExists` is checked with
   `DescribeExecution` (another input is an error, not a success), and the event's `event_id` is per record, so a
   consumer de-duplicating on it does not drop the new job's event. Net under everything: `fail_overdue_jobs` fails,
   with one `job.failed`, a job still `accepted` 10 minutes on whose execution does not exist (`WorkflowNotStarted`)
   and any job still not terminal `JobDeadlineSeconds` after it was accepted (`JobDeadlineExceeded`). The invariant
   counts one terminal event per record. Tests: `tests/integration/pipeline/test_job_incarnations.py`,
   `tests/e2e/test_executions.py`, `tests/reliability/`.

6. **(issue 9, defect 3) A lost notification with no output failed the job with "Forbidden" on AWS** while every
   local run passed: ReconcileVideo and AsyncResult called HeadObject holding only `s3:GetObject`, and S3 answers a
   missing key with 403 (not 404) to a caller without `s3:ListBucket`. The local stack now enforces IAM and that rule,
   and the phase `missing_output` (requests expire in the queue, every notification lost, so ReconcileVideo heads an
   output that does not exist) failed: its jobs ended `ArtifactAccessDenied`. Fixed: the functions that head
   artifacts may `s3:ListBucket` the artifacts bucket for the prefixes they head (`async/*`, `jobs/*`), and
   `ArtifactStore.size` never reads a 403 as "missing". The phase's expired jobs now end `VideoTimedOut`.

7. **(issue 25 items 8-10) One lost event stalled batches; a 2 MB batch failed.** A batch job whose terminal event
   never reached `BatchEventsQueue` held its in-flight slot for ever (with `BatchMaxInFlightJobs=1` every later batch
   line was deferred for ever), and batch queue messages were counted in characters but sent ASCII-escaped (a 4-byte
   character is 12 bytes), so `POST /batches` of 250 maximum-length jobs answered `BatchRequestTooLong` and a `.jsonl`
   drop of the same lines dead-lettered its split with the batch left `running`. Fixed: messages are built and
   measured in UTF-8 bytes (256 KiB per message, 1 MiB per SendMessageBatch; the local SQS now refuses more, moto patch
   29); `reconcile_batches` counts a lost terminal event from the job record (exactly once with a late real one) and
   ends stopped intakes; deferral is bounded (`BatchMaxDeferralSeconds`); a work item's last receive fails its lines
   instead of dead-lettering them; every dead-letter queue and the reconciler's repairs are alarmed. Tests:
   `tests/e2e/test_batch_limits.py` (1,000 maximum-length jobs through the front door, a 10 MiB `.jsonl` of 4-byte
   characters through a real S3 PUT, one dropped delivery with `BatchMaxInFlightJobs=1`, POST /batches with SQS
   throttled), `tests/integration/pipeline/test_batch_reconcile.py`. The local stack's fault hooks
   `sqs_delivery_drop` and `sqs_send_failure` (patch 30) provoke the losses.

8. **(issue 25 items 1-7) Webhooks: another tenant could forge deliveries; slow receivers caused re-deliveries.**
   Every caller read the one signing secret, so A could sign for B's receiver, and A's job aimed at B's receiver was
   delivered with a signature B accepted. One record's error failed the webhook function's whole SQS batch (delivered
   events were sent again), a receiver trickling a byte every 0.5 s held an attempt for ever, a temporary DNS failure
   ended retries, and the last backoff step asked SQS for more than 12 h from the receive. Fixed: per-caller secrets
   derived from a master key, each delivery signed with its owner's (two signatures during a rotation); per-record
   isolation (Powertools), one deadline per attempt, DNS failures retried, the backoff capped within 12 h (the local
   SQS refuses more, patch 27). The phase "hostile consumers" above exercises all of it: 0 deliveries accepted by a
   receiver that is not the owner's; the only duplicates are receivers that answered after the sender's deadline
   (the sender logged the attempt as failed, so retried by design; consumers de-duplicate on `webhook-id`).

Everything else held: no job lost under lost notifications (reconciled from S3 about one heartbeat after the drop),
duplicate notifications (second `SendTaskSuccess` ignored), duplicate S3 events (one job per object), image 5xx /
429 / hangs (retried, then `job.failed` with the reason), queue expiry (`VideoRequestExpired`) and non-PNG images
(`MalformedModelOutput`).
"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=250, help="total jobs (spread over the phases)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--out", default=str(RELIABILITY_MD), help="markdown file to write, '-' for stdout only")
    parser.add_argument("--phase-timeout", type=float, default=180)
    parser.add_argument("--hostile-timeout", type=float, default=2400, help="the hostile consumers phase's bound")
    parser.add_argument(
        "--lines", type=int, default=0, help="the batch faults phase also drops a .jsonl of this many lines (10000)"
    )
    parser.add_argument("--batch-faults-timeout", type=float, default=1800, help="the batch faults phase's bound")
    parser.add_argument("--only", help="comma-separated phase names (e.g. batch_faults) instead of all")
    args = parser.parse_args(argv)
    per_phase = max(2, args.jobs // (len(phases(1, long=False)) + 5))  # targeted phases x n + overwrite 2n + mixed 4n
    result = run(
        per_phase, args.seed, long=True, phase_timeout_s=args.phase_timeout, settle_s=8,
        hostile_batches=HOSTILE_BATCHES_LONG, hostile_timeout_s=args.hostile_timeout,
        only=set(args.only.split(",")) if args.only else None, batch_faults_lines=args.lines,
        batch_faults_timeout_s=args.batch_faults_timeout,
    )  # fmt: skip
    extra = (f" --lines {args.lines}" if args.lines else "") + (f" --only {args.only}" if args.only else "")
    text = report(result, f".venv-dev/bin/python bench/reliability.py --jobs {args.jobs} --seed {args.seed}{extra}")
    print(text)
    if args.out != "-":
        Path(args.out).write_text(text)
        print(f"(wrote {args.out})")
    ok = not result.violations and (result.hostile is None or result.hostile.ok)
    return 0 if ok and (result.batch_faults is None or result.batch_faults.ok) else 1


if __name__ == "__main__":
    sys.exit(main())
