"""Issue 16 item 8: an endpoint created outside the template (the AWS sample's deploy.py, against the local stack) is
InService only when a container serves it - a DLC-image model gets an emulator, any other image fails clearly.

The calls are deploy.py's own (CreateModel with the DLC image and SM_VLLM_MODEL, CreateEndpointConfig with one
AllTraffic variant, CreateEndpoint, the endpoint_in_service waiter, InvokeEndpoint with route=), made by a scratch IAM
user of the developer's (the local AWS enforces IAM: the developer identity itself may not create endpoints)."""

from __future__ import annotations

import base64
import json
import subprocess
import time
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError, WaiterError

from omnireel_local import home as homedir
from tests.support.stack import LocalStack, cli_command

from .helpers import aws_client, png_size

DLC_IMAGE = "763104351884.dkr.ecr.us-east-1.amazonaws.com/vllm:omni-sagemaker-cuda-v1.6"


def _scratch_deployer(stack: LocalStack) -> dict[str, Any]:
    """A scratch user allowed what deploy.py needs (and nothing in the template's name space)."""
    iam = aws_client(stack, "iam")
    name = f"{homedir.STACK_NAME}-scratch-deployer-{int(time.time() * 1000)}"
    iam.create_user(UserName=name)
    iam.put_user_policy(
        UserName=name,
        PolicyName="deploy-py",
        PolicyDocument=json.dumps(
            {
                "Version": "2012-10-17",
                "Statement": [
                    {"Effect": "Allow", "Action": ["sagemaker:*", "iam:PassRole"], "Resource": "*"},
                ],
            }
        ),
    )
    key = iam.create_access_key(UserName=name)["AccessKey"]
    return {"aws_access_key_id": key["AccessKeyId"], "aws_secret_access_key": key["SecretAccessKey"]}


def _client(stack: LocalStack, service: str, credentials: dict[str, Any]) -> Any:
    env = stack.outputs
    return boto3.client(service, endpoint_url=env["AWS_ENDPOINT_URL"], region_name=env["AWS_REGION"], **credentials)


def _deploy(sm: Any, name: str, image: str, model_id: str, role_arn: str) -> None:
    sm.create_model(
        ModelName=name,
        PrimaryContainer={"Image": image, "Environment": {"SM_VLLM_MODEL": model_id}},
        ExecutionRoleArn=role_arn,
    )
    sm.create_endpoint_config(
        EndpointConfigName=name,
        ProductionVariants=[
            {
                "VariantName": "AllTraffic",
                "ModelName": name,
                "InstanceType": "ml.g6.xlarge",
                "InitialInstanceCount": 1,
                "InitialVariantWeight": 1.0,
                "ContainerStartupHealthCheckTimeoutInSeconds": 1800,
                "InferenceAmiVersion": "al2023-ami-sagemaker-inference-gpu-4-1",
            }
        ],
    )
    sm.create_endpoint(EndpointName=name, EndpointConfigName=name)


@pytest.fixture(scope="module")
def deployer(stack: LocalStack) -> dict[str, Any]:
    return _scratch_deployer(stack)


def _role_arn(stack: LocalStack) -> str:
    role = stack.state()["provisioned"]["resources"]["SageMakerExecutionRole"]["id"]
    return role if role.startswith("arn:") else f"arn:aws:iam::{homedir.ACCOUNT_ID}:role/{role}"


def test_a_dlc_model_created_outside_the_template_is_creating_then_served(
    stack: LocalStack, deployer: dict[str, Any]
) -> None:
    sm = _client(stack, "sagemaker", deployer)
    name = f"vllm-omni-media-image-model-{int(time.time() * 1000)}"  # the sample's deploy.py names, hyphens and all
    _deploy(sm, name, DLC_IMAGE, "black-forest-labs/FLUX.2-klein-4B", _role_arn(stack))
    # Before the fix moto answered InService at once, with no container: every invocation then failed.
    assert sm.describe_endpoint(EndpointName=name)["EndpointStatus"] == "Creating"
    sm.get_waiter("endpoint_in_service").wait(EndpointName=name, WaiterConfig={"Delay": 1, "MaxAttempts": 90})

    # Issue 37 item 1: `eval "$(omnireel local env)"` under `set -e` exports everything, this model's emulator URL
    # included (a hyphen in its variable name made bash refuse the line and stop before the relay token).
    variable = f"OMNIREEL_EMULATOR_VLLM_OMNI_MEDIA_IMAGE_MODEL_{name.rsplit('-', 1)[1]}_URL"
    script = f'set -eu; eval "$("$@" local env)"; printf "%s\\n%s\\n" "$OMNIREEL_RELAY_TOKEN" "${variable}"'
    shell = subprocess.run(
        ["bash", "-c", script, "bash", *cli_command()], env=stack.env, capture_output=True, text=True, timeout=60
    )
    assert shell.returncode == 0, shell.stderr
    token, url = shell.stdout.splitlines()
    assert token == stack.outputs["OMNIREEL_RELAY_TOKEN"]
    assert url == stack.state()["emulators"][name]

    runtime = _client(stack, "sagemaker-runtime", deployer)
    body = {"prompt": "a lighthouse at dusk", "size": "64x64", "num_inference_steps": 2, "response_format": "b64_json"}
    response = runtime.invoke_endpoint(
        EndpointName=name,
        Body=json.dumps(body).encode(),
        ContentType="application/json",
        Accept="application/json",
        CustomAttributes="route=/v1/images/generations",
    )
    png = base64.b64decode(json.loads(response["Body"].read())["data"][0]["b64_json"])
    path = stack.home / f"{name}.png"
    path.write_bytes(png)
    assert png_size(path) == (64, 64)
    # The emulator is the stack's child: listed in the state, stopped by `local down` (the session fixture checks).
    assert name in stack.state().get("emulators", {})

    # Deleted means deleted on the next call, as on AWS: the shim reads the endpoint's configuration as it stands (it
    # used to cache three Describe* answers for 10 s, so this invocation was still served).
    sm.delete_endpoint(EndpointName=name)
    with pytest.raises(ClientError) as refused:
        runtime.invoke_endpoint(
            EndpointName=name,
            Body=json.dumps(body).encode(),
            ContentType="application/json",
            CustomAttributes="route=/v1/images/generations",
        )
    assert refused.value.response["Error"]["Code"] == "ValidationError"
    assert f"Endpoint {name} of account" in refused.value.response["Error"]["Message"]

    # Issue 27 item 10: DeleteEndpoint passes through Deleting, as on AWS (moto removed it at once, so a script's
    # delete-wait never polled); the waiter's own polling ends it, bounded.
    assert sm.describe_endpoint(EndpointName=name)["EndpointStatus"] == "Deleting"
    sm.get_waiter("endpoint_deleted").wait(EndpointName=name, WaiterConfig={"Delay": 1, "MaxAttempts": 30})
    with pytest.raises(ClientError) as gone:
        sm.describe_endpoint(EndpointName=name)
    assert gone.value.response["Error"]["Code"] == "ValidationException"  # the control plane's spelling
    assert "Could not find endpoint" in gone.value.response["Error"]["Message"]


def test_a_model_with_another_image_fails_with_a_reason_instead_of_in_service(
    stack: LocalStack, deployer: dict[str, Any]
) -> None:
    sm = _client(stack, "sagemaker", deployer)
    name = f"sample-custom-{int(time.time() * 1000)}"
    _deploy(sm, name, "123456789012.dkr.ecr.us-east-1.amazonaws.com/my-own-server:latest", "x/y", _role_arn(stack))
    with pytest.raises(WaiterError):
        sm.get_waiter("endpoint_in_service").wait(EndpointName=name, WaiterConfig={"Delay": 1, "MaxAttempts": 30})
    described = sm.describe_endpoint(EndpointName=name)
    assert described["EndpointStatus"] == "Failed"
    assert "vLLM-Omni DLC" in described["FailureReason"] and "my-own-server" in described["FailureReason"]

    # Issue 27 item 10: SageMaker's runtime does not serve a Failed endpoint and answers as for one it does not know
    # (the local stack answered 503 ServiceUnavailable, which botocore retries and a caller reads as "try later").
    runtime = _client(stack, "sagemaker-runtime", deployer)
    for invoke in (
        lambda: runtime.invoke_endpoint(EndpointName=name, Body=b"{}", ContentType="application/json"),
        lambda: runtime.invoke_endpoint_async(EndpointName=name, InputLocation="s3://any-bucket/any-key"),
    ):
        with pytest.raises(ClientError) as refused:
            invoke()
        assert refused.value.response["Error"]["Code"] == "ValidationError"
        assert refused.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400
        expected = f"Endpoint {name} of account {homedir.ACCOUNT_ID} not found."
        assert refused.value.response["Error"]["Message"] == expected
    sm.delete_endpoint(EndpointName=name)  # the only operation a Failed endpoint allows
    sm.get_waiter("endpoint_deleted").wait(EndpointName=name, WaiterConfig={"Delay": 1, "MaxAttempts": 30})


def test_the_template_endpoints_are_in_service(stack: LocalStack) -> None:
    sm = aws_client(stack, "sagemaker")
    for output in ("ImageEndpointName", "VideoEndpointName"):
        name = stack.state()["outputs"][output]
        assert sm.describe_endpoint(EndpointName=name)["EndpointStatus"] == "InService", name


def test_chat_completions_through_invoke_endpoint(stack: LocalStack, deployer: dict[str, Any]) -> None:
    """Issue 27 item 11: vLLM-Omni's chat route (a documented SageMaker route of the DLC) through the local AWS, with
    the payload vLLM-Omni's own example clients send. The image endpoint answers PNG parts (the local stack answered
    404); what the video model answers is in tests/unit/emulator/test_emulator_chat.py."""
    runtime = _client(stack, "sagemaker-runtime", deployer)
    payload = {"messages": [{"role": "user", "content": "a kite over the sea"}], "extra_body": {"height": 64,
               "width": 96, "seed": 3}}  # fmt: skip
    response = runtime.invoke_endpoint(
        EndpointName=stack.state()["outputs"]["ImageEndpointName"],
        Body=json.dumps(payload).encode(),
        ContentType="application/json",
        CustomAttributes="route=/v1/chat/completions",
    )
    part = json.loads(response["Body"].read())["choices"][0]["message"]["content"][0]
    header, data = part["image_url"]["url"].split(",", 1)
    assert header == "data:image/png;base64"
    path = stack.home / "chat-completion.png"
    path.write_bytes(base64.b64decode(data))
    assert png_size(path) == (96, 64)
