"""Issue 27 item 3: one instance type is declared as ``InstanceType``, several as ``InstancePools`` (never a one-entry
pool list), and the local SageMaker refuses a variant with both, as the API does (pools replace the type)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from botocore.exceptions import ClientError

from tests.e2e.helpers import aws_client
from tests.e2e.test_adhoc_endpoints import _client, _scratch_deployer
from tests.support.stack import LocalStack, start_stack, stop_stack

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def one_type_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    local = start_stack(
        tmp_path_factory.mktemp("omnireel-one-type"), "--no-relay", "--parameter", "ImageInstanceTypes=ml.g6e.xlarge"
    )
    try:
        yield local
    finally:
        left = stop_stack(local)
        assert not left, f"processes left after `omnireel local down`: {left}"


def _image_variant(stack: LocalStack) -> dict:
    sm = aws_client(stack, "sagemaker")
    endpoint = sm.describe_endpoint(EndpointName=stack.state()["outputs"]["ImageEndpointName"])
    (variant,) = sm.describe_endpoint_config(EndpointConfigName=endpoint["EndpointConfigName"])["ProductionVariants"]
    return variant


def test_one_image_instance_type_is_declared_as_instance_type(one_type_stack: LocalStack) -> None:
    variant = _image_variant(one_type_stack)
    assert variant["InstanceType"] == "ml.g6e.xlarge"
    assert "InstancePools" not in variant


def test_the_default_image_types_are_pools_in_priority_order(stack: LocalStack) -> None:
    variant = _image_variant(stack)
    assert "InstanceType" not in variant
    pools = sorted(variant["InstancePools"], key=lambda p: p["Priority"])
    assert [p["Priority"] for p in pools] == list(range(1, len(pools) + 1)) and len(pools) >= 2


def test_a_variant_with_both_instance_type_and_pools_is_refused(stack: LocalStack) -> None:
    """As a user allowed sagemaker:* (the developer identity may not create endpoint configs)."""
    reader = aws_client(stack, "sagemaker")
    endpoint = reader.describe_endpoint(EndpointName=stack.state()["outputs"]["ImageEndpointName"])
    config = reader.describe_endpoint_config(EndpointConfigName=endpoint["EndpointConfigName"])
    sm = _client(stack, "sagemaker", _scratch_deployer(stack))
    variant = {
        "VariantName": "AllTraffic",
        "ModelName": config["ProductionVariants"][0]["ModelName"],
        "InitialInstanceCount": 1,
        "InstanceType": "ml.g6e.xlarge",
        "InstancePools": [{"InstanceType": "ml.g6.xlarge", "Priority": 1}],
    }
    with pytest.raises(ClientError) as refused:
        sm.create_endpoint_config(EndpointConfigName="both-type-and-pools", ProductionVariants=[variant])
    error = refused.value.response["Error"]
    assert error["Code"] == "ValidationException" and "not both" in error["Message"], error
