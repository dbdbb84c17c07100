"""The front door's execute-api:Invoke evaluation (omnireel_local.iam_authorizer._allowed): IAM's rules, literally."""

from __future__ import annotations

import json

import pytest

from omnireel_local.iam_authorizer import _allowed

ROUTE = "arn:aws:execute-api:us-east-1:123456789012:local/$default/POST/jobs"


def _policy(*statements: dict) -> dict:
    return {"policy_document": json.dumps({"Version": "2012-10-17", "Statement": list(statements)})}


def _allow(resource: str | list[str] = ROUTE, **extra) -> dict:
    return {"Effect": "Allow", "Action": "execute-api:Invoke", "Resource": resource, **extra}


@pytest.mark.parametrize(
    ("policies", "allowed"),
    [
        ([], False),
        ([_policy(_allow())], True),
        ([_policy(_allow("arn:aws:execute-api:us-east-1:123456789012:local/$default/*/*"))], True),
        ([_policy(_allow("arn:aws:execute-api:*:*:*"))], True),
        ([_policy(_allow("arn:aws:execute-api:us-east-1:123456789012:local/$default/GET/*"))], False),
        ([_policy(_allow("arn:aws:execute-api:us-east-1:123456789012:local/$defaultX/POST/jobs"))], False),
        ([_policy({"Effect": "Allow", "Action": "execute-api:*", "Resource": "*"})], True),
        ([_policy({"Effect": "Allow", "Action": "EXECUTE-API:invoke", "Resource": "*"})], True),
        ([_policy({"Effect": "Allow", "Action": "s3:*", "Resource": "*"})], False),
        ([_policy({"Effect": "Allow", "NotAction": "s3:*", "Resource": "*"})], True),
        ([_policy({"Effect": "Allow", "Action": "*", "NotResource": ROUTE})], False),
        ([_policy(_allow(), {"Effect": "Deny", "Action": "execute-api:Invoke", "Resource": "*"})], False),
        ([_policy(_allow()), _policy({"Effect": "Deny", "Action": "*", "Resource": "*"})], False),
        ([_policy(_allow(Condition={"IpAddress": {"aws:SourceIp": "10.0.0.0/8"}}))], False),
        ([_policy(_allow([ROUTE.replace("POST", "GET"), ROUTE]))], True),
        ([_policy(_allow("arn:aws:execute-api:us-east-1:123456789012:local/$default/POST/job?"))], True),
        ([_policy(_allow("arn:aws:execute-api:us-east-1:123456789012:local/$default/POST/jo?"))], False),
    ],
)
def test_execute_api_invoke_follows_iam_evaluation(policies: list, allowed: bool) -> None:
    assert _allowed(policies, ROUTE) is allowed


def test_role_inline_policies_are_plain_documents() -> None:
    document = json.dumps({"Version": "2012-10-17", "Statement": _allow()})  # a single statement, not a list
    assert _allowed([document], ROUTE) is True
