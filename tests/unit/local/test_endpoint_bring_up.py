"""The SageMaker shim's CreateEndpoint decision (moto patch 14): InService only once a container serves the model.

In-process, no server: ``endpoint_created`` is what the patched CreateEndpoint calls; ``set_status`` records what
DescribeEndpoint would then answer. The e2e version (the AWS sample's calls against the local stack) is
tests/e2e/test_adhoc_endpoints.py."""

from __future__ import annotations

import json
import queue
from collections.abc import Iterator
from typing import Any

import pytest

from omnireel_local.iam.identities import Credentials
from omnireel_local.sagemaker_hosting import SageMakerHosting

DLC = "763104351884.dkr.ecr.us-east-1.amazonaws.com/vllm:omni-sagemaker-cuda-v1.6"
WAIT_S = 10.0


class Statuses:
    def __init__(self) -> None:
        self.seen: queue.Queue[tuple[str, str | None]] = queue.Queue()

    def __call__(self, status: str, reason: str | None = None) -> None:
        self.seen.put((status, reason))

    def next(self) -> tuple[str, str | None]:
        return self.seen.get(timeout=WAIT_S)


def _hosting(start: Any = None) -> SageMakerHosting:
    credentials = Credentials("AKIDLOCALTEST", "secret")
    return SageMakerHosting("http://127.0.0.1:9", "us-east-1", "123456789012", lambda role: credentials,
                            start_container=start)  # fmt: skip


@pytest.fixture
def started() -> Iterator[list[tuple[str, dict[str, str]]]]:
    yield []


def test_the_shim_never_answers_in_service_on_its_own() -> None:
    """Without a container and before `local up` attached the template's, the endpoint stays Creating."""
    hosting, statuses = _hosting(), Statuses()
    hosting.endpoint_created("e", "m", DLC, {}, statuses)
    assert statuses.next() == ("Creating", None)
    with pytest.raises(queue.Empty):
        statuses.seen.get(timeout=0.5)
    hosting.shutdown()


def test_a_template_model_is_creating_until_local_up_attaches_its_emulator() -> None:
    hosting, statuses = _hosting(), Statuses()
    hosting.endpoint_created("omnireel-local-image", "ImageModel-x", DLC, {}, statuses)
    assert statuses.next() == ("Creating", None)
    assert statuses.seen.empty()  # nothing serves the model yet: no InService
    hosting.attach("ImageModel-x", "http://127.0.0.1:1")
    assert statuses.next() == ("InService", None)
    hosting.shutdown()


def test_a_dlc_model_outside_the_template_gets_an_emulator(started: list[tuple[str, dict[str, str]]]) -> None:
    def start(model: str, env: dict[str, str]) -> str:
        started.append((model, env))
        return "http://127.0.0.1:2"

    hosting, statuses = _hosting(start), Statuses()
    hosting.template_containers_attached()
    hosting.endpoint_created("sample", "sample-model", DLC, {"SM_VLLM_MODEL": "black-forest-labs/FLUX.2-klein-4B"},
                             statuses)  # fmt: skip
    assert statuses.next() == ("Creating", None)
    assert statuses.next() == ("InService", None)
    assert started == [("sample-model", {"SM_VLLM_MODEL": "black-forest-labs/FLUX.2-klein-4B"})]
    assert hosting._containers["sample-model"] == "http://127.0.0.1:2"
    hosting.shutdown()


@pytest.mark.parametrize(
    "image",
    [
        "123456789012.dkr.ecr.us-east-1.amazonaws.com/my-own-server:latest",
        "763104351884.dkr.ecr.us-east-1.amazonaws.com/vllm:omni-sagemaker-cuda-v1.4",  # a contract we do not emulate
        "",
    ],
)
def test_any_other_image_fails_with_a_reason(image: str, started: list[tuple[str, dict[str, str]]]) -> None:
    hosting, statuses = _hosting(lambda m, e: started.append((m, e)) or "http://x"), Statuses()
    hosting.template_containers_attached()
    hosting.endpoint_created("custom", "custom-model", image, {}, statuses)
    assert statuses.next() == ("Creating", None)
    status, reason = statuses.next()
    assert status == "Failed" and "vLLM-Omni DLC" in (reason or "")
    assert started == []
    hosting.shutdown()


def test_an_emulator_that_does_not_start_fails_the_endpoint() -> None:
    def start(model: str, env: dict[str, str]) -> str:
        raise TimeoutError("emulator for m did not become healthy")

    hosting, statuses = _hosting(start), Statuses()
    hosting.template_containers_attached()
    hosting.endpoint_created("e", "m", DLC, {}, statuses)
    assert statuses.next() == ("Creating", None)
    status, reason = statuses.next()
    assert status == "Failed" and "did not pass its health check" in (reason or "")
    hosting.shutdown()


# ---------------------------------------------------------------- issue 27 item 10: which statuses the runtime serves
def _moto_endpoint(status: str) -> Any:
    """An endpoint in moto's SageMaker backend (moto marks it InService), then moved to ``status``."""
    import boto3

    sm = boto3.client("sagemaker", region_name="us-east-1")
    sm.create_model(ModelName="m", PrimaryContainer={"Image": DLC}, ExecutionRoleArn="arn:aws:iam::123456789012:role/r")
    sm.create_endpoint_config(
        EndpointConfigName="c",
        ProductionVariants=[{"VariantName": "AllTraffic", "ModelName": "m", "InstanceType": "ml.m5.large",
                             "InitialInstanceCount": 1}],
    )  # fmt: skip
    sm.create_endpoint(EndpointName="e", EndpointConfigName="c")
    from moto.sagemaker.models import sagemaker_backends

    endpoint = sagemaker_backends["123456789012"]["us-east-1"].endpoints["e"]
    endpoint.endpoint_status = status
    return endpoint


# Every EndpointStatus of the SageMaker API model, so a status added there cannot slip past this table.
def _all_statuses() -> list[str]:
    import botocore.session

    model = botocore.session.get_session().get_service_model("sagemaker")
    return list(model.shape_for("EndpointStatus").enum)


@pytest.mark.parametrize("status", _all_statuses())
def test_the_runtime_serves_an_endpoint_only_in_a_serving_status(status: str) -> None:
    from moto import mock_aws

    from omnireel_local.sagemaker_hosting import SERVING_STATUSES

    with mock_aws():
        _moto_endpoint(status)
        hosting = _hosting()
        hosting.attach("m", "http://127.0.0.1:9")  # discard port: a served endpoint reaches it and fails to connect
        try:
            code, headers, body = hosting.invoke("e", b"{}", {"Content-Type": "application/json"})
            async_code, async_headers, async_body = hosting.invoke_async(
                "e", {"X-Amzn-SageMaker-InputLocation": "s3://b/k"}
            )
        finally:
            hosting.shutdown()
    not_found = "Endpoint e of account 123456789012 not found."
    if status in SERVING_STATUSES:
        assert (code, not_found in str(body)) == (503, False)  # reached the (absent) container
    else:
        assert (code, headers.get("x-amzn-ErrorType"), json.loads(str(body))["Message"]) == (
            400, "ValidationError", not_found
        )  # fmt: skip
        assert (async_code, async_headers.get("x-amzn-ErrorType")) == (400, "ValidationError")
        assert json.loads(async_body)["Message"] == not_found


def test_delete_passes_through_deleting_before_the_endpoint_is_gone() -> None:
    hosting, statuses = _hosting(), Statuses()
    finished: queue.Queue[bool] = queue.Queue()
    hosting.endpoint_deleting("e", statuses, lambda: finished.put(True))
    assert statuses.next() == ("Deleting", None)
    assert finished.empty()  # not at once
    assert finished.get(timeout=WAIT_S) is True
    hosting.shutdown()
