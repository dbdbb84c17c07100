"""`omnireel smoke`'s deploy check on a deployed stack (issue 27 item 12): what a call can prove that the local stack
cannot. AWS is replaced by fakes that answer as the APIs do (shapes from botocore's models); the local path runs in
tests/e2e/test_voice_and_smoke.py."""

from __future__ import annotations

import json
from typing import Any

import pytest

from omnireel_cli import smoke
from omnireel_template import load_template, retained_by_retain_data


class _SageMaker:
    def __init__(self, variants: dict[str, dict[str, Any]]):
        self.variants = variants

    def describe_endpoint(self, EndpointName: str) -> dict[str, Any]:
        return {"EndpointConfigName": f"{EndpointName}-config"}

    def describe_endpoint_config(self, EndpointConfigName: str) -> dict[str, Any]:
        return {"ProductionVariants": [self.variants[EndpointConfigName.removesuffix("-config")]]}


class _CloudFormation:
    def __init__(self, retain: str, policies: dict[str, str]):
        self.retain, self.policies = retain, policies

    def describe_stacks(self, StackName: str) -> dict[str, Any]:
        return {"Stacks": [{"Parameters": [{"ParameterKey": "RetainData", "ParameterValue": self.retain}]}]}

    def get_template(self, StackName: str, TemplateStage: str) -> dict[str, Any]:
        assert TemplateStage == "Processed"
        resources = {k: {"DeletionPolicy": v, "UpdateReplacePolicy": v} for k, v in self.policies.items()}
        return {"TemplateBody": json.dumps({"Resources": resources})}

    def describe_stack_resource(self, StackName: str, LogicalResourceId: str) -> dict[str, Any]:
        return {"StackResourceDetail": {"PhysicalResourceId": f"s-{LogicalResourceId}"}}


class _Lambda:
    def get_function_configuration(self, FunctionName: str) -> dict[str, Any]:
        return {"Role": f"arn:aws:iam::111122223333:role/{FunctionName}"}


class _Iam:
    def __init__(self, denied: set[str]):
        self.denied, self.calls = denied, []

    def simulate_principal_policy(self, **kwargs: Any) -> dict[str, Any]:
        self.calls.append(kwargs)
        decision = "implicitDeny" if kwargs["PolicySourceArn"].rsplit("/", 1)[1] in self.denied else "allowed"
        return {"EvaluationResults": [{"EvalDecision": decision}]}


class _Target:
    local = False
    name = "omnireel-prod"

    def __init__(self, clients: dict[str, Any]):
        self.clients = clients
        self.outputs = {"ImageEndpointName": "img", "TtsEndpointName": "tts", "ArtifactsBucketName": "art"}

    def client(self, service: str) -> Any:
        return self.clients[service]

    def output(self, name: str) -> str:
        return self.outputs[name]


POOLS = {
    "InstancePools": [{"InstanceType": "ml.g6.xlarge", "Priority": 1}, {"InstanceType": "ml.g5.xlarge", "Priority": 2}]
}
KEPT = sorted(retained_by_retain_data(load_template()))


def _target(*, variants=None, retain="true", policies=None, denied=frozenset()):  # type: ignore[no-untyped-def]
    variants = variants or {"img": POOLS, "tts": {"InstanceType": "ml.g6.xlarge"}}
    want = "Retain" if retain == "true" else "Delete"
    policies = policies if policies is not None else dict.fromkeys(KEPT, want)
    iam = _Iam(set(denied))
    clients = {"sagemaker": _SageMaker(variants), "cloudformation": _CloudFormation(retain, policies),
               "lambda": _Lambda(), "iam": iam}  # fmt: skip
    return _Target(clients), iam


def test_a_deployed_stack_as_designed_passes_every_deploy_check() -> None:
    target, iam = _target()
    detail = smoke.check_deploy(target)  # type: ignore[arg-type]
    assert f"{len(KEPT)} data resources Retain (RetainData=true)" in detail
    assert {c["PolicySourceArn"].rsplit("/", 1)[1] for c in iam.calls} == {f"s-{f}" for f in smoke.HEADING_FUNCTIONS}
    assert all(c["ContextEntries"][0]["ContextKeyName"] == "s3:prefix" for c in iam.calls)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"variants": {"img": {"InstancePools": POOLS["InstancePools"][:1]}, "tts": POOLS}}, "1 instance pool(s)"),
        ({"variants": {"img": {**POOLS, "InstanceType": "ml.g6.xlarge"}, "tts": POOLS}}, "both set"),
        ({"policies": dict.fromkeys(KEPT, "Delete")}, "want 'Retain'"),
        ({"retain": "false", "policies": dict.fromkeys(KEPT, "Retain")}, "want 'Delete'"),
        ({"denied": {"s-ReconcileVideoFunction"}}, "ReconcileVideoFunction's role may not s3:ListBucket"),
    ],
)
def test_each_deploy_fact_fails_the_check_with_its_reason(change: dict[str, Any], message: str) -> None:
    target, _ = _target(**change)
    with pytest.raises(smoke.CheckFailed, match=message.replace("(", r"\(").replace(")", r"\)")):
        smoke.check_deploy(target)  # type: ignore[arg-type]
