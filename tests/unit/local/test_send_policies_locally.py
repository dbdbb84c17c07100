"""Issue 33 item 1: the local IAM decides the template's topic and queue policies as AWS would.

For every SNS topic and SQS queue of the transformed template (the set ``tests/unit/template/test_send_policies.py``
derives), its resource policy, with the ARNs the local provisioner gives, evaluated by ``iam.policy`` with the
request context the local AWS builds for each caller:

- the local developer (``sqs:*`` on the stack's queues by its own policy) is refused with an explicit Deny;
- a scratch role the developer may create and give any policy, named like the stack's roles, is refused too;
- each role that sends there by the template's own policies is not denied;
- the stack's admin identity, which stands in for AWS services locally (Lambda's on-failure records, EventBridge's
  dead letters), is not denied: it carries ``aws:PrincipalIsAWSService`` ``true``.
"""

from __future__ import annotations

from typing import Any

import pytest

from omnireel_local.iam import policy as iam_policy
from omnireel_local.iam.identities import ADMIN_USER, developer_policy
from omnireel_template import load_template, placeholder_code, sam_transform
from tests.unit.template.test_send_policies import SEND, resource_statements, senders

ACCOUNT, REGION, STACK = "123456789012", "us-east-1", "omnireel-local"


@pytest.fixture(scope="module")
def cfn() -> dict[str, Any]:
    return sam_transform(placeholder_code(load_template(), "placeholder")[0], "omnireel-test")


def _arn(cfn: dict[str, Any], logical: str) -> str:
    kind = cfn["Resources"][logical]["Type"]
    if kind == "AWS::IAM::Role":
        return f"arn:aws:iam::{ACCOUNT}:role/{STACK}-{logical}"
    if kind == "AWS::SNS::Topic":
        return f"arn:aws:sns:{REGION}:{ACCOUNT}:{STACK}-{logical}"
    return f"arn:aws:sqs:{REGION}:{ACCOUNT}:{STACK}-{logical}"


def _resolve(cfn: dict[str, Any], value: Any) -> Any:
    """Ref / GetAtt Arn as the local provisioner resolves them (names ``<stack>-<logical id>``)."""
    if isinstance(value, list):
        return [_resolve(cfn, v) for v in value]
    if isinstance(value, dict):
        if set(value) == {"Ref"}:
            return ACCOUNT if value["Ref"] == "AWS::AccountId" else _arn(cfn, value["Ref"])
        if set(value) == {"Fn::GetAtt"}:
            return _arn(cfn, value["Fn::GetAtt"][0])
        return {k: _resolve(cfn, v) for k, v in value.items()}
    return value


def _decision(
    identity: list[dict[str, Any]], resource: list[dict[str, Any]], action: str, arn: str, caller: str
) -> str:
    """iam_decision.decide without moto: an explicit Deny anywhere wins, else an Allow in either allows."""
    principal = iam_policy.Principal(caller, ACCOUNT)
    context = iam_policy.request_context(action.split(":")[0], action, "/", {}, b"", principal)
    on_identity = iam_policy.evaluate(identity, action, arn, context, principal)
    on_resource = iam_policy.evaluate(resource, action, arn, context, principal, resource_policy=True)
    if iam_policy.DENY in (on_identity, on_resource):
        return iam_policy.DENY
    return iam_policy.ALLOW if iam_policy.ALLOW in (on_identity, on_resource) else iam_policy.NEUTRAL


def _targets(cfn: dict[str, Any]) -> list[str]:
    return [logical for logical, r in cfn["Resources"].items() if r["Type"] in SEND]


def test_the_local_iam_refuses_the_developer_and_its_scratch_principals_on_every_topic_and_queue(
    cfn: dict[str, Any],
) -> None:
    developer = [developer_policy(STACK, REGION, ACCOUNT)]
    anything = [{"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}]
    scratch = f"arn:aws:sts::{ACCOUNT}:assumed-role/{STACK}-scratch-sender/s"  # named like the stack's roles
    for logical in _targets(cfn):
        action, arn = SEND[cfn["Resources"][logical]["Type"]], _arn(cfn, logical)
        statements = [_resolve(cfn, s) for s in resource_statements(cfn, logical)]
        policy = [{"Version": "2012-10-17", "Statement": statements}]
        developer_arn = f"arn:aws:iam::{ACCOUNT}:user/omnireel-local"
        assert _decision(developer, policy, action, arn, developer_arn) == iam_policy.DENY, logical
        assert _decision(anything, policy, action, arn, scratch) == iam_policy.DENY, logical


def test_the_local_iam_lets_the_stacks_senders_and_the_service_stand_in_through(cfn: dict[str, Any]) -> None:
    anything = [{"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}]
    checked = 0
    for logical in _targets(cfn):
        action, arn = SEND[cfn["Resources"][logical]["Type"]], _arn(cfn, logical)
        policy = [{"Version": "2012-10-17", "Statement": [_resolve(cfn, s) for s in resource_statements(cfn, logical)]}]
        admin = f"arn:aws:iam::{ACCOUNT}:user/{ADMIN_USER}"
        assert _decision(anything, policy, action, arn, admin) == iam_policy.ALLOW, logical
        for role in senders(cfn, logical):
            session = f"arn:aws:sts::{ACCOUNT}:assumed-role/{STACK}-{role}/{role}-session"
            assert _decision(anything, policy, action, arn, session) == iam_policy.ALLOW, (logical, role)
            checked += 1
    assert checked >= 10  # the job-events topic's publishers alone are ten roles


def test_only_the_service_stand_in_is_an_aws_service_locally() -> None:
    assert ADMIN_USER in iam_policy.SERVICE_STAND_INS
    for arn, expected in (
        (f"arn:aws:iam::{ACCOUNT}:user/{ADMIN_USER}", "true"),
        (f"arn:aws:iam::{ACCOUNT}:user/omnireel-local", "false"),
        (f"arn:aws:sts::{ACCOUNT}:assumed-role/{ADMIN_USER}/s", "false"),  # a role named like it is no service
    ):
        context = iam_policy.request_context("sqs", "sqs:SendMessage", "/", {}, b"", iam_policy.Principal(arn, ACCOUNT))
        assert context["aws:PrincipalIsAWSService"] == expected, arn
