"""An isolated embedded local stack for the reliability, load and overhead benchmarks (and the fault test).

``IsolatedStack`` starts ``omnireel local up`` with its own OMNIREEL_HOME (a temp dir), free ports and template
parameter overrides, and always stops it (``omnireel local down``, then SIGKILL for anything left). It gives boto3
clients for the local AWS, job submission through the HTTP API (``Idempotency-Key`` -> deterministic job ids) or the
inbox bucket, the emulators' control API, the local stack's own fault-injection file, and ``EventCollector``: an SQS
queue subscribed to the job-events topic (what ``omnireel events`` consumes), drained on a thread.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import boto3
import httpx
from botocore.config import Config

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "local"), str(REPO / "cli")]

from bench.capacity import IMAGE_MODEL_S, VIDEO_MODEL_S  # noqa: E402
from omnireel.events.job_events import PROGRESS_EVENT_TYPES  # noqa: E402
from omnireel_cli.local_stack import parse_env_lines  # noqa: E402
from omnireel_client.signing import signed_headers  # noqa: E402
from omnireel_local import home as homedir  # noqa: E402

UP_TIMEOUT_S = 120
# How long a paused consumer may take to stop: a poller's long poll under way when the mapping was disabled (20 s at
# most, omnireel_local.event_sources.RECEIVE_WAIT_S), plus room for a loaded machine.
PAUSE_TIMEOUT_S = 60


@contextlib.contextmanager
def consumer_paused(lambda_client: Any, function_name: str, timeout_s: float = PAUSE_TIMEOUT_S) -> Any:
    """While open, the function's SQS event source mapping is disabled (``UpdateEventSourceMapping Enabled=false``,
    as an operator pauses a consumer on AWS) and no receive of it is under way: entered once its ``State`` reads
    ``Disabled`` (bounded by ``timeout_s``), so messages sent now wait in the queue, and queue attributes changed now
    hold for every receive after. On exit the mapping is enabled again."""
    (mapping,) = lambda_client.list_event_source_mappings(FunctionName=function_name)["EventSourceMappings"]
    lambda_client.update_event_source_mapping(UUID=mapping["UUID"], Enabled=False)
    try:
        ends = time.monotonic() + timeout_s
        while (state := lambda_client.get_event_source_mapping(UUID=mapping["UUID"])["State"]) != "Disabled":
            if time.monotonic() > ends:
                raise TimeoutError(f"{function_name}'s event source mapping still {state} after {timeout_s:.0f} s")
            time.sleep(0.2)  # polling the mapping's State, bounded
        yield mapping
    finally:
        lambda_client.update_event_source_mapping(UUID=mapping["UUID"], Enabled=True)


def _cli() -> list[str]:
    script = Path(sys.executable).parent / "omnireel"
    return [str(script)] if script.exists() else [sys.executable, "-m", "omnireel_cli.main"]


class IsolatedStack:
    def __init__(self, parameters: dict[str, str] | None = None, name: str = "bench", keep_home: bool = False):
        self.parameters = parameters or {}
        self.home = Path(tempfile.mkdtemp(prefix=f"omnireel-{name}-"))
        self.keep_home = keep_home
        self.env = {**os.environ, "OMNIREEL_HOME": str(self.home)}
        for var in ("AWS_ENDPOINT_URL", "AWS_PROFILE", "OMNIREEL_LOCAL_FAULTS"):
            self.env.pop(var, None)
        self.state: dict[str, Any] = {}
        self.outputs: dict[str, str] = {}
        self._clients: dict[str, Any] = {}
        self.http = httpx.Client(timeout=30)
        self.transport_retries = 0  # submissions retried (same Idempotency-Key) after a connection reset

    # ---------------------------------------------------------------- lifecycle
    def cli(self, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*_cli(), *args], env=self.env, cwd=REPO, capture_output=True, text=True, timeout=timeout, check=False
        )

    def start(self) -> IsolatedStack:
        argv = ["local", "up", "--ephemeral-ports"]
        for key, value in self.parameters.items():
            argv += ["--parameter", f"{key}={value}"]
        result = self.cli(*argv, timeout=UP_TIMEOUT_S)
        if result.returncode != 0:
            log = self.home / "logs" / "stack.log"
            tail = log.read_text()[-3000:] if log.exists() else ""
            self.stop()
            raise RuntimeError(f"omnireel local up failed: {result.stderr}\n{tail}")
        self.outputs = parse_env_lines(result.stdout)
        self.state = json.loads((self.home / "state.json").read_text())
        return self

    def pids(self) -> list[int]:
        try:
            state = json.loads((self.home / "state.json").read_text())
        except (OSError, ValueError):
            return []
        return [int(state["pid"]), *(int(p) for p in (state.get("child_pids") or {}).values())]

    def stop(self) -> list[int]:
        pids = self.pids()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.cli("local", "down", timeout=60)
        left = homedir.reap(pids)
        self.http.close()
        if not self.keep_home:
            shutil.rmtree(self.home, ignore_errors=True)
        return left

    def __enter__(self) -> IsolatedStack:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ---------------------------------------------------------------- AWS
    def client(self, service: str) -> Any:
        if service not in self._clients:
            self._clients[service] = boto3.client(
                service,
                endpoint_url=self.state["endpoint_url"],
                region_name=self.state["region"],
                # The developer identity (`omnireel local env`): the local AWS enforces IAM.
                aws_access_key_id=self.outputs["AWS_ACCESS_KEY_ID"],
                aws_secret_access_key=self.outputs["AWS_SECRET_ACCESS_KEY"],
                config=Config(retries={"mode": "standard", "max_attempts": 5}, max_pool_connections=50),
            )
        return self._clients[service]

    def output(self, name: str) -> str:
        return self.state["outputs"][name]

    def api(self, method: str, path: str, request: Any = None, headers: dict[str, str] | None = None) -> httpx.Response:
        """One HTTP API call, SigV4-signed with the local developer's key (the front door checks it)."""
        from botocore.credentials import Credentials

        url = f"{self.state['api_url']}{path}"
        body = json.dumps(request).encode() if request is not None else b""
        keys = homedir.developer_credentials(self.state)
        credentials = Credentials(keys["AWS_ACCESS_KEY_ID"], keys["AWS_SECRET_ACCESS_KEY"])
        headers = {"Content-Type": "application/json", **(headers or {})}
        signed = signed_headers(method, url, body, headers, credentials, self.state["region"])
        return self.http.request(method, url, content=body or None, headers=signed)

    def function_name(self, logical: str) -> str:
        names = [f["FunctionName"] for f in self.client("lambda").list_functions()["Functions"]]
        return next(n for n in names if logical in n)

    def update_function(self, logical: str, **changes: Any) -> None:
        """UpdateFunctionConfiguration through the local Lambda API (the runner applies it to new workers)."""
        self.client("lambda").update_function_configuration(FunctionName=self.function_name(logical), **changes)

    def function_env(self, logical: str) -> dict[str, str]:
        config = self.client("lambda").get_function_configuration(FunctionName=self.function_name(logical))
        return dict(config.get("Environment", {}).get("Variables", {}))

    # ---------------------------------------------------------------- faults
    def emulator_url(self, kind: str) -> str:
        return self.outputs[f"OMNIREEL_EMULATOR_{'IMAGE' if kind == 'images' else 'VIDEO'}_MODEL_URL"]

    def emulator(self, kind: str, patch: dict[str, Any]) -> dict[str, Any]:
        response = self.http.put(f"{self.emulator_url(kind)}/_emulator/config", json=patch)
        response.raise_for_status()
        return response.json()

    def emulator_stats(self, kind: str, reset: bool = False) -> dict[str, Any]:
        url = f"{self.emulator_url(kind)}/_emulator/stats"
        response = self.http.delete(url) if reset else self.http.get(url)
        return response.json()

    def platform_faults(self, config: dict[str, Any]) -> None:
        """The local stack's own fault hooks (omnireel_local/fault_injection.py), effective on the next event."""
        path = self.home / "fault-injection.json"
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(config))
        tmp.replace(path)
        stamp = time.time_ns()  # a distinct mtime for every write, even within one filesystem tick
        os.utime(path, ns=(stamp, stamp))

    def injected(self) -> list[dict[str, Any]]:
        path = self.home / "fault-injection.log.jsonl"
        if not path.exists():
            return []
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]

    # ---------------------------------------------------------------- jobs
    def submit(self, request: dict[str, Any], key: str | None = None) -> str:
        headers = {"Idempotency-Key": key} if key else {}
        for attempt in range(5):
            try:
                response = self.api("POST", "/jobs", request, headers)
            except httpx.TransportError:  # the local front door resets connections when its accept backlog is full
                if not key or attempt == 4:
                    raise
                self.transport_retries += 1
                time.sleep(0.2 * (attempt + 1))
                continue
            if response.status_code == 202:
                return response.json()["job_id"]
            if response.status_code < 500 or attempt == 4:
                raise RuntimeError(f"submit: HTTP {response.status_code}: {response.text[:300]}")
            time.sleep(0.5 * (attempt + 1))
        raise AssertionError("unreachable")

    def drop(self, request: dict[str, Any], name: str, timeout: float = 30) -> str:
        return self.drop_versions([request], name, timeout)[0]

    def drop_versions(self, requests: list[dict[str, Any]], name: str, timeout: float = 30) -> list[str]:
        """Upload each request to ``prompts/<name>.json``, one right after the other (each upload is a version of
        its own in the versioned inbox); returns the job id the inbox tagged each version with."""
        bucket = self.output("InboxBucketName")
        key = f"prompts/{name}.json"
        s3 = self.client("s3")
        versions = [
            s3.put_object(Bucket=bucket, Key=key, Body=json.dumps(r).encode(), ContentType="application/json")[
                "VersionId"
            ]
            for r in requests
        ]
        job_ids: list[str] = []
        deadline = time.monotonic() + timeout
        for version in versions:
            while True:
                tagging = s3.get_object_tagging(Bucket=bucket, Key=key, VersionId=version)
                tags = {t["Key"]: t["Value"] for t in tagging.get("TagSet", [])}
                if "omnireel-job-id" in tags:
                    job_ids.append(tags["omnireel-job-id"])
                    break
                if time.monotonic() > deadline:
                    raise TimeoutError(
                        f"s3://{bucket}/{key} version {version} was not picked up within {timeout:.0f} s"
                    )
                time.sleep(0.2)
        return job_ids

    def job(self, job_id: str) -> dict[str, Any]:
        response = self.api("GET", f"/jobs/{job_id}")
        response.raise_for_status()
        return response.json()


@dataclass
class Received:
    at: float  # time.time() when our subscriber received it
    event: dict[str, Any]
    message_id: str


# Job events that are not terminal: a job has any number of these before its one terminal event (one definition, read
# from the progress event structs).
PROGRESS_EVENTS = PROGRESS_EVENT_TYPES


@dataclass
class EventCollector:
    """Job events as a subscriber receives them: an SQS queue subscribed to the job-events topic."""

    stack: IsolatedStack
    received: list[Received] = field(default_factory=list)

    def __post_init__(self) -> None:
        sqs, sns = self.stack.client("sqs"), self.stack.client("sns")
        self.url = sqs.create_queue(QueueName=f"omnireel-bench-events-{uuid.uuid4().hex[:10]}")["QueueUrl"]
        arn = sqs.get_queue_attributes(QueueUrl=self.url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        sns.subscribe(TopicArn=self.stack.output("JobEventsTopicArn"), Protocol="sqs", Endpoint=arn)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="events", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        sqs = self.stack.client("sqs")
        while not self._stop.is_set():
            try:
                messages = sqs.receive_message(QueueUrl=self.url, MaxNumberOfMessages=10, WaitTimeSeconds=1).get(
                    "Messages", []
                )
            except Exception:
                time.sleep(0.2)
                continue
            now = time.time()
            for message in messages:
                body = json.loads(message["Body"])
                event = json.loads(body["Message"]) if body.get("Type") == "Notification" else body
                with self._lock:
                    self.received.append(Received(now, event, body.get("MessageId", message["MessageId"])))
            if messages:  # one call per receive (a 10,000-line batch's events drain ten times faster than one by one)
                entries = [{"Id": str(n), "ReceiptHandle": m["ReceiptHandle"]} for n, m in enumerate(messages)]
                sqs.delete_message_batch(QueueUrl=self.url, Entries=entries)

    def terminal(self, job_id: str) -> list[Received]:
        with self._lock:
            return [
                r
                for r in self.received
                if r.event.get("job_id") == job_id and r.event.get("event_type") not in PROGRESS_EVENTS
            ]

    def terminal_ids(self) -> set[str]:
        with self._lock:
            return {r.event.get("job_id") for r in self.received if r.event.get("event_type") not in PROGRESS_EVENTS}

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)


# Hundreds of jobs queue behind each other locally: the callback and the async request must outlast the queue.
LONG_TIMEOUTS = {
    "VideoRequestTtlSeconds": "900",
    "VideoHeartbeatSeconds": "1200",
    "VideoCallbackTimeoutSeconds": "1500",
}


def configure_model_times(stack: IsolatedStack, scale: float) -> None:
    """The emulators take the AWS sample's model times x ``scale`` (their latency fault hook)."""
    stack.emulator("images", {"faults": {"images": {"latency_s": IMAGE_MODEL_S * scale}}})
    stack.emulator("videos", {"faults": {"videos": {"latency_s": VIDEO_MODEL_S * scale}}})
