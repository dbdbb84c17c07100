"""``omnireel smoke``: the post-deploy check -- one image, one 4-step video job, one TTS utterance.

(a) image: one request straight to the image endpoint (``InvokeEndpoint``, ``CustomAttributes=route=/v1/images/
    generations``) -> ``validation-output.png`` (PNG signature and size checked);
(b) video: one job through the HTTP API with ``video.num_inference_steps=4``, waited to its terminal state ->
    ``validation-output.mp4`` (its sample table, read by mp4_facts: frame count and size as the job asked);
(c) voice: one utterance through the TTS relay -> ``validation-output.wav`` (24 kHz mono 16-bit), skipped with a note
    when the stack has no voice (EnableVoice=false: no RelayUrl output; locally: ``local up --no-relay``);
(d) deploy: what the local stack cannot prove and one call can check (docs/operations.md, "First deploy"): every
    real-time endpoint's variant declares one ``InstanceType`` or 2-5 ``InstancePools``; on a deployed stack also the
    processed template's ``DeletionPolicy``/``UpdateReplacePolicy`` of every resource that follows ``RetainData``, and
    an IAM simulation that the functions heading possibly missing outputs may ``s3:ListBucket`` their prefixes (so a
    missing key is a 404, not a 403).

The three run concurrently; each prints a PASS/FAIL/SKIP line with its timing as it finishes, then a verdict.
"""

from __future__ import annotations

import base64
import binascii
import json
import struct
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from omnireel.core.errors import MalformedModelOutput

from . import jobs, tts
from .errors import CliError
from .target import Target
from .vocabulary import CHECKS

IMAGE_ROUTE = "route=/v1/images/generations"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
SMOKE_STEPS = 4
SMOKE_SEED = 7
SMOKE_SPEECH = "omnireel smoke test: the voice path works."


@dataclass
class Check:
    name: str
    status: str  # PASS | FAIL | SKIP
    seconds: float
    detail: str

    def line(self) -> str:
        timing = f"{self.seconds:6.2f} s" if self.status != "SKIP" else " " * 8
        return f"{self.status:<4}  {self.name:<6}  {timing}  {self.detail}"


class CheckFailed(Exception):
    pass


def _png_size(data: bytes) -> tuple[int, int]:
    if not data.startswith(PNG_SIGNATURE) or data[12:16] != b"IHDR":
        raise CheckFailed(f"not a PNG (starts with {data[:8]!r})")
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def check_image(target: Target, out: Path, size: str, prompt: str) -> str:
    from botocore.config import Config

    endpoint = target.output("ImageEndpointName")
    runtime = target.session().client(
        "sagemaker-runtime",
        endpoint_url=target.endpoint_url,
        config=Config(read_timeout=75, connect_timeout=10, retries={"max_attempts": 2}),
    )
    body = {
        "prompt": prompt,
        "size": size,
        "num_inference_steps": SMOKE_STEPS,
        "seed": SMOKE_SEED,
        "response_format": "b64_json",
        "output_format": "png",
    }
    try:
        response = runtime.invoke_endpoint(
            EndpointName=endpoint,
            Body=json.dumps(body).encode(),
            ContentType="application/json",
            Accept="application/json",
            CustomAttributes=IMAGE_ROUTE,
        )
        raw = response["Body"].read()
    except Exception as exc:
        raise CheckFailed(f"InvokeEndpoint {endpoint}: {exc}") from exc
    try:
        png = base64.b64decode(json.loads(raw)["data"][0]["b64_json"], validate=True)
    except (ValueError, KeyError, IndexError, TypeError, binascii.Error) as exc:
        raise CheckFailed(f"{endpoint} answered without a usable data[0].b64_json: {exc}") from exc
    width, height = _png_size(png)
    want = tuple(int(x) for x in size.lower().split("x"))
    if (width, height) != want:
        raise CheckFailed(f"the PNG is {width}x{height}, asked for {size}")
    path = out / "validation-output.png"
    path.write_bytes(png)
    return f"{path}  {width}x{height} PNG, {len(png)} bytes, {SMOKE_STEPS} steps ({endpoint})"


def check_video(target: Target, out: Path, prompt: str, timeout: float, say: Callable[[str], None]) -> str:
    request = jobs.build_request(prompt, steps=SMOKE_STEPS, seed=SMOKE_SEED)
    try:
        accepted = jobs.submit(target, request)
    except CliError as exc:
        raise CheckFailed(str(exc)) from exc
    job_id = accepted.job_id
    say(f"      video  job {job_id} submitted; waiting up to {timeout:.0f} s for it to finish")
    try:
        job = jobs.wait(target, accepted, timeout, quiet=True)
    except CliError as exc:
        raise CheckFailed(str(exc)) from exc
    if job.status != "succeeded":
        raise CheckFailed(jobs.failure_line(job))
    if job.video is None:
        raise CheckFailed(f"job {job_id} succeeded without a video artifact")
    try:
        path = jobs.download(target, job, out, ("video",))["video"].rename(out / "validation-output.mp4")
    except CliError as exc:
        raise CheckFailed(f"cannot download the video of job {job_id}: {exc}") from exc
    asked = (job.request or {}).get("video") or {}
    frames, width, height, codec = _decode_mp4(path)
    expected = (asked.get("num_frames"), asked.get("width"), asked.get("height"))
    if None not in expected and (frames, width, height) != expected:
        raise CheckFailed(
            f"the MP4 has {frames} frames at {width}x{height}, the job asked for {expected[0]} at "
            f"{expected[1]}x{expected[2]}"
        )
    steps = asked.get("num_inference_steps")
    return f"{path}  {frames} frames {width}x{height} {codec}, {steps} steps, job {job_id}"


def _decode_mp4(path: Path) -> tuple[int, int, int, str]:
    """Frames, size and codec from the MP4's sample table (mp4_facts: stdlib, no FFmpeg in .venv)."""
    from .mp4_facts import read_video_facts

    try:
        facts = read_video_facts(path)
    except (OSError, MalformedModelOutput) as exc:
        raise CheckFailed(f"{path} is not a playable MP4: {exc}") from exc
    if not facts.frames:
        raise CheckFailed(f"{path} has no video frames")
    return facts.frames, facts.width, facts.height, facts.codec


# The functions that head an artifact that may not exist (a 404 needs s3:ListBucket on its prefix).
HEADING_FUNCTIONS = ("ReconcileVideoFunction", "AsyncResultFunction")
REALTIME_ENDPOINT_OUTPUTS = ("ImageEndpointName", "TtsEndpointName")


def _variant_problems(sm: Any, endpoint: str) -> list[str]:
    config = sm.describe_endpoint_config(
        EndpointConfigName=sm.describe_endpoint(EndpointName=endpoint)["EndpointConfigName"]
    )
    problems = []
    for variant in config["ProductionVariants"]:
        pools = variant.get("InstancePools") or []
        if variant.get("InstanceType") and pools:
            problems.append(f"{endpoint}: InstanceType and InstancePools both set")
        elif not variant.get("InstanceType") and not 2 <= len(pools) <= 5:
            problems.append(f"{endpoint}: {len(pools)} instance pool(s) and no InstanceType (one type: InstanceType)")
    return problems


def check_deploy(target: Target) -> str:
    from omnireel_template import load_template, retained_by_retain_data

    sm = target.client("sagemaker")
    endpoints = [target.outputs[o] for o in REALTIME_ENDPOINT_OUTPUTS if target.outputs.get(o)]
    problems = [p for endpoint in endpoints for p in _variant_problems(sm, endpoint)]
    done = [f"{len(endpoints)} real-time endpoint(s): one InstanceType or 2-5 pools"]
    if target.local:
        done.append("deletion policies and the ListBucket simulation: deployed stacks only")
    else:
        cfn = target.client("cloudformation")
        stack = cfn.describe_stacks(StackName=target.name)["Stacks"][0]
        parameters = {p["ParameterKey"]: p.get("ResolvedValue", p.get("ParameterValue")) for p in stack["Parameters"]}
        want = "Retain" if parameters.get("RetainData") == "true" else "Delete"
        body = cfn.get_template(StackName=target.name, TemplateStage="Processed")["TemplateBody"]
        resources = (json.loads(body) if isinstance(body, str) else body)["Resources"]
        kept = sorted(retained_by_retain_data(load_template()) & set(resources))
        for logical in kept:
            for attribute in ("DeletionPolicy", "UpdateReplacePolicy"):
                if resources[logical].get(attribute) != want:
                    problems.append(f"{logical}.{attribute} is {resources[logical].get(attribute)!r}, want {want!r}")
        done.append(f"{len(kept)} data resources {want} (RetainData={parameters.get('RetainData')})")
        bucket, lam, iam = target.output("ArtifactsBucketName"), target.client("lambda"), target.client("iam")
        for logical in HEADING_FUNCTIONS:
            name = cfn.describe_stack_resource(StackName=target.name, LogicalResourceId=logical)
            role = lam.get_function_configuration(FunctionName=name["StackResourceDetail"]["PhysicalResourceId"])[
                "Role"
            ]
            decision = iam.simulate_principal_policy(
                PolicySourceArn=role,
                ActionNames=["s3:ListBucket"],
                ResourceArns=[f"arn:aws:s3:::{bucket}"],
                ContextEntries=[
                    {"ContextKeyName": "s3:prefix", "ContextKeyValues": ["async/outputs/x.mp4"],
                     "ContextKeyType": "string"}
                ],
            )["EvaluationResults"][0]["EvalDecision"]  # fmt: skip
            if decision != "allowed":
                problems.append(f"{logical}'s role may not s3:ListBucket async/outputs/ ({decision}): 403 for 404")
        done.append(f"{len(HEADING_FUNCTIONS)} roles may list the prefixes they head")
    if problems:
        raise CheckFailed("; ".join(problems))
    return "; ".join(done)


def check_voice(relay: tts.Relay, out: Path, timeout: float) -> str:
    path = out / "validation-output.wav"
    try:
        speech = tts.speak(relay, SMOKE_SPEECH, path, timeout=timeout)
    except CliError as exc:
        raise CheckFailed(str(exc)) from exc
    return (
        f"{path}  {speech.sample_rate} Hz mono 16-bit, {speech.audio_s:.2f} s of audio, "
        f"time to first audio {speech.time_to_first_audio_s * 1000:.0f} ms"
    )


def run(target: Target, out: Path, *, image_size: str, video_timeout: float, tts_timeout: float,
        prompt: str, skip: tuple[str, ...] = ()) -> list[Check]:  # fmt: skip
    """Run the checks concurrently, printing each line as it finishes; return them in a fixed order."""
    out.mkdir(parents=True, exist_ok=True)
    lock = threading.Lock()

    def say(text: str) -> None:
        with lock:
            print(text, flush=True)

    checks: dict[str, Callable[[], str]] = {
        "image": lambda: check_image(target, out, image_size, prompt),
        "video": lambda: check_video(target, out, prompt, video_timeout, say),
        "deploy": lambda: check_deploy(target),
    }
    results: dict[str, Check] = {}
    relay = None
    try:
        relay = tts.relay_of(target) if "tts" not in skip else None
    except CliError as exc:
        results["tts"] = Check("tts", "FAIL", 0.0, str(exc))
    if relay is not None:
        checks["tts"] = lambda: check_voice(relay, out, tts_timeout)
    elif "tts" not in results and "tts" not in skip:
        note = (
            "skipped: the local stack runs without the TTS relay (`omnireel local up --no-relay`, or EnableVoice=false)"
            if target.local
            else f"skipped: stack {target.name} has no voice (EnableVoice=false: no RelayUrl output)"
        )
        results["tts"] = Check("tts", "SKIP", 0.0, note)
        say(results["tts"].line())
    for name in skip:
        checks.pop(name, None)
        results[name] = Check(name, "SKIP", 0.0, f"skipped (--skip {name})")
        say(results[name].line())

    def timed(name: str, check: Callable[[], str]) -> Check:
        started = time.monotonic()
        try:
            detail = check()
            status = "PASS"
        except CheckFailed as exc:
            detail, status = str(exc), "FAIL"
        except Exception as exc:  # noqa: BLE001 - a smoke check reports, it does not crash
            detail, status = f"{type(exc).__name__}: {exc}", "FAIL"
        return Check(name, status, time.monotonic() - started, detail)

    with ThreadPoolExecutor(max_workers=max(1, len(checks)), thread_name_prefix="smoke") as pool:
        futures = {pool.submit(timed, name, check): name for name, check in checks.items()}
        for future in as_completed(futures):
            check = future.result()
            results[check.name] = check
            say(check.line())
    return [results[name] for name in CHECKS if name in results]


def summary(checks: list[Check], elapsed: float) -> tuple[bool, str]:
    counts = {status: sum(1 for c in checks if c.status == status) for status in ("PASS", "FAIL", "SKIP")}
    ok = counts["FAIL"] == 0 and counts["PASS"] > 0
    line = (
        f"smoke: {'PASS' if ok else 'FAIL'} ({counts['PASS']} passed, {counts['FAIL']} failed, "
        f"{counts['SKIP']} skipped) in {elapsed:.1f} s"
    )
    return ok, line


def header(target: Target, out: Path) -> str:
    where = "the local stack" if target.local else f"stack {target.name} ({target.region})"
    return f"smoke test of {where} -> {out}/"
