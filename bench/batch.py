"""Batches end to end: one 1,000-line JSONL dropped into the inbox of an isolated local stack (issue 14).

    .venv-dev/bin/python bench/batch.py [--lines 1000] [--bad 10] [--in-flight 40] [--scale 0.05] [--out FILE|-]

A real S3 PUT of ``prompts/bench-<n>.jsonl`` (``--bad`` of its lines are invalid, spread through the file) starts the
fan-out exactly as on AWS: the inbox function records the batch and queues the first split step; BatchSubmit (SQS
event source, partial batch responses, MaximumConcurrency = BatchSubmitConcurrency) splits the file and submits the
lines, at most ``--in-flight`` jobs at once (BatchMaxInFlightJobs); BatchProgress counts the terminal events and
publishes ``batch.completed``. The emulators take the AWS sample's model times x ``--scale``.

Checked and reported: time from the PUT to ``batch.completed``, jobs/s, that every line ended in exactly one terminal
state (one terminal event per line's job, manifest = lines), exactly one ``batch.completed`` with the right counts,
and the most jobs that were running at once (from the job records' stage times) against the bound.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from datetime import datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "layers" / "omnireel")]

from bench.localstack import LONG_TIMEOUTS, EventCollector, IsolatedStack, configure_model_times  # noqa: E402
from bench.report import emit, machine, table, today  # noqa: E402


def _t(iso: str) -> float:
    return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


def build_file(lines: int, bad: int) -> tuple[bytes, set[int]]:
    step = max(1, lines // max(1, bad))
    bad_lines = {1 + i * step + step // 2 for i in range(bad)} if bad else set()
    out = []
    for n in range(1, lines + 1):
        if n in bad_lines:
            out.append(b'{"prompt": ""}' if n % 2 else b"{not json")
        else:
            request = {
                "prompt": f"batch bench line {n}: a lighthouse at dusk",
                "seed": n,
                "image": {"size": "512x512", "num_inference_steps": 4},
                "video": {"num_frames": 9, "width": 320, "height": 192, "num_inference_steps": 4},
            }
            out.append(json.dumps(request).encode())
    return b"\n".join(out) + b"\n", bad_lines


def max_concurrent(intervals: list[tuple[float, float]]) -> int:
    points = sorted([(start, 1) for start, _ in intervals] + [(end, -1) for _, end in intervals])
    running = peak = 0
    for _, delta in points:
        running += delta
        peak = max(peak, running)
    return peak


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lines", type=int, default=1000)
    parser.add_argument("--bad", type=int, default=10)
    parser.add_argument("--in-flight", type=int, default=40)
    parser.add_argument("--submit-concurrency", type=int, default=5)
    parser.add_argument("--scale", type=float, default=0.05)
    parser.add_argument("--timeout", type=float, default=2400, help="bound on the run after the PUT")
    parser.add_argument("--out", default=None, help="default docs/benchmarks/batch.md; '-' = print only")
    args = parser.parse_args(argv)
    began = time.monotonic()
    params = {
        **LONG_TIMEOUTS,
        "BatchMaxInFlightJobs": str(args.in_flight),
        "BatchSubmitConcurrency": str(args.submit_concurrency),
        "VideoMaxConcurrentInvocationsPerInstance": "2",
    }
    data, bad_lines = build_file(args.lines, args.bad)
    stack = IsolatedStack(params, name="batch").start()
    try:
        configure_model_times(stack, args.scale)
        events = EventCollector(stack)
        s3 = stack.client("s3")
        bucket, key = stack.output("InboxBucketName"), f"prompts/bench-{args.lines}.jsonl"
        t_put = time.time()
        version = s3.put_object(Bucket=bucket, Key=key, Body=data)["VersionId"]
        batch_id = None
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            tagging = s3.get_object_tagging(Bucket=bucket, Key=key, VersionId=version)
            batch_id = {t["Key"]: t["Value"] for t in tagging["TagSet"]}.get("omnireel-batch-id")
            if batch_id:
                break
            time.sleep(0.2)
        if batch_id is None:
            raise RuntimeError("the inbox function did not tag the batch file within 60 s")

        def completed() -> list:
            return [
                r
                for r in events.received
                if r.event.get("event_type") == "batch.completed" and r.event.get("batch_id") == batch_id
            ]

        deadline = time.monotonic() + args.timeout
        while not completed() and time.monotonic() < deadline:
            time.sleep(0.5)
        done = completed()
        t_done = done[0].at if done else time.time()
        time.sleep(3)  # late duplicates, if any, would arrive now: they are counted below
        events.close()
        batch = stack.api("GET", f"/batches/{batch_id}").json()
        manifest = []
        if batch.get("manifest"):
            manifest = [json.loads(line) for line in stack.http.get(batch["manifest"]["url"]).text.splitlines()]
        job_events = Counter(
            r.event["job_id"] for r in events.received if (r.event.get("batch") or {}).get("batch_id") == batch_id
        )
        intervals = []
        for row in manifest:
            if row["status"] == "succeeded":
                record = stack.job(row["job_id"])
                times = record["stage_times"]
                intervals.append((_t(times["accepted"]), _t(times["succeeded"])))
        completed_events = len(completed())
    finally:
        stack.stop()

    wall = t_done - t_put
    counts = batch.get("counts", {})
    lines_ok = len(manifest) == args.lines and {row["line"] for row in manifest} == set(range(1, args.lines + 1))
    one_each = (
        bool(manifest) and all(job_events[row["job_id"]] == 1 for row in manifest) and len(job_events) == len(manifest)
    )
    bad_ok = all(
        row["status"] == "failed" and row["error"].startswith(f"line {row['line']}:")
        for row in manifest
        if row["line"] in bad_lines
    )
    peak = max_concurrent(intervals)
    rows = [
        ["lines (bad)", f"{args.lines} ({len(bad_lines)})"],
        ["PUT -> batch.completed", f"{wall:.1f} s"],
        ["throughput", f"{args.lines / wall:.2f} jobs/s"],
        ["counts", ", ".join(f"{k} {v}" for k, v in counts.items())],
        ["manifest rows = lines, each line once", "yes" if lines_ok else "NO"],
        [
            "terminal events per line's job",
            "exactly 1 each" if one_each else f"NOT 1 each: {Counter(job_events.values())}",
        ],
        ["bad lines failed with `line N:` reasons", "yes" if bad_ok else "NO"],
        ["batch.completed events", str(completed_events)],
        ["most jobs running at once (bound)", f"{peak} ({args.in_flight})"],
    ]
    text = f"""## Batches (`bench/batch.py`)

Command: `.venv-dev/bin/python bench/batch.py --lines {args.lines} --bad {args.bad} --in-flight {args.in_flight} \
--submit-concurrency {args.submit_concurrency} --scale {args.scale:g}`. Machine: {machine()}. Date: {today()}. \
Run time: {time.monotonic() - began:.0f} s.

One {len(data) / 1024:.0f} KiB JSONL file, a real S3 PUT into the inbox of an isolated local stack (IAM enforced);
fan-out through the batch queue's SQS event source (local pollers, partial batch responses, MaximumConcurrency
{args.submit_concurrency}), at most {args.in_flight} batch jobs in flight (BatchMaxInFlightJobs); model times = the AWS
sample's x {args.scale:g}, video endpoint 2 concurrent invocations.

{table(["measure", "result"], rows)}

Locally the run is CPU-bound (2 cores for moto, the Lambda workers and the emulators), like `bench/load.py`; on AWS
the bound is the GPU pools (docs/capacity.md: a 10,000-prompt batch at the default pools).
"""
    emit("batch", text, args.out if args.out is not None else str(REPO / "docs" / "benchmarks" / "batch.md"))
    ok = lines_ok and one_each and bad_ok and completed_events == 1 and peak <= args.in_flight
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
