"""Issue 33 item 1 in the template: every SNS topic and SQS queue takes messages only from the stack's own roles that
publish to it and from the AWS services that feed it.

Rules over the SAM-transformed template, so a new topic or queue (or a new role that publishes to one) cannot slip
past: the set of topics and queues is every resource of those types; for each, its resource policy must hold one Deny
of ``sns:Publish`` / ``sqs:SendMessage`` for every principal that is not an AWS service
(``BoolIfExists aws:PrincipalIsAWSService false``) and not one of the roles whose own policies grant that action on
it (``ArnNotEquals aws:PrincipalArn``: that list, derived here from the roles, exactly). A service principal is
allowed only with ``aws:SourceArn`` or ``aws:SourceAccount``."""

from __future__ import annotations

import copy
from fnmatch import fnmatchcase
from typing import Any

import pytest

from omnireel_template import load_template, placeholder_code, sam_transform

SEND = {"AWS::SNS::Topic": "sns:Publish", "AWS::SQS::Queue": "sqs:SendMessage"}
POLICY_LIST = {"AWS::SNS::TopicPolicy": "Topics", "AWS::SQS::QueuePolicy": "Queues"}


@pytest.fixture(scope="module")
def cfn() -> dict[str, Any]:
    return sam_transform(placeholder_code(load_template(), "placeholder")[0], "omnireel-test")


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _covers(patterns: Any, action: str) -> bool:
    return any(fnmatchcase(action.lower(), str(p).lower()) for p in _list(patterns))


def _names(resource: dict[str, Any], logical: str) -> bool:
    """A statement's Resource names the topic (its Ref is its ARN) or the queue (GetAtt Arn), or is "*"."""
    return any(r in ({"Ref": logical}, {"Fn::GetAtt": [logical, "Arn"]}, "*") for r in _list(resource))


def senders(cfn: dict[str, Any], logical: str) -> set[str]:
    """The stack's roles whose own policies allow sending to ``logical``."""
    action = SEND[cfn["Resources"][logical]["Type"]]
    found = set()
    for name, role in cfn["Resources"].items():
        if role["Type"] != "AWS::IAM::Role":
            continue
        for policy in role["Properties"].get("Policies", []):
            for statement in _list(policy["PolicyDocument"]["Statement"]):
                if (
                    statement.get("Effect") == "Allow"
                    and _covers(statement.get("Action"), action)
                    and _names(statement.get("Resource", []), logical)
                ):
                    found.add(name)
    return found


def resource_statements(cfn: dict[str, Any], logical: str) -> list[dict[str, Any]]:
    """The statements of every topic or queue policy attached to ``logical`` that apply to it."""
    out = []
    for policy in cfn["Resources"].values():
        listed = POLICY_LIST.get(policy["Type"])
        if listed and {"Ref": logical} in _list(policy["Properties"][listed]):
            statements = _list(policy["Properties"]["PolicyDocument"]["Statement"])
            out += [s for s in statements if _names(s.get("Resource", "*"), logical)]
    return out


def problems(cfn: dict[str, Any]) -> list[str]:
    """What breaks the rule, per topic and queue (empty: none)."""
    found: list[str] = []
    for logical, resource in cfn["Resources"].items():
        if resource["Type"] not in SEND:
            continue
        action = SEND[resource["Type"]]
        statements = resource_statements(cfn, logical)
        denies = [
            s
            for s in statements
            if s.get("Effect") == "Deny"
            and s.get("Principal") == "*"
            and _covers(s.get("Action"), action)
            and (s.get("Condition") or {}).get("BoolIfExists") == {"aws:PrincipalIsAWSService": "false"}
        ]
        if len(denies) != 1:
            found.append(f"{logical}: {len(denies)} Deny of {action} for principals other than the stack's (want 1)")
            continue
        condition = denies[0]["Condition"]
        if set(condition) - {"BoolIfExists", "ArnNotEquals"} or set(condition.get("ArnNotEquals", {})) - {
            "aws:PrincipalArn"
        }:
            found.append(f"{logical}: the Deny has other conditions than the principal's: {sorted(condition)}")
        named = _list(condition.get("ArnNotEquals", {}).get("aws:PrincipalArn", []))
        roles = {r["Fn::GetAtt"][0] for r in named if isinstance(r, dict) and "Fn::GetAtt" in r}
        if len(roles) != len(named) or roles != senders(cfn, logical):
            found.append(f"{logical}: the Deny lets through {sorted(roles)}, the roles that send to it are "
                         f"{sorted(senders(cfn, logical))}")  # fmt: skip
        for s in statements:
            principal = s.get("Principal")
            if s.get("Effect") == "Allow" and isinstance(principal, dict) and "Service" in principal:
                keys = {k for operator in (s.get("Condition") or {}).values() for k in operator}
                if not keys & {"aws:SourceArn", "aws:SourceAccount"}:
                    found.append(f"{logical}: {principal['Service']} is allowed without aws:SourceArn/SourceAccount")
    return found


def test_every_topic_and_queue_takes_messages_only_from_the_stack(cfn: dict[str, Any]) -> None:
    kinds = {r["Type"] for r in cfn["Resources"].values()}
    assert {"AWS::SNS::Topic", "AWS::SQS::Queue"} <= kinds  # the rule has something to check
    assert problems(cfn) == []


def test_the_rule_derives_the_senders_from_the_roles(cfn: dict[str, Any]) -> None:
    """The lists the Deny statements name are the roles that publish (not a list kept by hand in the test)."""
    assert senders(cfn, "WebhookQueue") == set()  # only SNS feeds it
    assert senders(cfn, "VideoSuccessTopic") == {"SageMakerExecutionRole"}
    assert "PublishEventFunctionRole" in senders(cfn, "JobEventsTopic")


def test_a_new_queue_or_a_new_publisher_without_the_policy_fails_the_rule(cfn: dict[str, Any]) -> None:
    changed = copy.deepcopy(cfn)
    changed["Resources"]["ScratchQueue"] = {"Type": "AWS::SQS::Queue", "Properties": {}}
    changed["Resources"]["ScratchTopic"] = {"Type": "AWS::SNS::Topic", "Properties": {}}
    role = changed["Resources"]["GenerateImageFunctionRole"]["Properties"]["Policies"][0]["PolicyDocument"]
    role["Statement"].append({"Effect": "Allow", "Action": "sqs:SendMessage",
                              "Resource": {"Fn::GetAtt": ["WebhookQueue", "Arn"]}})  # fmt: skip
    found = problems(changed)
    assert any(p.startswith("ScratchQueue: 0 Deny") for p in found)
    assert any(p.startswith("ScratchTopic: 0 Deny") for p in found)
    assert any(p.startswith("WebhookQueue: the Deny lets through []") for p in found)
