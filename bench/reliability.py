"""Fault-injection suite on the embedded local stack: every accepted job ends in exactly one terminal event.

    .venv-dev/bin/python bench/reliability.py --jobs 250 --seed 7 [--out docs/reliability.md|-]

Starts an isolated local stack (temp OMNIREEL_HOME, free ports) with short callback timeouts
(``VideoHeartbeatSeconds``/``VideoCallbackTimeoutSeconds`` template parameters), then runs phases, each with its own
faults, submitting jobs with deterministic ids (``Idempotency-Key`` = seed + index) through the HTTP API (or the inbox
bucket) with bounded concurrency, and consuming job events through an SQS subscription to the job-events topic.

Faults: the container emulator's (``PUT /_emulator/config``: 5xx, 429, hangs, malformed output, latency) and the
local stack's own hooks (``omnireel_local/fault_injection.py``: lost and duplicate SNS notifications, duplicate S3
events, Lambda workers killed mid-step, async requests expiring in the queue). Lambda timeouts (not template
parameters) are lowered through the local Lambda API (``UpdateFunctionConfiguration``) for the hang phase.

Invariant, checked for every accepted job after the run: it is the job the user asked for (record and event carry
the submitted prompt, also when the dropped file was overwritten at once); exactly one terminal event; the job record
agrees with it
(succeeded => record succeeded, video.mp4 exists with ContentType video/mp4 and decodes, event artifact URIs = record
artifact URIs; failed => error {stage, code, message} equal in record and event, all non-empty); no event for a job
nobody submitted (a duplicate S3 event must not create a second job).

The short version (a few jobs per phase) runs in ``make test`` (tests/reliability/).
"""

from __future__ import annotations

import argparse
import io
import json
import random
import sys
import threading
import time
import zlib
from collections import Counter, defaultdict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import av

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.batch_faults import BatchFaultsResult, run_batch_faults  # noqa: E402
from bench.batch_faults import report_section as batch_faults_section  # noqa: E402
from bench.hostile_consumers import HostileResult, report_section, run_hostile  # noqa: E402
from bench.localstack import PROGRESS_EVENTS, EventCollector, IsolatedStack  # noqa: E402
from bench.report import machine, quantile, table, today  # noqa: E402

RELIABILITY_MD = REPO / "docs" / "reliability.md"
HEARTBEAT_S = 6
# The callback state (InvokeVideo) covers the render only since issue 26; 40 s as when it also covered the image.
CALLBACK_TIMEOUT_S = 40
STACK_PARAMETERS = {
    "VideoHeartbeatSeconds": str(HEARTBEAT_S),
    "VideoCallbackTimeoutSeconds": str(CALLBACK_TIMEOUT_S),
    "VideoMaxConcurrentInvocationsPerInstance": "2",
    # The hostile-consumers phase's receivers recover after two bad attempts: 1 s, 2 s, ... between attempts.
    "WebhookRetryBaseSeconds": "1",
}
# The hostile-consumers phase (bench/hostile_consumers.py): its batches, as (label, jobs, every field at its maximum).
HOSTILE_BATCHES_SHORT = (("small", 3, False),)
HOSTILE_BATCHES_LONG = (("small", 3, False), ("2 MB", 250, True), ("maximum", 1000, True))
BASE_EMULATOR = {"images": {"latency_s": 0.05}, "videos": {"latency_s": 0.1}}
MALFORMED = {"malformed_rate": 0.6}
# GenerateImage (also stages the video request), InvokeVideo (queues it; a retry must not render twice), AsyncResult
# (publishes job.succeeded), PublishEvent (failures)
CRASH_TARGETS = ("GenerateImage", "InvokeVideo", "AsyncResult", "PublishEvent", "Inbox")
# The admission phase (issue 34): the stage that takes its slot itself, and the wait for a slot.
ADMISSION_TARGETS = ("GenerateImage", "WaitForSlot")
ADMISSION_SETTLE_S = 60  # the healing schedule runs every local "minute" (1 s): enough for it to repair everything
# Before a phase: how long to wait for the containers to finish what the previous phase left (a 20 s hang + the
# requests waiting behind it, given up by InvokeEndpoint's 60 s): _wait_until_idle.
IDLE_TIMEOUT_S = 90


@dataclass
class Phase:
    name: str
    description: str
    jobs: int
    emulator: dict[str, dict[str, Any]] = field(default_factory=dict)
    platform: dict[str, Any] = field(default_factory=dict)
    functions: dict[str, dict[str, Any]] = field(default_factory=dict)  # logical -> UpdateFunctionConfiguration
    via: str = "api"  # api | s3 | overwrite (each file uploaded twice at once, two versions: two jobs)
    concurrency: int = 6
    burst: bool = False  # submit all jobs at once (queue expiry)
    # The same Idempotency-Key again after the job's record expired (DynamoDB TTL, simulated by deleting the item
    # once the first terminal event arrived): a second record of the same job id, which must run and end again.
    reuse_after_expiry: bool = False
    # The video endpoint's instance count during the phase (UpdateEndpointWeightsAndCapacities), back to 1 after it.
    # 0: scaled to zero and not scaled out in time (the local stack has no Application Auto Scaling): admission's
    # bounded backlog (one request per per-instance slot, docs/capacity.md) waits in SageMaker's queue until its TTL.
    # Since issue 34 this is how a request still expires in the queue: admission never sends more than the capacity.
    video_instances: int | None = None


def phases(scale: int, long: bool) -> list[Phase]:
    """``scale`` jobs per targeted phase; the long run adds a mixed phase with every fault at once."""
    n = scale
    # "first": each target's first invocation in the phase crashes too, so even 3 jobs are sure to see a crash. The
    # rate alone left none in one run seen (the draws depend on the job ids, which differ per stack; with ~6 draws at
    # 0.3, an estimated one run in ten).
    crash = {name: {"rate": 0.3, "after_s": 0.15, "first": True} for name in CRASH_TARGETS}
    out = [
        Phase("image_5xx", "image container answers 500 (rate 0.5)", n, {"images": {"error_rate": 0.5}}),
        Phase("image_429", "image container throttles, 429 (rate 0.5)", n, {"images": {"throttle_rate": 0.5}}),
        Phase(
            "image_hang",
            "image container hangs 20 s (rate 0.6); GenerateImage Lambda timeout lowered to 3 s",
            n,
            {"images": {"hang_rate": 0.6, "hang_max_s": 20}},
            functions={"GenerateImageFunction": {"Timeout": 3}},
        ),
        Phase("video_error", "video container fails (rate 0.5) -> error topic", n, {"videos": {"error_rate": 0.5}}),
        Phase(
            "sns_lost",
            f"async notification dropped (rate 0.5; video errors 0.3); reconcile after {HEARTBEAT_S} s heartbeat",
            n,
            {"videos": {"error_rate": 0.3}},
            {"sns_drop_rate": 0.5},
        ),
        Phase("sns_duplicate", "async notification published twice (rate 0.7)", n, {}, {"sns_duplicate_rate": 0.7}),
        Phase(
            "s3_duplicate",
            "S3 ObjectCreated delivered twice (rate 0.7), jobs via inbox",
            n,
            platform={"s3_event_duplicate_rate": 0.7},
            via="s3",
        ),
        Phase(
            "overwrite",
            "each prompt file uploaded twice at once to the same key (two versions, two jobs), jobs via inbox",
            n,
            via="overwrite",
        ),
        Phase(
            "lambda_crash",
            "Lambda worker SIGKILLed 0.15 s into the step (each step function's first invocation, then rate 0.3)",
            n,
            platform={"lambda_crash": crash},
        ),
        Phase(
            "queue_expiry",
            "video endpoint scaled to zero and not scaled out in time; RequestTTL capped at 0.5 s, burst submit",
            max(6, n),
            {"videos": {"latency_s": 2.0}},
            {"request_ttl_cap_s": 0.5},
            burst=True,
            video_instances=0,
        ),
        Phase(
            "ttl_reuse",
            "each key submitted, finished, its record deleted (TTL expiry), then submitted again: 2 records per job id",
            n,
            reuse_after_expiry=True,
        ),
        Phase(
            "missing_output",
            "video requests expire in the queue (endpoint at zero instances, TTL 0.5 s) and every notification "
            "is lost: ReconcileVideo heads an output that does not exist (S3 answers 403 without s3:ListBucket, "
            "404 with it)",
            max(4, n),
            {"videos": {"latency_s": 2.0}},
            {"request_ttl_cap_s": 0.5, "sns_drop_rate": 1.0},
            burst=True,
            video_instances=0,
        ),
        Phase(
            "admission",
            "issue 34: a burst on the image endpoint's one slot (0.5 s an image); GenerateImage and WaitForSlot "
            "SIGKILLed 0.15 s in (each first, then rate 0.3): crashes after a grant, lost releases, retried waits; "
            "afterwards no slot or waiting entry may be left (the healing schedule)",
            max(6, 2 * n),
            {"images": {"latency_s": 0.5}},
            {"lambda_crash": {name: {"rate": 0.3, "after_s": 0.15, "first": True} for name in ADMISSION_TARGETS}},
            burst=True,
        ),
        Phase("malformed_image", "image container returns non-PNG bytes (rate 0.6)", n, {"images": MALFORMED}),
        Phase("malformed_video", "video container returns a truncated MP4 (rate 0.6)", n, {"videos": MALFORMED}),
    ]
    if long:
        out.append(
            Phase(
                "mixed",
                "every fault at once at low rates",
                n * 4,
                {
                    "images": {
                        "error_rate": 0.1,
                        "throttle_rate": 0.1,
                        "hang_rate": 0.03,
                        "hang_max_s": 20,
                        "malformed_rate": 0.03,
                    },
                    "videos": {"error_rate": 0.05, "malformed_rate": 0.03},
                },
                {
                    "sns_drop_rate": 0.05,
                    "sns_duplicate_rate": 0.1,
                    "s3_event_duplicate_rate": 0.3,
                    "lambda_crash": {name: {"rate": 0.05, "after_s": 0.15} for name in CRASH_TARGETS},
                },
                functions={"GenerateImageFunction": {"Timeout": 3}},
                via="mixed",
            )
        )
    return out


def job_request(rng: random.Random, index: int) -> dict[str, Any]:
    return {
        "prompt": f"reliability job {index}: a {rng.choice(['red', 'blue', 'green'])} kite over a hill",
        "seed": rng.randrange(2**31),
        "image": {"size": "512x512", "num_inference_steps": 2},
        "video": {"num_frames": 5, "width": 256, "height": 192, "num_inference_steps": 2},
    }


@dataclass
class Job:
    job_id: str
    phase: str
    via: str
    submitted_at: float
    key: str
    prompt: str  # what the user submitted: the job must run exactly this
    records: int = 1  # ttl_reuse: the key made this many records (one terminal event each)


@dataclass
class RunResult:
    seed: int
    jobs: dict[str, Job]
    events: list[Any]
    injected: list[dict[str, Any]]
    emulator_outcomes: dict[str, dict[str, Counter[str]]]
    violations: list[dict[str, Any]]
    records: dict[str, dict[str, Any]]
    phase_seconds: dict[str, float]
    wall_s: float
    unfinished: list[str]
    hostile: HostileResult | None = None
    batch_faults: BatchFaultsResult | None = None  # the "slow DNS / BatchSubmit crashes and timeouts" phase

    def by_phase(self, name: str) -> list[Job]:
        return [j for j in self.jobs.values() if j.phase == name]

    def violations_in(self, phases_: set[str]) -> list[dict[str, Any]]:
        return [v for v in self.violations if v.get("phase") in phases_]


def _decodes(data: bytes) -> tuple[bool, str]:
    try:
        with av.open(io.BytesIO(data)) as container:
            frames = sum(1 for _ in container.decode(container.streams.video[0]))
        return frames > 0, f"{frames} frames"
    except Exception as exc:
        return False, f"{type(exc).__name__}: {exc}"


def check_job(stack: IsolatedStack, job: Job, events: list[Any]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Invariant for one accepted job; returns (violations, record)."""
    problems: list[dict[str, Any]] = []

    def bad(kind: str, detail: str) -> None:
        problems.append({"job_id": job.job_id, "phase": job.phase, "kind": kind, "detail": detail})

    record = stack.job(job.job_id)
    if (record.get("request") or {}).get("prompt") != job.prompt:
        bad("wrong_prompt", f"record prompt {(record.get('request') or {}).get('prompt')!r}, submitted {job.prompt!r}")
    if not events:
        bad("lost", f"no terminal event; record status {record['status']}")
        return problems, record
    if job.records > 1:  # one terminal event per record; the checks below compare the current record with its own
        order = list(dict.fromkeys(e.event["event_id"] for e in events))
        if len(order) != job.records:
            bad("events_per_record", f"{len(order)} distinct terminal events for {job.records} records of the key")
            return problems, record
        events = [e for e in events if e.event["event_id"] == order[-1]]
    # SNS delivery is at-least-once: the contract is one terminal event per job *per event_id*; consumers
    # de-duplicate redeliveries on event_id. Two different event_ids, or copies that differ, break the invariant.
    ids = {e.event["event_id"] for e in events}
    if len(ids) > 1:
        bad("duplicate_event", f"{len(events)} terminal events with {len(ids)} distinct event_ids")
    elif len({json.dumps({k: v for k, v in e.event.items() if k != "artifacts"}, sort_keys=True) for e in events}) > 1:
        bad("inconsistent_redelivery", f"{len(events)} deliveries of {ids.pop()} differ")
    event = events[0].event
    if event.get("prompt") != job.prompt:
        bad("wrong_prompt", f"event prompt {event.get('prompt')!r}, submitted {job.prompt!r}")
    if event["status"] != record["status"]:
        bad("status_mismatch", f"event {event['status']} vs record {record['status']}")
    if event["event_type"] != f"job.{event['status']}":
        bad("event_type", f"{event['event_type']} with status {event['status']}")
    record_uris = {k: v["s3_uri"] for k, v in (record.get("artifacts") or {}).items()}
    event_uris = {k: v["s3_uri"] for k, v in (event.get("artifacts") or {}).items() if v}
    if event["status"] == "succeeded":
        if record_uris != event_uris:
            bad("artifacts_mismatch", f"event {event_uris} vs record {record_uris}")
        uri = record_uris.get("video")
        if not uri:
            bad("no_video", "succeeded without a video artifact")
        else:
            bucket, _, key = uri[5:].partition("/")
            s3 = stack.client("s3")
            try:
                head = s3.head_object(Bucket=bucket, Key=key)
                if head.get("ContentType") != "video/mp4":
                    bad("content_type", f"video.mp4 ContentType {head.get('ContentType')}")
                ok, why = _decodes(s3.get_object(Bucket=bucket, Key=key)["Body"].read())
                if not ok:
                    bad("video_does_not_decode", why)
            except Exception as exc:
                bad("video_missing", f"{uri}: {exc}")
        if record.get("error"):
            bad("error_on_success", json.dumps(record["error"]))
    else:
        error_event, error_record = event.get("error"), record.get("error")
        if error_event != error_record:
            bad("error_mismatch", f"event {error_event} vs record {error_record}")
        if not error_event or not all(error_event.get(k) for k in ("stage", "code", "message")):
            bad("error_incomplete", json.dumps(error_event))
    return problems, record


def check_admission(stack: IsolatedStack) -> list[dict[str, Any]]:
    """After the admission phase (its jobs all ended): within ADMISSION_SETTLE_S no holder and no waiting entry is left
    in AdmissionTable and every pool counts 0 in use and 0 waiting (nothing leaked after the healing schedule). No
    double grant is checked where it can be seen: the grant transactions' conditions, under threads and faults
    (tests/integration/pipeline/test_admission_grants.py, test_admission_faults.py); here a SIGKILLed GenerateImage
    leaves its request running in the container, as on AWS, so the container's concurrency does not show it."""
    problems: list[dict[str, Any]] = []
    table = stack.state["provisioned"]["resources"]["AdmissionTable"]["id"]
    ddb = stack.client("dynamodb")

    def left() -> list[str]:
        items = ddb.scan(TableName=table, ConsistentRead=True).get("Items", [])
        held = [f"{i['pk']['S']}/{i['sk']['S']}" for i in items if not i["pk"]["S"].startswith("POOL#")]
        counts = [
            f"{i['pk']['S']} in_use={i['in_use']['N']} waiting={i['waiting']['N']}"
            for i in items
            if i["pk"]["S"].startswith("POOL#") and (i["in_use"]["N"] != "0" or i["waiting"]["N"] != "0")
        ]
        return held + counts

    deadline = time.monotonic() + ADMISSION_SETTLE_S
    while (remaining := left()) and time.monotonic() < deadline:
        time.sleep(1)
    if remaining:
        problems.append({"job_id": "-", "phase": "admission", "kind": "slot_leaked", "detail": "; ".join(remaining)})
    return problems


def _expire_when_done(stack: IsolatedStack, collector: EventCollector, job_id: str, deadline: float) -> bool:
    """Wait (bounded) for the job's terminal event, then delete its record as DynamoDB TTL does after JobTtlDays.

    False if no terminal event came by ``deadline`` (the record is kept; the job is then reported unfinished)."""
    while not collector.terminal(job_id):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    table = stack.state["provisioned"]["resources"]["JobsTable"]["id"]
    stack.client("dynamodb").delete_item(TableName=table, Key={"job_id": {"S": job_id}})
    return True


def _wait_until_idle(stack: IsolatedStack, log: Callable[[str], None]) -> None:
    """A phase starts with idle containers (bounded by IDLE_TIMEOUT_S). The containers serve their capacity only
    (issue 34 item 9), so the image_hang phase leaves work behind, as on AWS: a hung request holds its instance until
    the hang ends, and the requests the timed-out GenerateImage attempts sent wait in the container until
    InvokeEndpoint's 60 s give them up. Without this wait that backlog would fall on the next phase's jobs."""
    deadline = time.monotonic() + IDLE_TIMEOUT_S
    while True:
        busy = {
            kind: stats
            for kind in ("images", "videos")
            if (stats := stack.emulator_stats(kind).get("concurrency", {}).get(kind, {}))
            and (stats.get("in_flight") or stats.get("waiting"))
        }
        if not busy:
            return
        if time.monotonic() > deadline:
            log(f"containers still busy after {IDLE_TIMEOUT_S:.0f} s: {busy}")
            return
        time.sleep(0.5)


def _scale_video(stack: IsolatedStack, instances: int) -> None:
    """The video endpoint's instance count, as Application Auto Scaling (or an operator) sets it."""
    sagemaker = stack.client("sagemaker")
    name = stack.output("VideoEndpointName")
    variant = sagemaker.describe_endpoint(EndpointName=name)["ProductionVariants"][0]
    if variant.get("CurrentInstanceCount") == instances:
        return
    sagemaker.update_endpoint_weights_and_capacities(
        EndpointName=name,
        DesiredWeightsAndCapacities=[
            {"VariantName": variant["VariantName"], "DesiredWeight": 1.0, "DesiredInstanceCount": instances}
        ],
    )


def _apply_phase(stack: IsolatedStack, phase: Phase, seed: int, originals: dict[str, dict[str, Any]]) -> None:
    _scale_video(stack, 1 if phase.video_instances is None else phase.video_instances)
    for kind in ("images", "videos"):
        faults = {**BASE_EMULATOR[kind], **phase.emulator.get(kind, {})}
        stack.emulator(kind, {"faults": {kind: None}})
        # a distinct seed per phase: the emulator reseeds on a seed change, so each phase's draws are reproducible
        stack.emulator(kind, {"seed": seed * 1000 + zlib.crc32(phase.name.encode()) % 1000, "faults": {kind: faults}})
    stack.platform_faults({"seed": seed, **phase.platform} if phase.platform else {})
    for logical in set(originals) | set(phase.functions):
        wanted = {**originals.get(logical, {}), **phase.functions.get(logical, {})}
        if logical not in originals:
            config = stack.client("lambda").get_function_configuration(FunctionName=stack.function_name(logical))
            originals[logical] = {key: config[key] for key in phase.functions[logical]}
            wanted = phase.functions[logical]
        stack.update_function(logical, **wanted)


def run(
    jobs_per_phase: int,
    seed: int,
    long: bool = False,
    only: set[str] | None = None,
    phase_timeout_s: float = 60,
    settle_s: float = 4,
    log: Callable[[str], None] = print,
    hostile_batches: tuple[tuple[str, int, bool], ...] | None = HOSTILE_BATCHES_SHORT,
    hostile_timeout_s: float = 240,
    batch_faults: bool = True,
    batch_faults_lines: int = 0,
    batch_faults_timeout_s: float = 600,
) -> RunResult:
    """The job phases, then (unless ``hostile_batches`` is None or ``only`` leaves it out) the hostile consumers, then
    (unless ``batch_faults`` is False or ``only`` leaves it out) slow DNS and BatchSubmit crashes and timeouts
    (``batch_faults_lines``: one more drop of that many lines, e.g. the issue's 10,000)."""
    started = time.monotonic()
    rng = random.Random(seed)
    selected = [p for p in phases(jobs_per_phase, long) if only is None or p.name in only]
    stack = IsolatedStack(STACK_PARAMETERS, name="reliability").start()
    collector: EventCollector | None = None
    try:
        collector = EventCollector(stack)
        jobs: dict[str, Job] = {}
        phase_seconds: dict[str, float] = {}
        emulator_outcomes: dict[str, dict[str, Counter[str]]] = {}
        originals: dict[str, dict[str, Any]] = {}
        index = 0
        unfinished: list[str] = []
        admission_violations: list[dict[str, Any]] = []
        for phase in selected:
            _apply_phase(stack, phase, seed, originals)
            _wait_until_idle(stack, log)
            for kind in ("images", "videos"):
                stack.emulator_stats(kind, reset=True)
            t0 = time.monotonic()
            deadline = t0 + phase_timeout_s * (2 if phase.reuse_after_expiry else 1)  # two runs per job, in turn
            phase_jobs: list[str] = []
            lock = threading.Lock()

            def submit_one(
                i: int,
                request: dict[str, Any],
                phase: Phase = phase,
                lock: threading.Lock = lock,
                phase_jobs: list[str] = phase_jobs,
                deadline: float = deadline,
                events: EventCollector = collector,
            ) -> None:
                via = phase.via if phase.via != "mixed" else ("s3" if i % 4 == 0 else "api")
                key = f"rel-{seed}-{i}"
                requests = [request]
                records = 1
                if via == "overwrite":
                    requests.append({**request, "prompt": f"{request['prompt']} (second upload)"})
                    submitted_at = time.time()
                    ids = stack.drop_versions(requests, key)
                elif via == "s3":
                    submitted_at, ids = time.time(), [stack.drop(request, key)]
                else:
                    submitted_at, ids = time.time(), [stack.submit(request, key)]
                    if phase.reuse_after_expiry and _expire_when_done(stack, events, ids[0], deadline):
                        assert stack.submit(request, key) == ids[0]  # same key + caller: same job id, new record
                        records = 2
                with lock:
                    for job_id, sent in zip(ids, requests, strict=True):
                        jobs[job_id] = Job(job_id, phase.name, via, submitted_at, key, sent["prompt"], records)
                        phase_jobs.append(job_id)

            def pending(ids: list[str], events: EventCollector = collector) -> list[str]:
                return [j for j in ids if len({r.event["event_id"] for r in events.terminal(j)}) < jobs[j].records]

            with ThreadPoolExecutor(max_workers=8) as pool:
                futures = []
                for _ in range(phase.jobs):
                    # keep at most `concurrency` jobs in flight (submitting or not yet terminal)
                    while not phase.burst and time.monotonic() < deadline:
                        with lock:
                            in_flight = len(pending(phase_jobs)) + sum(1 for f in futures if not f.done())
                        if in_flight < phase.concurrency:
                            break
                        time.sleep(0.05)
                    futures.append(pool.submit(submit_one, index, job_request(rng, index)))
                    index += 1
                for future in futures:
                    future.result()
            while pending(phase_jobs) and time.monotonic() < deadline:
                time.sleep(0.1)
            left = pending(phase_jobs)
            unfinished += left
            phase_seconds[phase.name] = time.monotonic() - t0
            emulator_outcomes[phase.name] = {
                kind: Counter(stack.emulator_stats(kind)["routes"].get(kind, {})) for kind in ("images", "videos")
            }
            log(f"phase {phase.name}: {len(phase_jobs)} jobs in {phase_seconds[phase.name]:.1f} s, {len(left)} open")
            if phase.name == "admission":
                admission_violations += check_admission(stack)
        _apply_phase(stack, Phase("off", "", 0), seed, originals)
        hostile = None
        if hostile_batches is not None and (only is None or "hostile_consumers" in only):
            t0 = time.monotonic()
            hostile = run_hostile(
                stack, collector, jobs_per_receiver=max(1, jobs_per_phase // 3), batch_sizes=hostile_batches,
                timeout_s=hostile_timeout_s, log=log,
            )  # fmt: skip
            phase_seconds["hostile_consumers"] = time.monotonic() - t0
            log(f"phase hostile_consumers: {len(hostile.jobs)} jobs, {len(hostile.batches)} batches, ok={hostile.ok}")
        faults = None
        if batch_faults and (only is None or "batch_faults" in only):
            t0 = time.monotonic()
            faults = run_batch_faults(
                stack, collector, drop_lines=batch_faults_lines, timeout_s=batch_faults_timeout_s, log=log
            )
            phase_seconds["batch_faults"] = time.monotonic() - t0
            log(f"phase batch_faults: {len(faults.batches)} batches, {faults.lines} lines, ok={faults.ok}")
        time.sleep(settle_s)  # late duplicates (async retries, re-published events) arrive here
        collector.close()
        per_job: dict[str, list[Any]] = defaultdict(list)
        for received in collector.received:
            if received.event.get("event_type") in PROGRESS_EVENTS:  # not terminal: job.image_ready
                continue
            per_job[received.event.get("job_id")].append(received)
        violations: list[dict[str, Any]] = list(admission_violations)
        records: dict[str, dict[str, Any]] = {}
        for job in jobs.values():  # the job phases' jobs (the hostile phase checks its own: HostileResult)
            problems, record = check_job(stack, job, per_job.get(job.job_id, []))
            violations += problems
            records[job.job_id] = record
        injected = stack.injected()
        for violation in violations:  # which stack-hook faults hit this job (e.g. the crashed function)
            hits = [
                f"{f['kind']}:{f['key'].rsplit('-', 1)[-1] if f['kind'] == 'lambda_crash' else ''}"
                for f in injected
                if violation["job_id"] in (f.get("job_id"), f.get("key"))
            ]
            if hits:
                violation["detail"] += f"; faults on this job: {', '.join(hits)}"
        theirs = set(hostile.jobs) if hostile else set()
        batch_jobs = {  # the hostile phase's batch jobs: accounted for by their batch (HostileResult.batch_events)
            r.event.get("job_id") for r in collector.received if isinstance(r.event.get("batch"), dict)
        }
        for job_id in set(per_job) - set(jobs) - theirs - batch_jobs - {None}:  # None: batch.completed
            detail = "terminal event for a job nobody submitted"
            violations.append({"job_id": job_id, "phase": "?", "kind": "unexpected_job", "detail": detail})
        return RunResult(
            seed=seed,
            jobs=jobs,
            # terminal events only: job.image_ready is a progress event (counted as a terminal one before)
            events=[r for r in collector.received if r.event.get("event_type") not in PROGRESS_EVENTS],
            injected=injected,
            emulator_outcomes=emulator_outcomes,
            violations=violations,
            records=records,
            phase_seconds=phase_seconds,
            wall_s=time.monotonic() - started,
            unfinished=unfinished,
            batch_faults=faults,
            hostile=hostile,
        )
    finally:
        if collector is not None:
            collector.close()
        stack.stop()


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
   fails the job with `MalformedModelOutput` (unit tests in `tests/unit/domain/test_media.py`).
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
   keeps that list and the code in step (`tests/unit/domain/test_state_machine_rules.py`). This run also showed that
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
