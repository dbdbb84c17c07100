"""The fault-injection suite on the embedded local stack (a library): every accepted job ends in exactly one terminal
event. ``run`` runs it and returns a ``RunResult`` with the invariant's violations; two callers: bench/reliability.py
(the long run, its report docs/reliability.md: ``.venv-dev/bin/python bench/reliability.py``) and tests/reliability/
(the short run, in ``make test-scale``).

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
"""

from __future__ import annotations

import io
import json
import random
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

from bench.batch_faults import BatchFaultsResult, run_batch_faults
from bench.hostile_consumers import HostileResult, run_hostile
from bench.localstack import PROGRESS_EVENTS, EventCollector, IsolatedStack

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
ADMISSION_SETTLE_S = 60  # the healing schedule runs every local "minute" (2 s): enough for it to repair everything
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
    # per unfinished job: the log lines of the stack, its Lambda workers and its containers that name it (the last
    # TRAIL_LINES), read before the stack's home is removed: where the job stopped
    trails: dict[str, list[str]] = field(default_factory=dict)
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


TRAIL_LINES = 40


def log_trail(logs: Path, job_id: str) -> list[str]:
    """The last ``TRAIL_LINES`` lines naming ``job_id`` in the stack's log folder (every file, in name order)."""
    lines: list[str] = []
    for path in sorted(p for p in logs.rglob("*") if p.is_file()):
        with path.open(errors="replace") as handle:
            lines += [f"{path.name}: {line.rstrip()}" for line in handle if job_id in line]
    return lines[-TRAIL_LINES:]


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
            trails={job_id: log_trail(stack.home / "logs", job_id) for job_id in unfinished},
        )
    finally:
        if collector is not None:
            collector.close()
        stack.stop()
