"""Load: hundreds of concurrent jobs through the embedded local stack, model times in the AWS sample's proportion.

    .venv-dev/bin/python bench/load.py [--jobs 300] [--scale 0.05] [--video-concurrency 2]
        [--out docs/benchmarks/load.md|-]

One isolated local stack; the emulators take the AWS sample's image 4.7 s : video 8.9 s x ``--scale``; the async
video endpoint runs ``--video-concurrency`` requests at a time (``VideoMaxConcurrentInvocationsPerInstance``, one
instance); the image endpoint is real-time (unbounded locally). All jobs are submitted at once through the HTTP API
(16 client threads); events are consumed from an SQS subscription of the job-events topic. Per job the record's
``stage_times`` split the time into: dispatch (accepted -> image step running), image, staging, video (queue +
render), and event delivery (succeeded -> event received). Overhead per stage = stage time - the model time of that
stage (the container's own service time, measured by direct calls to the emulators before the run).
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path
from statistics import mean
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "layers" / "omnireel")]

from bench.localstack import LONG_TIMEOUTS, EventCollector, IsolatedStack, configure_model_times  # noqa: E402
from bench.orchestration_overhead import SampleClient, measure_model_time, request_for  # noqa: E402
from bench.report import emit, machine, quantile, table, today  # noqa: E402


def _t(iso: str) -> float:
    return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=300)
    parser.add_argument("--scale", type=float, default=0.05)
    parser.add_argument("--video-concurrency", type=int, default=2)
    parser.add_argument("--seed", type=int, default=5)
    parser.add_argument("--timeout", type=float, default=480, help="bound on the whole run after submission")
    parser.add_argument("--out", default=None, help="default docs/benchmarks/load.md; '-' = print only")
    args = parser.parse_args(argv)
    began = time.monotonic()
    rng = random.Random(args.seed)
    params = {**LONG_TIMEOUTS, "VideoMaxConcurrentInvocationsPerInstance": str(args.video_concurrency)}
    stack = IsolatedStack(params, name="load").start()
    try:
        configure_model_times(stack, args.scale)
        model_image, model_video = measure_model_time(stack, SampleClient(stack), rounds=5, parallel=1)
        events = EventCollector(stack)
        warm = stack.submit(request_for(-1, rng))
        deadline = time.monotonic() + 120
        while warm not in events.terminal_ids() and time.monotonic() < deadline:
            time.sleep(0.1)
        requests = [request_for(i, rng) for i in range(args.jobs)]
        submitted: dict[str, float] = {}
        t_start = time.time()

        def submit(item: tuple[int, dict]) -> None:
            job_id = stack.submit(item[1], key=f"load-{args.seed}-{item[0]}")
            submitted[job_id] = time.time()

        with ThreadPoolExecutor(max_workers=16) as pool:
            list(pool.map(submit, enumerate(requests)))
        t_submitted = time.time()
        deadline = time.monotonic() + args.timeout
        while time.monotonic() < deadline and len(set(submitted) & events.terminal_ids()) < len(submitted):
            time.sleep(0.5)
        time.sleep(2)
        events.close()
        all_events = list(events.received)
        received: dict[str, Any] = {}
        for r in all_events:
            if r.event["job_id"] in submitted:
                received.setdefault(r.event["job_id"], r)
        records = {job_id: stack.job(job_id) for job_id in received}
        retries = stack.transport_retries
    finally:
        stack.stop()

    per_job = Counter(r.event["job_id"] for r in all_events if r.event["job_id"] in submitted)
    duplicates = sum(1 for n in per_job.values() if n > 1)
    ok = [j for j, r in received.items() if r.event["status"] == "succeeded"]
    lost = len(submitted) - len(received)
    t_end = max(received[j].at for j in received) if received else time.time()
    comps: dict[str, list[float]] = {k: [] for k in ("dispatch", "image", "staging", "video", "delivery", "e2e")}
    for job_id in ok:
        st = {k: _t(v) for k, v in records[job_id]["stage_times"].items()}
        comps["dispatch"].append(st["generating_image"] - st["accepted"])
        comps["image"].append(st["staging_video"] - st["generating_image"])
        comps["staging"].append(st["rendering_video"] - st["staging_video"])
        comps["video"].append(st["succeeded"] - st["rendering_video"])
        comps["delivery"].append(received[job_id].at - st["succeeded"])
        comps["e2e"].append(received[job_id].at - submitted[job_id])
    model = {"image": model_image, "video": model_video, "e2e": model_image + model_video}

    def q(values: list[float]) -> list[str]:
        return [f"{quantile(values, p):.2f}" for p in (0.5, 0.9, 0.99)] + [f"{max(values):.2f}"]

    labels = {
        "dispatch": "dispatch: accepted -> image step running (API, StartExecution, SFN, Lambda)",
        "image": "image step - image model time",
        "staging": "staging (no model time)",
        "video": "video: queue + render - video model time",
        "delivery": "event: succeeded -> event received (PublishEvent, SNS -> SQS)",
        "e2e": "total: submitted -> event received - model time",
    }
    rows = [[labels[k], *q([v - model.get(k, 0.0) for v in comps[k]])] for k in labels]
    total_mean = mean(comps["e2e"])
    share_rows = []
    for key, label in (
        ("dispatch", "dispatch"),
        ("image", "image (model + overhead)"),
        ("staging", "staging"),
        ("video", "video (queue + model + overhead)"),
        ("delivery", "event delivery"),
    ):
        share_rows.append([label, f"{mean(comps[key]):.2f}", f"{100 * mean(comps[key]) / total_mean:.0f} %"])
    model_share = f"{100 * model['e2e'] / total_mean:.0f} %"
    share_rows.append(["of which model time (image + video)", f"{model['e2e']:.2f}", model_share])
    wall = t_end - t_start
    video_capacity = args.video_concurrency / model_video
    text = f"""## Load (`bench/load.py`)

Command: `.venv-dev/bin/python bench/load.py --jobs {args.jobs} --scale {args.scale:g} --video-concurrency \
{args.video_concurrency} --seed {args.seed}`. Machine: {machine()}. Date: {today()}. Run time: \
{time.monotonic() - began:.0f} s.

Model times: the AWS sample's image 4.7 s : video 8.9 s x {args.scale:g}; measured container service time of the \
same requests (direct calls, median of 5): image {model_image:.3f} s, video {model_video:.3f} s (includes \
the emulator's real PNG / H.264 work). Video endpoint: {args.video_concurrency} concurrent invocations (1 instance), \
so its capacity is {video_capacity:.1f} jobs/s; image endpoint unbounded. {args.jobs} jobs (512x512 image, \
9-frame 320x192 video) submitted at once through the HTTP API in {t_submitted - t_start:.1f} s (16 client threads, \
`Idempotency-Key` per job; {retries} submissions retried after the local front door reset the connection).

- succeeded: **{len(ok)}** / {len(submitted)}; failed: {len(received) - len(ok)}; lost (no terminal event within \
{args.timeout:.0f} s): {lost}; jobs with more than one terminal event: {duplicates}
- throughput: **{len(ok) / wall:.2f} jobs/s** (first submit -> last event, {wall:.1f} s); video endpoint bound \
{video_capacity:.1f} jobs/s

Per-stage overhead, seconds (p50 / p90 / p99 / max), from each job's record `stage_times` and the event receipt:

{table(["stage", "p50", "p90", "p99", "max"], rows)}

Where the time goes (mean per job, {total_mean:.2f} s from submit to event):

{table(["component", "mean s", "share"], share_rows)}
"""
    emit("load", text, args.out or str(REPO / "docs" / "benchmarks" / "load.md"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
