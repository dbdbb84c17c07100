"""Orchestration overhead: ours (Step Functions + SNS-driven callback) vs the AWS sample's 5 s S3 polling.

    .venv/bin/python bench/orchestration_overhead.py [--pairs 20] [--poll-interval 5] [--out docs/benchmarks.md|-]

Both run on the same isolated local stack, side by side: each round starts one job of ours and one of theirs at the
same moment (same prompt, seed and sizes), so they share the machine and the endpoints.

- **ours**: ``POST /jobs`` (202 = accepted) -> Step Functions -> GenerateImage -> StageVideoRequest -> InvokeVideo
  (InvokeEndpointAsync + task token) -> SNS success topic -> AsyncResult (SendTaskSuccess) -> PublishEvent ->
  job-events topic -> our SQS subscription. Clock: 202 -> terminal event received.
- **theirs** (the sample's approach, written here): a client that calls the image endpoint (InvokeEndpoint, same
  body), builds the same multipart video request, puts it in S3, calls InvokeEndpointAsync the same way, then checks
  ``OutputLocation`` and ``FailureLocation`` with HeadObject, sleeping ``--poll-interval`` (5 s) between checks, like
  the sample's ``wait_for_s3_object``. Clock: start -> output object found.

Overhead = end-to-end - model time, where model time is the container's own service time for the same requests,
measured by calling the emulator directly (``/invocations``) before the run: the configured emulated latency (AWS
sample's 4.7 s image / 8.9 s video x ``--scale``) plus the emulator's real CPU work (PNG encode, H.264 encode).
"""

from __future__ import annotations

import argparse
import base64
import json
import random
import sys
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from statistics import mean
from typing import Any

import httpx

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "layers" / "omnireel")]

from bench.localstack import EventCollector, IsolatedStack  # noqa: E402
from bench.report import emit, machine, quantile, table, today  # noqa: E402

IMAGE_MODEL_S, VIDEO_MODEL_S = 4.7, 8.9  # the AWS sample's published per-job model times
LONG_TIMEOUTS = {
    "VideoRequestTtlSeconds": "900",
    "VideoHeartbeatSeconds": "1200",
    "VideoCallbackTimeoutSeconds": "1500",
}


def request_for(index: int, rng: random.Random) -> dict[str, Any]:
    return {
        "prompt": f"bench {index}: a lighthouse at dusk, waves, {rng.choice(['calm', 'storm', 'fog'])}",
        "seed": rng.randrange(2**31),
        "image": {"size": "512x512", "num_inference_steps": 4},
        "video": {"num_frames": 9, "width": 320, "height": 192, "num_inference_steps": 4},
    }


def configure_model_times(stack: IsolatedStack, scale: float) -> tuple[float, float]:
    image_s, video_s = IMAGE_MODEL_S * scale, VIDEO_MODEL_S * scale
    stack.emulator("images", {"faults": {"images": {"latency_s": image_s}}})
    stack.emulator("videos", {"faults": {"videos": {"latency_s": video_s}}})
    return image_s, video_s


class PollingClient:
    """The sample's approach on the same endpoints, bucket and request bodies (my implementation, not theirs)."""

    def __init__(self, stack: IsolatedStack, poll_interval_s: float):
        from omnireel.settings import StageSettings

        self.stack = stack
        self.poll = poll_interval_s
        self.runtime = stack.client("sagemaker-runtime")
        self.s3 = stack.client("s3")
        self.bucket = stack.output("ArtifactsBucketName")
        self.image_endpoint = stack.state["outputs"]["ImageEndpointName"]
        self.video_endpoint = stack.state["outputs"]["VideoEndpointName"]
        env = stack.function_env("StageVideoRequestFunction")
        self.video_model = env.get("VIDEO_MODEL_ID") or StageSettings.model_fields["video_model_id"].default
        self.image_model = stack.function_env("GenerateImageFunction").get("IMAGE_MODEL_ID")

    def _exists(self, uri: str) -> bool:
        bucket, _, key = uri[5:].partition("/")
        try:
            self.s3.head_object(Bucket=bucket, Key=key)
            return True
        except self.s3.exceptions.ClientError:
            return False

    def run(self, raw_request: dict[str, Any], timeout_s: float = 300) -> dict[str, Any]:
        from omnireel.aws.sagemaker import IMAGE_ROUTE, VIDEO_ROUTE, decode_image_response
        from omnireel.image_request import image_request_body
        from omnireel.reference_image import prepare_video_reference
        from omnireel.request import parse_job_request
        from omnireel.video_request import build_video_request

        started = time.time()
        request = parse_job_request(raw_request)
        response = self.runtime.invoke_endpoint(
            EndpointName=self.image_endpoint,
            Body=json.dumps(image_request_body(request, self.image_model)).encode(),
            ContentType="application/json",
            Accept="application/json",
            CustomAttributes=IMAGE_ROUTE,
        )
        png = decode_image_response(response["Body"].read())
        image_done = time.time()
        reference = prepare_video_reference(png, request.video.width, request.video.height)
        staged = build_video_request(request, reference, model_id=self.video_model)
        key = f"polling/{uuid.uuid4()}/video-request.multipart"
        self.s3.put_object(Bucket=self.bucket, Key=key, Body=staged.body, ContentType=staged.content_type)
        answer = self.runtime.invoke_endpoint_async(
            EndpointName=self.video_endpoint,
            InputLocation=f"s3://{self.bucket}/{key}",
            ContentType=staged.content_type,
            Accept="video/mp4",
            CustomAttributes=VIDEO_ROUTE,
            InvocationTimeoutSeconds=900,
            RequestTTLSeconds=900,
        )
        invoked = time.time()
        output, failure = answer["OutputLocation"], answer.get("FailureLocation")
        polls = 0
        while time.time() - started < timeout_s:  # wait_for_s3_object: check, then sleep the interval
            polls += 1
            if self._exists(output):
                return {"ok": True, "start": started, "end": time.time(), "polls": polls,
                        "image_s": image_done - started, "invoked_s": invoked - started}  # fmt: skip
            if failure and self._exists(failure):
                return {"ok": False, "start": started, "end": time.time(), "polls": polls}
            time.sleep(self.poll)
        return {"ok": False, "start": started, "end": None, "polls": polls}


def measure_model_time(stack: IsolatedStack, polling: PollingClient, n: int = 5) -> tuple[float, float]:
    """Container service time of the same requests, called directly on the emulators (median of n)."""
    from omnireel.aws.sagemaker import IMAGE_ROUTE, VIDEO_ROUTE
    from omnireel.image_request import image_request_body
    from omnireel.reference_image import prepare_video_reference
    from omnireel.request import parse_job_request
    from omnireel.video_request import build_video_request

    rng = random.Random(99)
    images, videos = [], []
    with httpx.Client(timeout=120) as http:
        for i in range(n):
            request = parse_job_request(request_for(i, rng))
            body = json.dumps(image_request_body(request, polling.image_model)).encode()
            t0 = time.perf_counter()
            r = http.post(
                f"{stack.emulator_url('images')}/invocations",
                content=body,
                headers={"Content-Type": "application/json", "X-Amzn-SageMaker-Custom-Attributes": IMAGE_ROUTE},
            )
            images.append(time.perf_counter() - t0)
            png = base64.b64decode(r.json()["data"][0]["b64_json"])
            staged = build_video_request(
                request,
                prepare_video_reference(png, request.video.width, request.video.height),
                model_id=polling.video_model,
            )
            t0 = time.perf_counter()
            r = http.post(
                f"{stack.emulator_url('videos')}/invocations",
                content=staged.body,
                headers={"Content-Type": staged.content_type, "X-Amzn-SageMaker-Custom-Attributes": VIDEO_ROUTE},
            )
            r.raise_for_status()
            videos.append(time.perf_counter() - t0)
    return quantile(images, 0.5), quantile(videos, 0.5)


def pcts(values: list[float]) -> list[str]:
    return [f"{quantile(values, q):.2f}" for q in (0.5, 0.9, 0.99)] + [f"{mean(values):.2f}"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=20)
    parser.add_argument("--poll-interval", type=float, default=5.0)
    parser.add_argument("--scale", type=float, default=0.05, help="model time = AWS sample's times x scale")
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--out", default=None, help="default docs/benchmarks.md; '-' = print only")
    args = parser.parse_args(argv)
    began = time.monotonic()
    rng = random.Random(args.seed)
    stack = IsolatedStack(LONG_TIMEOUTS, name="overhead").start()
    try:
        configure_model_times(stack, args.scale)
        events = EventCollector(stack)
        polling = PollingClient(stack, args.poll_interval)
        model_image, model_video = measure_model_time(stack, polling)
        model = model_image + model_video
        # warm-up: one job each (cold starts of every Lambda are not orchestration overhead in steady state)
        warm = stack.submit(request_for(-1, rng))
        polling.run(request_for(-1, rng))
        deadline = time.monotonic() + 120
        while warm not in events.terminal_ids() and time.monotonic() < deadline:
            time.sleep(0.1)
        ours: list[float] = []
        theirs: list[float] = []
        polls: list[int] = []
        failures = 0
        lock = threading.Lock()

        def run_ours(request: dict[str, Any]) -> None:
            nonlocal failures
            job_id = stack.submit(request)
            accepted = time.time()
            end = time.monotonic() + 300
            while time.monotonic() < end:
                got = events.terminal(job_id)
                if got:
                    with lock:
                        if got[0].event["status"] == "succeeded":
                            ours.append(got[0].at - accepted)
                        else:
                            failures += 1
                    return
                time.sleep(0.02)
            with lock:
                failures += 1

        def run_theirs(request: dict[str, Any]) -> None:
            nonlocal failures
            result = polling.run(request)
            with lock:
                if result["ok"]:
                    theirs.append(result["end"] - result["start"])
                    polls.append(result["polls"])
                else:
                    failures += 1

        with ThreadPoolExecutor(max_workers=2) as pool:
            for i in range(args.pairs):
                request = request_for(i, rng)
                futures = [pool.submit(run_ours, request), pool.submit(run_theirs, request)]
                for future in futures:
                    future.result()
        events.close()
    finally:
        stack.stop()
    ours_over = [t - model for t in ours]
    theirs_over = [t - model for t in theirs]
    ratio = quantile(ours_over, 0.5) / quantile(theirs_over, 0.5)
    ratio_mean = mean(ours_over) / mean(theirs_over)
    header = ["variant", "jobs", "e2e p50 s", "p90", "p99", "mean", "overhead p50 s", "p90", "p99", "mean"]
    rows = [
        ["ours (SNS callback)", len(ours), *pcts(ours), *pcts(ours_over)],
        [f"sample ({args.poll_interval:g} s S3 polling)", len(theirs), *pcts(theirs), *pcts(theirs_over)],
    ]
    verdict = "met" if ratio <= 0.3 else "**missed**"
    text = f"""## Orchestration overhead vs S3 polling (`bench/orchestration_overhead.py`)

Command: `.venv/bin/python bench/orchestration_overhead.py --pairs {args.pairs} --poll-interval {args.poll_interval:g} \
--scale {args.scale:g} --seed {args.seed}`. Machine: {machine()}. Date: {today()}. Run time: \
{time.monotonic() - began:.0f} s (one isolated local stack; both variants side by side, one job of each started \
together per round, after one warm-up job each).

Model time (container service time of the same requests, called directly on the emulators, median of 5): image \
{model_image:.3f} s + video {model_video:.3f} s = {model:.3f} s (emulated latency = AWS sample's 4.7 s / 8.9 s x \
{args.scale:g}, plus the emulator's own PNG / H.264 work). Overhead = end-to-end - model time. Ours: `POST /jobs` 202 \
-> `job.succeeded` received on an SQS subscription of the job-events topic. Sample: client start -> `HeadObject` \
finds `OutputLocation` (checked, then {args.poll_interval:g} s sleep, as `wait_for_s3_object`; mean \
{mean(polls):.1f} checks per job). Failed/timed-out jobs: {failures}.

{table(header, rows)}

**Ratio (overhead p50, ours / sample): {ratio:.3f}** (means: {ratio_mean:.3f}). Target ours <= 0.3 x theirs: \
{verdict}.
"""
    emit("orchestration_overhead", text, args.out or str(REPO / "docs" / "benchmarks.md"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
