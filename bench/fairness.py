"""Fair share at the GPUs (issue 34 item 2): caller B's wait while caller A has a deep queue, against first come,
first served (FCFS) on the same run; and each endpoint's slot utilisation while its queue is non-empty.

    .venv-dev/bin/python bench/fairness.py [--a-jobs 30] [--b-jobs 6] [--b-every 12] [--scale 1] [--out FILE|-]

One isolated local stack at the template's default capacity (one image slot, one video slot: one instance each,
``ImageConcurrencyPerInstance`` 1, ``VideoMaxConcurrentInvocationsPerInstance`` 1), the emulators at the AWS sample's
model times x ``--scale`` (4.7 s an image, 8.9 s a video). Caller A (the developer) submits ``--a-jobs`` jobs at once
through the front door; once they are all parked or running, from 5 s later caller B (a second IAM identity) submits
one job every ``--b-every`` seconds (default: B's own demand stays below its fair share), ``--b-jobs`` in all, each
arriving while A's jobs wait. Every job runs to its terminal event.

Measured (from each job record's ``stage_times``): a job's **start wait** (accepted -> its image call starts:
``generating_image``) and its **end to end** (accepted -> ``succeeded``).

FCFS, same run: the jobs' own arrival times and their own measured occupancy of each slot (image: the image call;
video: the async render) replayed through the same slots in arrival order (video in order of image completion), with
the run's own staging time per job and the run's median slot hand-over (a freed slot -> the next waiting job running:
dispatch, SendTaskSuccess, the state machine resuming, the Lambda invoke). The same work on the same capacity; only
the order differs.

Slot utilisation: the admission pools' ``in_use`` / ``capacity`` and ``waiting`` (``AdmissionTable``), sampled every
``--sample-every`` s; utilisation = mean of in_use / capacity over the samples where that endpoint's queue was
non-empty (target >= 95 % at ``--scale 1``). The container's own busy share over the same samples (from the
emulators' per-request service times) is reported beside it: a slot is held from its grant, the container works from
the request's arrival, and the difference is the hand-over.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from statistics import median
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO)]

from bench.capacity import IMAGE_MODEL_S, VIDEO_MODEL_S  # noqa: E402
from bench.hostile_consumers import Caller, _developer, _second_caller  # noqa: E402
from bench.localstack import LONG_TIMEOUTS, IsolatedStack, configure_model_times  # noqa: E402
from bench.report import emit, machine, quantile, table, today  # noqa: E402

KINDS = ("image", "video")
EMULATOR_ROUTE = {"image": "images", "video": "videos"}
TERMINAL = {"succeeded", "failed", "cancelled", "expired"}
UTILISATION_TARGET = 0.95


@dataclass
class JobTimes:
    """One job's measured times (epoch seconds) from its record."""

    job_id: str
    caller: str
    accepted: float
    image_start: float
    image_end: float
    video_queued: float  # when it was ready for its video slot (waiting or not)
    video_start: float
    end: float
    status: str

    @property
    def start_wait(self) -> float:
        return self.image_start - self.accepted

    @property
    def end_to_end(self) -> float:
        return self.end - self.accepted


def _epoch(value: str) -> float:
    return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()


def job_times(job_id: str, caller: str, record: dict[str, Any]) -> JobTimes | None:
    """The times of a job that ran both stages (None for one that did not, e.g. failed before its image)."""
    stages = record.get("stage_times") or {}
    needed = ("accepted", "generating_image", "staging_video", "rendering_video")
    end = stages.get(record.get("status", ""))
    if not all(stages.get(k) for k in needed) or not end:
        return None
    video_start = _epoch(stages["rendering_video"])
    return JobTimes(
        job_id=job_id,
        caller=caller,
        accepted=_epoch(stages["accepted"]),
        image_start=_epoch(stages["generating_image"]),
        image_end=_epoch(stages["staging_video"]),
        # a job admitted to video at once was ready when it started; one that waited, from queued_video_at
        video_queued=_epoch(record["queued_video_at"]) if record.get("queued_video_at") else video_start,
        video_start=video_start,
        end=_epoch(end),
        status=record["status"],
    )


def handover(starts_and_ends: list[tuple[float, float, float]]) -> float:
    """The median time from a freed slot to the next waiting job running: over jobs that arrived before the slot
    they got was free ((arrival, start, end) triples of one one-slot stage), start minus the latest end before it."""
    gaps = []
    ends = sorted(end for _, _, end in starts_and_ends)
    for arrival, start, _ in starts_and_ends:
        before = [e for e in ends if e <= start]
        if before and arrival < before[-1]:  # it was waiting when that slot was freed
            gaps.append(start - before[-1])
    return median(gaps) if gaps else 0.0


def simulate_fcfs(jobs: list[JobTimes], image_slots: int, video_slots: int) -> dict[str, tuple[float, float]]:
    """(start wait, end to end) per job id had both stages served first come, first served: each job keeps its own
    image and video occupancy and its own staging time; a job that finds no free slot starts one hand-over (the
    run's median) after the slot is freed."""
    image_handover = handover([(j.accepted, j.image_start, j.image_end) for j in jobs])
    video_handover = handover([(j.video_queued, j.video_start, j.end) for j in jobs])
    image_free = [min(j.accepted for j in jobs)] * image_slots
    ready: list[tuple[float, JobTimes, float]] = []  # (ready for video, job, image start)
    for job in sorted(jobs, key=lambda j: (j.accepted, j.job_id)):
        slot = min(range(image_slots), key=lambda i: image_free[i])
        start = job.accepted if image_free[slot] <= job.accepted else image_free[slot] + image_handover
        image_free[slot] = start + (job.image_end - job.image_start)
        staging = job.video_queued - job.image_end
        ready.append((image_free[slot] + staging, job, start))
    video_free = [min(r for r, _, _ in ready)] * video_slots
    out: dict[str, tuple[float, float]] = {}
    for at, job, image_start in sorted(ready, key=lambda r: (r[0], r[1].job_id)):
        slot = min(range(video_slots), key=lambda i: video_free[i])
        start = at if video_free[slot] <= at else video_free[slot] + video_handover
        video_free[slot] = start + (job.end - job.video_start)
        out[job.job_id] = (image_start - job.accepted, video_free[slot] - job.accepted)
    return out


@dataclass
class Sample:
    t: float
    pools: dict[str, tuple[int, int, int]]  # kind -> (in_use, capacity, waiting)


def utilisation(samples: list[Sample], kind: str) -> tuple[float | None, int]:
    """Mean in_use / capacity over the samples where the kind's queue was non-empty; and how many there were."""
    shares = [
        min(s.pools[kind][0], s.pools[kind][1]) / s.pools[kind][1]
        for s in samples
        if kind in s.pools and s.pools[kind][2] > 0 and s.pools[kind][1] > 0
    ]
    return (sum(shares) / len(shares) if shares else None), len(shares)


def container_busy(samples: list[Sample], kind: str, intervals: list[tuple[float, float]]) -> float | None:
    """The container's busy share (requests in service / capacity, at most 1) over the same samples."""
    shares = []
    for s in samples:
        if kind not in s.pools or s.pools[kind][2] <= 0 or s.pools[kind][1] <= 0:
            continue
        serving = sum(1 for a, b in intervals if a <= s.t < b)
        shares.append(min(serving, s.pools[kind][1]) / s.pools[kind][1])
    return sum(shares) / len(shares) if shares else None


@dataclass
class PoolSampler:
    """Reads both pool items of ``AdmissionTable`` every ``every_s`` seconds on a thread (the developer may read
    the stack's tables)."""

    stack: IsolatedStack
    every_s: float
    samples: list[Sample] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._stop = threading.Event()
        self._table = self.stack.state["provisioned"]["resources"]["AdmissionTable"]["id"]
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        ddb = self.stack.client("dynamodb")
        while not self._stop.is_set():
            t = time.time()
            pools = {}
            for kind in KINDS:
                item = ddb.get_item(
                    TableName=self._table, Key={"pk": {"S": f"POOL#{kind}"}, "sk": {"S": "POOL"}}, ConsistentRead=True
                ).get("Item")
                if item:
                    pools[kind] = tuple(int(item.get(k, {"N": "0"})["N"]) for k in ("in_use", "capacity", "waiting"))
            self.samples.append(Sample(t, pools))  # type: ignore[arg-type]
            self._stop.wait(self.every_s)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)


class Records:
    """Job records as stored (the jobs table; the developer may read the stack's tables): every caller's jobs, with
    the admission times the API view leaves out (``queued_video_at``)."""

    def __init__(self, stack: IsolatedStack):
        from boto3.dynamodb.types import TypeDeserializer

        self._ddb = stack.client("dynamodb")
        self._table = stack.state["provisioned"]["resources"]["JobsTable"]["id"]
        self._plain = TypeDeserializer()

    def get(self, job_id: str) -> dict[str, Any]:
        item = self._ddb.get_item(TableName=self._table, Key={"job_id": {"S": job_id}}, ConsistentRead=True)["Item"]
        return {k: _plain(self._plain.deserialize(v)) for k, v in item.items()}


def _plain(value: Any) -> Any:
    """Decimals (DynamoDB numbers) as floats, recursively."""
    from decimal import Decimal

    if isinstance(value, Decimal):
        return float(value)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def request(caller: str, index: int) -> dict[str, Any]:
    """Small media (the emulators' own PNG / H.264 work stays small); the model time is the latency hook's."""
    return {
        "prompt": f"fairness {caller}{index}: a kite over a hill",
        "seed": 1000 + index,
        "image": {"size": "512x512", "num_inference_steps": 2},
        "video": {"num_frames": 5, "width": 256, "height": 192, "num_inference_steps": 2},
    }


def submit(caller: Caller, body: dict[str, Any], key: str) -> str:
    response = caller.api("POST", "/jobs", body, {"Idempotency-Key": key})
    if response.status_code != 202:
        raise RuntimeError(f"caller {caller.name}: POST /jobs answered {response.status_code}: {response.text[:300]}")
    return str(response.json()["job_id"])


def default_b_every(scale: float) -> float:
    """B's default arrival interval: three video model times (at least 4 s). With two callers B's fair share is every
    other video slot, one per two turnovers; B arriving faster than that would queue behind its own jobs, and its wait
    would measure its own backlog, not admission's fairness (a 12 s interval at real model times did: 0.74 of the
    video slot against a fair share of 0.5, B's video wait growing by ~4 s a job)."""
    return round(max(4.0, 3 * VIDEO_MODEL_S * scale), 1)


def p50_p90(values: list[float]) -> tuple[str, str]:
    return f"{quantile(values, 0.5):.1f}", f"{quantile(values, 0.9):.1f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--a-jobs", type=int, default=30, help="caller A's burst")
    parser.add_argument("--b-jobs", type=int, default=6, help="caller B's jobs, one every --b-every seconds")
    parser.add_argument(
        "--b-every",
        type=float,
        default=None,
        help="B's arrival interval, seconds (default: 3 video model times, at least 4 s: B's own demand stays "
        "below its fair share of the video slot, so each of B's jobs meets an empty queue of its own)",
    )
    parser.add_argument("--scale", type=float, default=1.0, help="model time = the AWS sample's times x scale")
    parser.add_argument("--sample-every", type=float, default=0.25, help="pool sampling period, seconds")
    parser.add_argument("--timeout", type=float, default=1800, help="bound on the whole run, seconds")
    parser.add_argument("--out", default=None, help="default docs/benchmarks.md; '-' = print only")
    parser.add_argument("--section", default="fairness", help="the docs/benchmarks.md section it writes")
    parser.add_argument("--records", default=None, help="also write each job's caller and record (JSON) to this file")
    args = parser.parse_args(argv)
    if args.b_every is None:
        args.b_every = default_b_every(args.scale)
    began = time.monotonic()
    sampler: PoolSampler | None = None
    stack = IsolatedStack({**LONG_TIMEOUTS, "CallerMaxPendingJobs": str(max(100, 2 * args.a_jobs))}, name="fairness")
    stack.start()
    try:
        configure_model_times(stack, args.scale)
        a, b = _developer(stack), _second_caller(stack)
        stored = Records(stack)
        run = f"{int(time.time())}"
        # one job of each caller first: the pools exist and the function workers are warm before the run
        warm = [
            submit(a, request("warm-a", 0), f"fair-{run}-warm-a"),
            submit(b, request("warm-b", 0), f"fair-{run}-warm-b"),
        ]
        warm_deadline = time.monotonic() + 300
        while time.monotonic() < warm_deadline and any(stored.get(j)["status"] not in TERMINAL for j in warm):
            time.sleep(1)  # polling the warm-up jobs' records, bounded
        jobs: dict[str, str] = {}
        for kind in EMULATOR_ROUTE.values():
            stack.emulator_stats(kind, reset=True)
        sampler = PoolSampler(stack, args.sample_every)
        with ThreadPoolExecutor(max_workers=8) as pool:
            for job_id in pool.map(lambda i: submit(a, request("a", i), f"fair-{run}-a{i}"), range(args.a_jobs)):
                jobs[job_id] = "A"
        # B arrives while A's jobs wait: once every one of them is parked in the queue or running, so B's jobs are
        # not measured behind the local stack starting A's burst (hundreds of executions' first steps on 2 CPUs;
        # on AWS, Lambda and Step Functions scale out for that)
        parked_deadline = time.monotonic() + 600
        while time.monotonic() < parked_deadline and any(stored.get(j)["status"] == "accepted" for j in jobs):
            time.sleep(1)  # polling A's job records, bounded
        t0 = time.time()
        for i in range(args.b_jobs):
            wake = t0 + 5 + i * args.b_every
            time.sleep(max(0.0, wake - time.time()))  # B's arrival schedule (the workload, not a wait for a result)
            jobs[submit(b, request("b", i), f"fair-{run}-b{i}")] = "B"
        deadline = time.monotonic() + args.timeout
        records: dict[str, dict[str, Any]] = {}
        while time.monotonic() < deadline:
            records = {job_id: stored.get(job_id) for job_id in jobs}
            if all(r["status"] in TERMINAL for r in records.values()):
                break
            time.sleep(2)  # polling the job records, bounded by --timeout
        sampler.stop()
        served = {kind: stack.emulator_stats(route)["service_times"] for kind, route in EMULATOR_ROUTE.items()}
    finally:
        stack.stop()
    if args.records:
        Path(args.records).write_text(
            json.dumps({j: {"caller": c, "record": records.get(j)} for j, c in jobs.items()}, default=str)
        )
    text = report(args, jobs, records, sampler.samples if sampler else [], served, time.monotonic() - began)
    emit(args.section, text, args.out or str(REPO / "docs" / "benchmarks.md"))
    return 0


def report(
    args: argparse.Namespace,
    jobs: dict[str, str],
    records: dict[str, dict[str, Any]],
    samples: list[Sample],
    served: dict[str, list[list[Any]]],
    wall_s: float,
) -> str:
    times = [t for job_id, caller in jobs.items() if (t := job_times(job_id, caller, records.get(job_id, {})))]
    unfinished = [j for j in jobs if records.get(j, {}).get("status") not in TERMINAL]
    not_succeeded = {
        j: records.get(j, {}).get("status") for j in jobs if records.get(j, {}).get("status") != "succeeded"
    }
    capacity = {kind: max((s.pools[kind][1] for s in samples if kind in s.pools), default=1) for kind in KINDS}
    fcfs = simulate_fcfs(times, capacity["image"], capacity["video"]) if times else {}
    rows = []
    for caller in ("B", "A"):
        mine = [t for t in times if t.caller == caller]
        if not mine:
            continue
        rows.append([
            caller, len(mine),
            *p50_p90([t.start_wait for t in mine]), *p50_p90([fcfs[t.job_id][0] for t in mine]),
            *p50_p90([t.end_to_end for t in mine]), *p50_p90([fcfs[t.job_id][1] for t in mine]),
        ])  # fmt: skip
    stage_rows = []  # where each caller's end to end went (measured, p50 / p90)
    for caller in ("B", "A"):
        mine = [t for t in times if t.caller == caller]
        if not mine:
            continue
        stages = [
            [t.start_wait for t in mine],
            [t.image_end - t.image_start for t in mine],
            [t.video_queued - t.image_end for t in mine],
            [t.video_start - t.video_queued for t in mine],
            [t.end - t.video_start for t in mine],
        ]
        stage_rows.append([caller, *(" / ".join(p50_p90(values)) for values in stages)])
    turnover = {
        "image": median([t.image_end - t.image_start for t in times]) if times else 0.0,
        "video": median([t.end - t.video_start for t in times]) if times else 0.0,
    }
    util_rows = []
    verdicts = []
    for kind in KINDS:
        share, count = utilisation(samples, kind)
        intervals = [(float(e[2]), float(e[3])) for e in served.get(kind, []) if int(e[1]) < 400]
        busy = container_busy(samples, kind, intervals)
        util_rows.append([
            kind, capacity[kind], count, f"{count * args.sample_every:.0f}",
            f"{share * 100:.1f} %" if share is not None else "-", f"{busy * 100:.1f} %" if busy is not None else "-",
        ])  # fmt: skip
        if share is not None:
            verdicts.append(f"{kind} {'met' if share >= UTILISATION_TARGET else 'missed'}")
    b_times = [t for t in times if t.caller == "B"]
    b_wait = quantile([t.start_wait for t in b_times], 0.9) if b_times else float("nan")
    b_video = [t.video_start - t.video_queued for t in b_times]
    b_video_p50 = median(b_video) if b_video else float("nan")
    b_video_p90 = quantile(b_video, 0.9) if b_video else float("nan")
    callers = 2
    b_load = turnover["video"] / args.b_every if args.b_every else float("nan")
    return f"""## Fair share: {args.a_jobs} jobs of A, {args.scale:g} x model time (`bench/fairness.py`)

Command: `.venv-dev/bin/python bench/fairness.py --a-jobs {args.a_jobs} --b-jobs {args.b_jobs} --b-every \
{args.b_every:g} --scale {args.scale:g} --section {args.section}`. Machine: {machine()}. Date: {today()}. \
Run time: {wall_s:.0f} s. Load \
average at the end: {_load()}.

Setup: one isolated local stack at the default capacity (image {capacity["image"]} slot, video {capacity["video"]} \
slot), model times {IMAGE_MODEL_S:g} s / {VIDEO_MODEL_S:g} s x {args.scale:g}. Caller A submits {args.a_jobs} jobs at \
once; from 5 s after all of them are parked or running, caller B (another IAM identity) submits one every \
{args.b_every:g} s, {args.b_jobs} in all. \
Jobs that did not succeed: \
{len(not_succeeded)} {not_succeeded or ""}; unfinished at the bound: {len(unfinished)}.

Waits in seconds. **fair**: measured (admission's round-robin across callers, FIFO within a caller). **FCFS**: the \
same run's jobs (arrivals, own image and video occupancy, staging) replayed first come, first served through the \
same slots, hand-over {handover([(t.accepted, t.image_start, t.image_end) for t in times]):.2f} s (image) / \
{handover([(t.video_queued, t.video_start, t.end) for t in times]):.2f} s (video) as measured.

{
        table(
            [
                "caller",
                "jobs",
                "start wait p50 (fair)",
                "p90",
                "p50 (FCFS)",
                "p90",
                "end to end p50 (fair)",
                "p90",
                "p50 (FCFS)",
                "p90",
            ],
            rows,
        )
    }

Where the time went, measured (p50 / p90, seconds): waiting for the image slot, the image stage, staging (the image
stage's end -> ready for the video slot), waiting for the video slot, the render until the result arrived.

{table(["caller", "image wait", "image", "staging", "video wait", "render"], stage_rows)}

- One slot turnover: image {turnover["image"]:.1f} s, video {turnover["video"]:.1f} s (medians of the jobs' own \
occupancy). B's start wait p90 = {b_wait:.1f} s, {b_wait / max(turnover["image"], 1e-9):.2f} image turnovers with \
{callers} callers active (the issue's bound: about one turnover per active caller, here {callers}). B's wait for \
its video slot: p50 {b_video_p50:.1f} s / p90 {b_video_p90:.1f} s, {b_video_p50 / max(turnover["video"], 1e-9):.2f} / \
{b_video_p90 / max(turnover["video"], 1e-9):.2f} video turnovers.
- B's offered load on the video slot: {b_load:.2f} (one render every {args.b_every:g} s), against its fair share \
{1 / callers:.2f} with {callers} callers{
        "" if b_load <= 1 / callers else ": above it, so B queues behind its own jobs and its waits grow job by job"
    }.

Slot utilisation while the endpoint's queue was non-empty (sampled every {args.sample_every:g} s; target >= 95 %: \
{", ".join(verdicts) or "no queue formed"}):

{table(["endpoint", "slots", "samples with a queue", "seconds", "slots in use", "container busy"], util_rows)}
"""


def _load() -> str:
    try:
        one, five, _ = Path("/proc/loadavg").read_text().split()[:3]
        return f"{one} / {five} (1 / 5 min)"
    except OSError:
        return "-"


if __name__ == "__main__":
    raise SystemExit(main())
