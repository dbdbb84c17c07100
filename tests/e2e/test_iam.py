"""IAM is enforced by the local AWS as AWS enforces it: per-function roles from template.yaml, known keys only.

Everything goes through the user's path: the developer identity that ``omnireel local env`` exports, the CLI, the front
door and the role policies the template declares.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError

from tests.support.stack import ROOT, LocalStack, cli_command

pytestmark = pytest.mark.e2e


def _client(stack: LocalStack, service: str, **credentials: str) -> Any:
    keys = credentials or {
        "aws_access_key_id": stack.outputs["AWS_ACCESS_KEY_ID"],
        "aws_secret_access_key": stack.outputs["AWS_SECRET_ACCESS_KEY"],
    }
    return boto3.client(
        service, endpoint_url=stack.outputs["AWS_ENDPOINT_URL"], region_name=stack.outputs["AWS_REGION"], **keys
    )


def test_an_unknown_access_key_is_refused_by_the_local_aws(stack: LocalStack) -> None:
    stranger = {"aws_access_key_id": "AKIAUNKNOWNLOCALKEY0", "aws_secret_access_key": "not-a-secret"}
    with pytest.raises(ClientError) as s3_error:
        _client(stack, "s3", **stranger).list_buckets()
    assert s3_error.value.response["Error"]["Code"] == "InvalidAccessKeyId"
    with pytest.raises(ClientError) as sqs_error:
        _client(stack, "sqs", **stranger).list_queues()
    assert sqs_error.value.response["ResponseMetadata"]["HTTPStatusCode"] == 403
    # A known key with a wrong secret is a signature mismatch, not a pass.
    wrong_secret = {"aws_access_key_id": stack.outputs["AWS_ACCESS_KEY_ID"], "aws_secret_access_key": "wrong"}
    with pytest.raises(ClientError) as signature_error:
        _client(stack, "dynamodb", **wrong_secret).list_tables()
    assert signature_error.value.response["ResponseMetadata"]["HTTPStatusCode"] == 403


def test_the_developer_identity_is_not_an_administrator(stack: LocalStack) -> None:
    me = _client(stack, "sts").get_caller_identity()
    assert me["Arn"].endswith(":user/omnireel-local")
    with pytest.raises(ClientError) as denied:
        _client(stack, "iam").create_user(UserName="escalation")
    assert denied.value.response["Error"]["Code"] == "AccessDenied"
    # `omnireel invoke` needs lambda:InvokeFunction, scoped to the stack's own functions (<stack>-*): another
    # application's function in the same account stays out of reach.
    with pytest.raises(ClientError) as denied_invoke:
        _client(stack, "lambda").invoke(FunctionName="another-app-Function", Payload=b"{}")
    assert denied_invoke.value.response["ResponseMetadata"]["HTTPStatusCode"] == 403


def test_a_bucket_that_does_not_exist_is_404_whoever_asks_and_creating_it_is_still_authorised(
    stack: LocalStack,
) -> None:
    """Issue 27 item 8: S3 answers a bucket that does not exist with 404 NoSuchBucket, whatever the caller's rights
    (403 would mean "exists, not yours"); the AWS sample's deploy.py creates its bucket on that 404 and stopped with
    "Bucket exists but is not accessible" on the local 403. Creating it is still an authorised action."""
    s3 = _client(stack, "s3")
    missing = "omnireel-e2e-no-such-bucket-8c1f"
    with pytest.raises(ClientError) as head:
        s3.head_bucket(Bucket=missing)
    assert head.value.response["ResponseMetadata"]["HTTPStatusCode"] == 404
    with pytest.raises(ClientError) as get:
        s3.get_object(Bucket=missing, Key="x")
    assert get.value.response["Error"]["Code"] == "NoSuchBucket"
    with pytest.raises(ClientError) as create:
        s3.create_bucket(Bucket=missing)
    assert create.value.response["Error"]["Code"] == "AccessDenied"  # the developer may not create buckets
    with pytest.raises(ClientError) as head_again:
        s3.head_bucket(Bucket=missing)
    assert head_again.value.response["ResponseMetadata"]["HTTPStatusCode"] == 404


def test_the_developer_may_describe_the_models_its_endpoints_serve_and_no_others(stack: LocalStack) -> None:
    """Issue 27 item 9: inspecting the stack includes which model and image an endpoint serves."""
    sm = _client(stack, "sagemaker")
    served = []
    for output in ("ImageEndpointName", "VideoEndpointName"):
        config = sm.describe_endpoint(EndpointName=stack.state()["outputs"][output])["EndpointConfigName"]
        (variant,) = sm.describe_endpoint_config(EndpointConfigName=config)["ProductionVariants"]
        model = sm.describe_model(ModelName=variant["ModelName"])
        served.append(model["PrimaryContainer"]["Environment"]["SM_VLLM_MODEL"])
        assert "vllm:omni-sagemaker" in model["PrimaryContainer"]["Image"]
    assert served == ["black-forest-labs/FLUX.2-klein-4B", "Wan-AI/Wan2.1-VACE-1.3B-diffusers"]
    with pytest.raises(ClientError) as denied:
        sm.describe_model(ModelName="another-app-model")
    assert denied.value.response["ResponseMetadata"]["HTTPStatusCode"] in (400, 403)
    assert "AccessDenied" in denied.value.response["Error"]["Code"]


def test_local_env_exports_the_developer_identity_to_a_child_shell(stack: LocalStack) -> None:
    """Defect 10: `eval "$(omnireel local env)"` must export, or boto3 in that shell talks to real AWS."""
    probe = (
        "import boto3, json, os; "
        "print(json.dumps({'arn': boto3.client('sts').get_caller_identity()['Arn'], "
        "'endpoint': os.environ.get('AWS_ENDPOINT_URL'), "
        "'buckets': [b['Name'] for b in boto3.client('s3').list_buckets()['Buckets']]}))"
    )
    cli = " ".join(f"'{part}'" for part in cli_command())
    script = f'eval "$({cli} local env)" && exec "{sys.executable}" -c "{probe}"'
    env = {
        **stack.env,
        # A developer's real-AWS settings in the parent shell must not leak into the local identity.
        "AWS_PROFILE": "real-account-profile",
        "AWS_SESSION_TOKEN": "real-session-token",
        "AWS_ACCESS_KEY_ID": "AKIAREALACCOUNTKEY00",
        "AWS_SECRET_ACCESS_KEY": "real-secret",
    }
    env.pop("AWS_ENDPOINT_URL", None)
    result = subprocess.run(
        ["bash", "-c", script], env=env, cwd=ROOT, capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, result.stderr
    seen = json.loads(result.stdout.strip().splitlines()[-1])
    assert seen["arn"].endswith(":user/omnireel-local")
    assert seen["endpoint"] == stack.outputs["AWS_ENDPOINT_URL"]
    assert stack.outputs["OMNIREEL_INBOX_BUCKET_NAME"] in seen["buckets"]


def _stack_role_policies(iam, fragment: str) -> tuple[str, dict[str, dict]]:  # type: ignore[no-untyped-def]
    """The stack role whose name contains ``fragment`` and its inline policies (name -> document)."""
    role = next(r["RoleName"] for r in iam.list_roles()["Roles"] if fragment in r["RoleName"])
    policies = {}
    for name in iam.list_role_policies(RoleName=role)["PolicyNames"]:
        document = iam.get_role_policy(RoleName=role, PolicyName=name)["PolicyDocument"]
        policies[name] = json.loads(document) if isinstance(document, str) else document
    return role, policies


@contextlib.contextmanager
def _role_policy_replaced(iam, role: str, name: str, original: dict, reduced: dict | None) -> Iterator[str]:  # type: ignore[no-untyped-def]
    """Put ``reduced`` in place of the role's policy ``name`` (None: delete it), as the developer, through IAM; the
    original is put back afterwards."""
    if reduced is None:
        iam.delete_role_policy(RoleName=role, PolicyName=name)
    else:
        iam.put_role_policy(RoleName=role, PolicyName=name, PolicyDocument=json.dumps(reduced))
    try:
        yield role
    finally:
        iam.put_role_policy(RoleName=role, PolicyName=name, PolicyDocument=json.dumps(original))


@pytest.fixture
def generate_image_role_without_put(stack: LocalStack) -> Iterator[str]:
    """The GenerateImage role's policy without s3:PutObject; restored after."""
    iam = _client(stack, "iam")
    role, policies = _stack_role_policies(iam, "GenerateImageFunctionRole")
    ((name, document),) = policies.items()
    reduced = json.loads(json.dumps(document))
    for statement in reduced["Statement"]:
        actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
        statement["Action"] = [a for a in actions if a != "s3:PutObject"] or ["s3:GetObject"]
    assert reduced != document, "the GenerateImage role had no s3:PutObject to remove"
    with _role_policy_replaced(iam, role, name, document, reduced):
        yield role


def test_a_role_missing_one_permission_fails_the_job_with_access_denied(
    stack: LocalStack, generate_image_role_without_put: str
) -> None:
    result = stack.cli("submit", "a lantern on a quiet pier", "--wait", "--json", "--timeout", "90")
    assert result.returncode != 0, result.stdout
    job = json.loads(result.stdout)
    assert job["status"] == "failed"
    assert job["error"]["stage"] == "generate_image"
    message = job["error"]["message"]
    assert "AccessDenied" in message, message
    assert "s3:PutObject" in message and generate_image_role_without_put in message, message


@pytest.fixture
def state_machine_cannot_invoke_generate_image(stack: LocalStack) -> Iterator[str]:
    """Detach the state machine role's LambdaInvokePolicy for GenerateImage; restored after."""
    iam = _client(stack, "iam")
    role, policies = _stack_role_policies(iam, "PipelineStateMachineRole")
    found = [(n, d) for n, d in policies.items() if "GenerateImageFunction" in json.dumps(d)]
    assert found, f"no policy of {role} lets it invoke GenerateImage"
    name, document = found[0]
    with _role_policy_replaced(iam, role, name, document, None):
        yield role


def test_the_state_machine_invokes_tasks_as_its_own_role(
    stack: LocalStack, state_machine_cannot_invoke_generate_image: str
) -> None:
    result = stack.cli("submit", "a kite over dunes", "--wait", "--json", "--timeout", "90")
    assert result.returncode != 0, result.stdout
    job = json.loads(result.stdout)
    assert job["status"] == "failed"
    assert "AccessDenied" in json.dumps(job["error"]), job["error"]


@pytest.fixture
def sagemaker_role_cannot_write_async_results(stack: LocalStack) -> Iterator[str]:
    """The models' execution role without its WriteAsyncResults statement; restored after."""
    iam = _client(stack, "iam")
    role, policies = _stack_role_policies(iam, "SageMakerExecutionRole")
    ((name, document),) = policies.items()
    reduced = {**document, "Statement": [s for s in document["Statement"] if s.get("Sid") != "WriteAsyncResults"]}
    assert len(reduced["Statement"]) == len(document["Statement"]) - 1
    with _role_policy_replaced(iam, role, name, document, reduced):
        yield role


def test_sagemaker_writes_async_results_as_the_model_execution_role(
    stack: LocalStack, sagemaker_role_cannot_write_async_results: str
) -> None:
    result = stack.cli("submit", "a heron in the reeds", "--wait", "--json", "--timeout", "120")
    assert result.returncode != 0, result.stdout
    job = json.loads(result.stdout)
    assert job["status"] == "failed"
    assert job["error"]["stage"] == "render_video", job["error"]
    assert "AccessDenied" in job["error"]["message"], job["error"]
    assert sagemaker_role_cannot_write_async_results in job["error"]["message"], job["error"]


def test_a_missing_key_is_403_without_list_bucket_and_404_with_it(stack: LocalStack) -> None:
    """Patch 10: S3 answers a GET/HEAD of a missing key 404 only to a caller who may s3:ListBucket the bucket (else the
    answer would tell which keys do not exist); moto answers 404 to everyone."""
    import time

    from omnireel_local import home as homedir

    bucket = json.loads((stack.home / "state.json").read_text())["outputs"]["InboxBucketName"]
    iam = _client(stack, "iam")
    name = f"{homedir.STACK_NAME}-scratch-reader-{int(time.time() * 1000)}"
    iam.create_user(UserName=name)
    policy = {"Version": "2012-10-17", "Statement": [
        {"Effect": "Allow", "Action": "s3:GetObject", "Resource": f"arn:aws:s3:::{bucket}/*"}]}  # fmt: skip
    iam.put_user_policy(UserName=name, PolicyName="read", PolicyDocument=json.dumps(policy))
    key = iam.create_access_key(UserName=name)["AccessKey"]
    reader = _client(stack, "s3", aws_access_key_id=key["AccessKeyId"], aws_secret_access_key=key["SecretAccessKey"])
    with pytest.raises(ClientError) as without_list:
        reader.head_object(Bucket=bucket, Key="prompts/no-such-key.txt")
    assert without_list.value.response["ResponseMetadata"]["HTTPStatusCode"] == 403
    with pytest.raises(ClientError) as with_list:  # the developer identity may list the stack's buckets
        _client(stack, "s3").head_object(Bucket=bucket, Key="prompts/no-such-key.txt")
    assert with_list.value.response["ResponseMetadata"]["HTTPStatusCode"] == 404
