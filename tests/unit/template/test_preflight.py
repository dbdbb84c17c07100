"""`omnireel preflight` against a registry and a network (issue 16 items 1 and 7): the DLC tag must exist in the target
region before any endpoint is created; voice subnets, certificate and relay image are looked up. No real AWS here:
moto's ECR/EC2 in-process (the local AWS) and botocore Stubbers for the answers moto cannot give (AWS's own DLC
registry, ACM status, AccessDenied)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber
from moto import mock_aws

from omnireel_cli import preflight
from omnireel_template import load_template

REGION = "us-east-1"
ACCOUNT = "123456789012"  # moto's account
LOCAL_DLC = f"{ACCOUNT}.dkr.ecr.{REGION}.amazonaws.com/vllm:omni-sagemaker-cuda-v1.6"
MANIFEST = json.dumps(
    {
        "schemaVersion": 2,
        "mediaType": "application/vnd.docker.distribution.manifest.v2+json",
        "config": {
            "mediaType": "application/vnd.docker.container.image.v1+json",
            "size": 2,
            "digest": "sha256:" + "a" * 64,
        },
        "layers": [],
    }
)


@pytest.fixture
def aws() -> Iterator[Any]:
    with mock_aws():
        yield lambda service: boto3.client(service, region_name=REGION)


def _push(clients: Any, repository: str, tag: str) -> None:
    ecr = clients("ecr")
    ecr.create_repository(repositoryName=repository)
    ecr.put_image(repositoryName=repository, imageManifest=MANIFEST, imageTag=tag)


def _dlc(report: preflight.Report) -> preflight.Finding:
    return next(f for f in report.findings if f.check == "dlc image")


def test_the_tag_is_looked_up_in_the_target_region_registry(aws: Any) -> None:
    _push(aws, "vllm", "omni-sagemaker-cuda-v1.6")
    ok = preflight.run("omnireel-dev", REGION, {"EnableVoice": "false", "DlcImageUri": LOCAL_DLC}, clients=aws)
    assert ok.ok and _dlc(ok).ok, ok.render()
    missing = preflight.run(
        "omnireel-dev", REGION, {"EnableVoice": "false", "DlcImageUri": LOCAL_DLC.replace("v1.6", "v1.5")}, clients=aws
    )
    assert not _dlc(missing).ok and "is not in us-east-1 (ImageNotFound)" in _dlc(missing).detail
    assert not missing.ok


def test_a_missing_repository_fails(aws: Any) -> None:
    report = preflight.run("omnireel-dev", REGION, {"EnableVoice": "false", "DlcImageUri": LOCAL_DLC}, clients=aws)
    assert not _dlc(report).ok and "repository does not exist" in _dlc(report).detail


def _stubbed_ecr(answer: dict[str, Any] | None = None, error: str | None = None) -> Any:
    ecr = boto3.client("ecr", region_name=REGION, aws_access_key_id="x", aws_secret_access_key="x")
    stubber = Stubber(ecr)
    expected = {
        "registryId": "763104351884",
        "repositoryName": "vllm",
        "imageIds": [{"imageTag": "omni-sagemaker-cuda-v1.6"}],
    }
    if error:
        stubber.add_client_error("batch_get_image", service_error_code=error, expected_params=expected)
    else:
        stubber.add_response("batch_get_image", answer, expected)
    stubber.activate()
    return ecr


def _quotas(defaults: dict[str, float], applied: dict[str, float]) -> Any:
    client = boto3.client("service-quotas", region_name=REGION, aws_access_key_id="x", aws_secret_access_key="x")
    stubber = Stubber(client)
    for operation, values in (("list_aws_default_service_quotas", defaults), ("list_service_quotas", applied)):
        quotas = [{"QuotaName": f"{t} for endpoint usage", "Value": v} for t, v in values.items()]
        stubber.add_response(operation, {"Quotas": quotas}, {"ServiceCode": "sagemaker"})
    stubber.activate()
    return client


ENOUGH = {"ml.g6.xlarge": 2, "ml.g6e.xlarge": 4, "ml.g5.xlarge": 2, "ml.g4dn.xlarge": 1}


def _factory(**clients: Any) -> Any:
    quotas = clients.pop("quotas", None) or _quotas({}, ENOUGH)
    return lambda service: quotas if service == "service-quotas" else clients[service]


def _values(**overrides: str) -> dict[str, Any]:
    from omnireel_local import cfn_rules

    return cfn_rules.parameter_values(load_template(), overrides)


def test_endpoint_quotas_cover_every_pool_member_and_the_video_maximum() -> None:
    values = {**_values(), "EnableVoice": "true", "VideoMaxCapacity": "2"}
    # image pools g6/g6e/g5 + TTS pools g6/g6e/g5/g4dn + video g6e x VideoMaxCapacity
    assert preflight.quota_needs(values) == ENOUGH
    report = preflight.Report()
    preflight.check_quotas(report, _quotas({**ENOUGH, "ml.g4dn.xlarge": 0}, {}), values)  # a new account: 0 default
    assert not report.ok and "ml.g4dn.xlarge for endpoint usage is 0, needs 1" in report.findings[0].detail
    report = preflight.Report()
    preflight.check_quotas(report, _quotas({"ml.g4dn.xlarge": 0}, ENOUGH), values)  # an applied increase wins
    assert report.ok, report.render()
    report = preflight.Report()
    preflight.check_quotas(report, _quotas({}, {**ENOUGH, "ml.g6e.xlarge": 3}), values)
    assert "ml.g6e.xlarge for endpoint usage is 3, needs 4" in report.findings[0].detail


def test_the_pinned_tag_is_checked_in_the_aws_dlc_registry_with_batch_get_image() -> None:
    """The default (no DlcImageUri): AWS's DLC account of the region, repository vllm, tag omni-sagemaker-cuda-v1.6."""
    found = _stubbed_ecr({"images": [{"imageId": {"imageTag": "omni-sagemaker-cuda-v1.6"}}], "failures": []})
    report = preflight.run("omnireel-dev", REGION, {"EnableVoice": "false"}, clients=_factory(ecr=found))
    assert report.ok, report.render()
    gone = _stubbed_ecr(
        {
            "images": [],
            "failures": [{"imageId": {"imageTag": "omni-sagemaker-cuda-v1.6"}, "failureCode": "ImageNotFound"}],
        }
    )
    report = preflight.run("omnireel-dev", REGION, {"EnableVoice": "false"}, clients=_factory(ecr=gone))
    assert not report.ok and "ImageNotFound" in _dlc(report).detail
    denied = _stubbed_ecr(error="AccessDeniedException")
    report = preflight.run("omnireel-dev", REGION, {"EnableVoice": "false"}, clients=_factory(ecr=denied))
    assert not report.ok
    assert (
        preflight.image_check_command("763104351884", "vllm", "omni-sagemaker-cuda-v1.6", REGION) in _dlc(report).detail
    )


def test_the_documented_command_is_the_one_preflight_prints() -> None:
    from omnireel_template import ROOT

    command = preflight.image_check_command("763104351884", "vllm", "omni-sagemaker-cuda-v1.6", "us-east-1")
    assert command in (ROOT / "docs" / "operations" / "deploy.md").read_text()


def test_a_dlc_image_in_another_region_is_refused_offline() -> None:
    report = preflight.run(
        "omnireel-dev", "eu-west-1", {"EnableVoice": "false", "DlcImageUri": LOCAL_DLC}, clients=None
    )
    assert not _dlc(report).ok and "same" not in _dlc(report).detail and "own region" in _dlc(report).detail


def _acm(status: str) -> Any:
    acm = boto3.client("acm", region_name=REGION, aws_access_key_id="x", aws_secret_access_key="x")
    stubber = Stubber(acm)
    stubber.add_response("describe_certificate", {"Certificate": {"Status": status}})
    stubber.activate()
    return acm


def _network(clients: Any, zones: tuple[str, str]) -> dict[str, str]:
    ec2 = clients("ec2")
    vpc = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
    other = ec2.create_vpc(CidrBlock="10.1.0.0/16")["Vpc"]["VpcId"]
    a = ec2.create_subnet(VpcId=vpc, CidrBlock="10.0.1.0/24", AvailabilityZone=zones[0])["Subnet"]["SubnetId"]
    b = ec2.create_subnet(VpcId=vpc, CidrBlock="10.0.2.0/24", AvailabilityZone=zones[1])["Subnet"]["SubnetId"]
    c = ec2.create_subnet(VpcId=vpc, CidrBlock="10.0.3.0/24", AvailabilityZone=zones[0])["Subnet"]["SubnetId"]
    d = ec2.create_subnet(VpcId=other, CidrBlock="10.1.1.0/24", AvailabilityZone=zones[0])["Subnet"]["SubnetId"]
    _push(clients, "vllm", "omni-sagemaker-cuda-v1.6")
    _push(clients, "omnireel-relay", "abc1234")
    return {
        "DlcImageUri": LOCAL_DLC,
        "RelayImageUri": f"{ACCOUNT}.dkr.ecr.{REGION}.amazonaws.com/omnireel-relay:abc1234",
        "RelayCertificateArn": f"arn:aws:acm:{REGION}:{ACCOUNT}:certificate/0b0e3c3e-1111-2222-3333-444455556666",
        "VpcId": vpc,
        "PublicSubnetIds": f"{a},{b}",
        "RelaySubnetIds": c,
        "_other_vpc_subnet": d,
    }


def _with_acm(clients: Any, status: str) -> Any:
    acm, quotas = _acm(status), _quotas({}, ENOUGH)
    return lambda service: {"acm": acm, "service-quotas": quotas}.get(service) or clients(service)


def test_voice_network_that_would_deploy(aws: Any) -> None:
    params = _network(aws, ("us-east-1a", "us-east-1b"))
    params.pop("_other_vpc_subnet")
    report = preflight.run("omnireel-dev", REGION, params, clients=_with_acm(aws, "ISSUED"))
    assert report.ok, report.render()


def test_voice_network_mistakes_are_found_before_deploying(aws: Any) -> None:
    params = _network(aws, ("us-east-1a", "us-east-1a"))  # both public subnets in one AZ
    params["RelaySubnetIds"] = params.pop("_other_vpc_subnet")  # a relay subnet of another VPC
    params["RelayImageUri"] = params["RelayImageUri"].replace(":abc1234", ":not-pushed")
    report = preflight.run("omnireel-dev", REGION, params, clients=_with_acm(aws, "PENDING_VALIDATION"))
    failed = {f.check: f.detail for f in report.findings if not f.ok}
    assert "1 availability zone" in failed["voice subnets"] and "not in vpc-" in failed["voice subnets"]
    assert "PENDING_VALIDATION" in failed["voice certificate"]
    assert "ImageNotFound" in failed["relay image"]


def test_smoke_checks_the_tag_a_deployed_stack_uses(aws: Any) -> None:
    _push(aws, "vllm", "omni-sagemaker-cuda-v1.6")

    class Session:  # the deployed stack's session: its CloudFormation answer stubbed, ECR from the local AWS
        region_name = REGION

        def __init__(self, uri: str) -> None:
            self.cfn = boto3.client(
                "cloudformation", region_name=REGION, aws_access_key_id="x", aws_secret_access_key="x"
            )
            stubber = Stubber(self.cfn)
            stack = {"StackName": "s", "CreationTime": "2026-12-01T00:00:00Z", "StackStatus": "UPDATE_COMPLETE",
                     "Parameters": [{"ParameterKey": "DlcImageUri", "ParameterValue": uri}]}  # fmt: skip
            stubber.add_response("describe_stacks", {"Stacks": [stack]}, {"StackName": "s"})
            stubber.activate()

        def client(self, service: str) -> Any:
            return self.cfn if service == "cloudformation" else aws(service)

    assert preflight.deployed_image_report(Session(LOCAL_DLC), "s", load_template()).ok
    stale = preflight.deployed_image_report(Session(LOCAL_DLC.replace("v1.6", "v1.4")), "s", load_template())
    assert not stale.ok and "v1.4" in stale.findings[0].detail


@pytest.mark.parametrize(
    ("pools", "problem"),
    [
        ("ml.g6.xlarge,ml.g6e.xlarge,ml.g5.xlarge,ml.g6.2xlarge,ml.g5.2xlarge", "has 5 entries"),
        ("ml.g6.xlarge,g5.xlarge", "not an ml.* instance type"),
        ("ml.g6.xlarge,ml.g6.xlarge", "repeats a type"),
    ],
)
def test_pool_lists_the_rules_cannot_check(pools: str, problem: str) -> None:
    report = preflight.run("omnireel-dev", REGION, {"EnableVoice": "false", "TtsInstanceTypes": pools}, clients=None)
    finding = next(f for f in report.findings if f.check == "instance pools")
    assert not finding.ok and problem in finding.detail
    assert preflight.run("omnireel-dev", REGION, {"EnableVoice": "false"}, clients=None).ok
