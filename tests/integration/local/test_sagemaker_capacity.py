"""Issue 34 item 9: the local SageMaker hosting enforces capacity as SageMaker does.

- InvokeEndpoint: the container runs at most concurrency_per_instance x the variant's current instance count at once,
  the rest wait inside it; a request that cannot finish (wait + work) within InvokeEndpoint's limit fails as ModelError
  424 with OriginalStatusCode 408 (``REALTIME_TIMEOUT_S``, lowered here: no 60 s sleep).
- InvokeEndpointAsync: at most MaxConcurrentInvocationsPerInstance x the current instance count run at once, and a
  scale-out (UpdateEndpointWeightsAndCapacities) starts queued requests.

The hosting runs in process against moto's SageMaker state (as in ``omnireel local up``), the container is a real
emulator process on a free loopback port (real connections, so a caller that gives up really disconnects)."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws

from omnireel_local import sagemaker_hosting
from omnireel_local.home import free_port as _free_port
from omnireel_local.iam.identities import Credentials
from omnireel_local.sagemaker_hosting import SageMakerHosting
from tests.support.loopback import http
from tests.support.processes import stop_process, wait_until_serving

REPO = Path(__file__).resolve().parents[3]
REGION, ACCOUNT = "us-east-1", "123456789012"
ROLE = f"arn:aws:iam::{ACCOUNT}:role/sagemaker-execution"
MODEL = "capacity-model"
ROUTE = "route=/v1/images/generations"
BODY = json.dumps({"prompt": "a kite", "size": "32x32", "seed": 1}).encode()
WAIT_S = 30.0


@pytest.fixture(scope="module")
def emulator(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A container emulator serving everything, one generation request per instance (the default)."""
    port = _free_port()
    log_path = tmp_path_factory.mktemp("emulator") / "emulator.log"
    env = {**os.environ, "PYTHONPATH": str(REPO / "local")}
    env.pop("SM_VLLM_MODEL", None)
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "omnireel_local.emulator", "--host", "127.0.0.1", "--port", str(port)],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
        )
        base = f"http://127.0.0.1:{port}"
        try:
            wait_until_serving(proc, base, 30, str(log_path))
            yield base
        finally:
            stop_process(proc, grace_s=10)


@pytest.fixture(scope="module")
def sagemaker() -> Iterator[Any]:
    with mock_aws():
        client = boto3.client("sagemaker", region_name=REGION)
        client.create_model(ModelName=MODEL, PrimaryContainer={"Image": "any"}, ExecutionRoleArn=ROLE)
        yield client


@pytest.fixture
def hosting(emulator: str, sagemaker: Any) -> Iterator[SageMakerHosting]:
    credentials = Credentials("AKIDLOCALTEST", "secret")
    local = SageMakerHosting("http://127.0.0.1:9", REGION, ACCOUNT, lambda role: credentials)
    local.attach(MODEL, emulator)
    yield local
    local.shutdown()


@pytest.fixture
def faults(emulator: str) -> Iterator[Callable[[dict[str, Any]], None]]:
    def set_faults(images: dict[str, Any]) -> None:
        http().put(f"{emulator}/_emulator/config", json={"faults": {"images": images}}, timeout=10).raise_for_status()
        http().delete(f"{emulator}/_emulator/stats", timeout=10).raise_for_status()

    yield set_faults
    set_faults(None)  # type: ignore[arg-type]


def _endpoint(sagemaker: Any, name: str, instances: int, async_per_instance: int | None = None) -> str:
    variant = {"VariantName": "AllTraffic", "ModelName": MODEL, "InstanceType": "ml.m5.large",
               "InitialInstanceCount": instances, "InitialVariantWeight": 1.0}  # fmt: skip
    extra: dict[str, Any] = {}
    if async_per_instance is not None:
        extra["AsyncInferenceConfig"] = {
            "ClientConfig": {"MaxConcurrentInvocationsPerInstance": async_per_instance},
            "OutputConfig": {
                "S3OutputPath": "s3://capacity-bucket/async/outputs/",
                "S3FailurePath": "s3://capacity-bucket/async/failures/",
                "NotificationConfig": {
                    "SuccessTopic": f"arn:aws:sns:{REGION}:{ACCOUNT}:success",
                    "ErrorTopic": f"arn:aws:sns:{REGION}:{ACCOUNT}:error",
                },
            },
        }
    sagemaker.create_endpoint_config(EndpointConfigName=name, ProductionVariants=[variant], **extra)
    sagemaker.create_endpoint(EndpointName=name, EndpointConfigName=name)
    return name


def _scale(sagemaker: Any, name: str, instances: int) -> None:
    sagemaker.update_endpoint_weights_and_capacities(
        EndpointName=name,
        DesiredWeightsAndCapacities=[{"VariantName": "AllTraffic", "DesiredWeight": 1.0,
                                      "DesiredInstanceCount": instances}],
    )  # fmt: skip


def _stats(emulator: str) -> dict[str, Any]:
    return http().get(f"{emulator}/_emulator/stats", timeout=10).json()["concurrency"]["images"]


def _wait_until(what: str, probe: Callable[[], Any], predicate: Callable[[Any], bool]) -> Any:
    deadline = time.monotonic() + WAIT_S
    while True:
        value = probe()
        if predicate(value):
            return value
        assert time.monotonic() < deadline, f"{what}: never happened, last seen {value}"
        time.sleep(0.05)


def _invoke(hosting: SageMakerHosting, name: str) -> tuple[int, dict[str, str], Any]:
    headers = {"Content-Type": "application/json", "X-Amzn-SageMaker-Custom-Attributes": ROUTE}
    return hosting.invoke(name, BODY, headers)


def test_n_plus_one_invocations_with_capacity_n_one_waits_in_the_container(
    hosting: SageMakerHosting, sagemaker: Any, emulator: str, faults: Callable[[dict[str, Any]], None]
) -> None:
    name = _endpoint(sagemaker, "capacity-two-instances", instances=2)
    faults({"latency_s": 1.5})
    with ThreadPoolExecutor(max_workers=3) as pool:
        futures = [pool.submit(_invoke, hosting, name) for _ in range(3)]
        seen = _wait_until("three requests at the container", lambda: _stats(emulator),
                           lambda s: s["in_flight"] + s["waiting"] == 3)  # fmt: skip
        assert (seen["capacity"], seen["in_flight"], seen["waiting"]) == (2, 2, 1)
        assert [f.result(timeout=WAIT_S)[0] for f in futures] == [200, 200, 200]
    stats = _stats(emulator)
    assert (stats["peak_in_flight"], stats["peak_waiting"], stats["waited"]) == (2, 1, 1)


def test_a_request_that_cannot_finish_within_invoke_endpoints_limit_fails_as_model_error_408(
    hosting: SageMakerHosting,
    sagemaker: Any,
    emulator: str,
    faults: Callable[[dict[str, Any]], None],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Limit 4.5 s (60 s on AWS), 3 s of work, one instance, three requests at once: the first is served; the second
    starts after 3 s and cannot finish by 4.5 s; the third cannot even start (it waits, its caller gives up, and the
    container never renders it). Both fail exactly as InvokeEndpoint's timeout does."""
    monkeypatch.setattr(sagemaker_hosting, "REALTIME_TIMEOUT_S", 4.5)
    name = _endpoint(sagemaker, "capacity-timeout", instances=1)
    faults({"latency_s": 3.0})
    with ThreadPoolExecutor(max_workers=3) as pool:
        answers = list(pool.map(lambda _: _invoke(hosting, name), range(3)))
    assert sorted(status for status, _, _ in answers) == [200, 424, 424]
    for status, headers, body in answers:
        if status == 424:
            assert headers["x-amzn-ErrorType"] == "ModelError"
            error = json.loads(body)
            assert error["OriginalStatusCode"] == 408
            assert "timed out while waiting for a response from container primary" in error["Message"]
            assert error["LogStreamArn"].endswith(f"/aws/sagemaker/Endpoints/{name}:log-stream:AllTraffic/local")
    stats = _wait_until("the second request's render to end", lambda: _stats(emulator), lambda s: s["in_flight"] == 0)
    assert (stats["started"], stats["abandoned"], stats["peak_in_flight"]) == (2, 1, 1)


def test_the_realtime_capacity_follows_the_variants_current_instance_count(
    hosting: SageMakerHosting, sagemaker: Any, emulator: str, faults: Callable[[dict[str, Any]], None]
) -> None:
    name = _endpoint(sagemaker, "capacity-scaled", instances=1)
    _scale(sagemaker, name, 3)
    faults({"latency_s": 1.0})
    with ThreadPoolExecutor(max_workers=3) as pool:
        assert [status for status, _, _ in pool.map(lambda _: _invoke(hosting, name), range(3))] == [200] * 3
    stats = _stats(emulator)
    assert (stats["capacity"], stats["peak_in_flight"], stats["peak_waiting"]) == (3, 3, 0)


class _FakeRoleClient:
    """What the hosting does as the model's execution role: read the input, write the output, publish the result."""

    def __init__(self) -> None:
        self.notifications: list[dict[str, Any]] = []

    def get_object(self, Bucket: str, Key: str) -> dict[str, Any]:
        return {"Body": io.BytesIO(BODY)}

    def put_object(self, **_: Any) -> dict[str, Any]:
        return {}

    def publish(self, TopicArn: str, Message: str) -> dict[str, Any]:
        self.notifications.append(json.loads(Message))
        return {}


def test_the_async_endpoint_runs_per_instance_times_instances_and_follows_a_scale_out(
    hosting: SageMakerHosting, sagemaker: Any, emulator: str, faults: Callable[[dict[str, Any]], None]
) -> None:
    role = _FakeRoleClient()
    hosting._as_role = lambda endpoint, service: role  # type: ignore[method-assign]
    name = _endpoint(sagemaker, "capacity-async", instances=1, async_per_instance=1)
    faults({"latency_s": 2.0})
    headers = {
        "X-Amzn-SageMaker-InputLocation": "s3://capacity-bucket/in.json",
        "X-Amzn-SageMaker-Content-Type": "application/json",
        "X-Amzn-SageMaker-Custom-Attributes": ROUTE,
    }
    for _ in range(3):
        assert hosting.invoke_async(name, headers)[0] == 202
    seen = _wait_until("one running, two queued", lambda: hosting.async_stats(name), lambda s: s["running"] == 1)
    assert seen["waiting"] == 2
    # ... and the container runs it (the hosting counts a request as running before it has sent it)
    _wait_until("the container runs the first", lambda: _stats(emulator), lambda s: s["in_flight"] == 1)
    _scale(sagemaker, name, 2)  # a scale-out starts a queued request without a new invocation
    _wait_until("two running", lambda: hosting.async_stats(name), lambda s: s["running"] == 2)
    _wait_until("three notifications", lambda: len(role.notifications), lambda n: n == 3)
    assert {n["invocationStatus"] for n in role.notifications} == {"Completed"}
    assert hosting.async_stats(name)["peak_running"] == 2
    stats = _stats(emulator)
    assert (stats["peak_in_flight"], stats["peak_waiting"]) == (2, 0)  # SageMaker's queue held them, not the container


class _HeldInputRoleClient(_FakeRoleClient):
    """Holds every input read until ``release`` is set: the request has been dispatched but not yet sent."""

    def __init__(self) -> None:
        super().__init__()
        self.reading, self.release = threading.Event(), threading.Event()

    def get_object(self, Bucket: str, Key: str) -> dict[str, Any]:
        self.reading.set()
        assert self.release.wait(WAIT_S), "the test never released the input read"
        return super().get_object(Bucket, Key)


def test_an_async_request_tells_the_container_the_instance_count_of_when_it_is_sent(
    hosting: SageMakerHosting, sagemaker: Any, emulator: str, faults: Callable[[dict[str, Any]], None]
) -> None:
    """Dispatched at one instance, sent after a scale-out to two: the container must hear two. Told one (the count at
    dispatch), it shrank its capacity to one and held back a request another instance could run (a make test run
    at 2aa64c4: peak_waiting 1 in the scale-out test above)."""
    role = _HeldInputRoleClient()
    hosting._as_role = lambda endpoint, service: role  # type: ignore[method-assign]
    name = _endpoint(sagemaker, "capacity-late-send", instances=1, async_per_instance=1)
    faults({"latency_s": 0.1})
    headers = {"X-Amzn-SageMaker-InputLocation": "s3://capacity-bucket/in.json", "X-Amzn-SageMaker-Custom-Attributes":
               ROUTE, "X-Amzn-SageMaker-Content-Type": "application/json"}  # fmt: skip
    try:
        assert hosting.invoke_async(name, headers)[0] == 202
        assert role.reading.wait(WAIT_S), "the request was never dispatched"
        _scale(sagemaker, name, 2)
    finally:
        role.release.set()
    _wait_until("the notification", lambda: len(role.notifications), lambda n: n == 1)
    assert role.notifications[0]["invocationStatus"] == "Completed"
    assert _stats(emulator)["capacity"] == 2  # per instance (1) x the instances when it was sent


def test_an_async_endpoint_at_zero_instances_runs_nothing_until_it_has_one(
    hosting: SageMakerHosting, sagemaker: Any, emulator: str, faults: Callable[[dict[str, Any]], None]
) -> None:
    role = _FakeRoleClient()
    hosting._as_role = lambda endpoint, service: role  # type: ignore[method-assign]
    name = _endpoint(sagemaker, "capacity-zero", instances=1, async_per_instance=2)
    _scale(sagemaker, name, 0)
    faults({"latency_s": 0.1})
    headers = {"X-Amzn-SageMaker-InputLocation": "s3://capacity-bucket/in.json", "X-Amzn-SageMaker-Custom-Attributes":
               ROUTE, "X-Amzn-SageMaker-Content-Type": "application/json"}  # fmt: skip
    assert hosting.invoke_async(name, headers)[0] == 202
    time.sleep(2 * sagemaker_hosting.ASYNC_CAPACITY_POLL_S)  # two capacity re-reads: still nothing may start
    assert hosting.async_stats(name) == {"waiting": 1, "running": 0, "peak_running": 0}
    _scale(sagemaker, name, 1)  # what the wake-up alarm's step scaling does
    _wait_until("the notification", lambda: len(role.notifications), lambda n: n == 1)
    assert role.notifications[0]["invocationStatus"] == "Completed"
