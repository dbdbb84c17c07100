"""The front door's execute-api:Invoke decision: IAM's rules, literally, through the one decision every call of the
local AWS takes (``iam_decision.decide``: the caller's policies as moto's access key collects them, ``iam_policy``'s
evaluator with Conditions, the request context the front door builds)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pytest

from omnireel_local.iam import decision as iam_decision
from omnireel_local.iam import policy as iam_policy
from omnireel_local.iam.authorizer import ACTION, SERVICE

ROUTE = "arn:aws:execute-api:us-east-1:123456789012:local/$default/POST/jobs"
USER = "arn:aws:iam::123456789012:user/app"


@dataclass
class _Key:
    """What moto's access key offers the decision: the caller's ARN and its policies as moto stores them."""

    arn: str
    policies: list[Any]

    def collect_policies(self) -> list[Any]:
        return self.policies


def _allowed(policies: list[Any], route: str) -> bool:
    key = _Key(USER, policies)
    context = iam_policy.request_context(SERVICE, ACTION, "/jobs", {}, b"", iam_policy.Principal(USER, "123456789012"))
    return iam_decision.decide(key, ACTION, route, context, "123456789012")[0] == iam_policy.ALLOW


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
        ([_policy(_allow(Condition={"IpAddress": {"aws:SourceIp": "127.0.0.0/8"}}))], True),  # a Condition that holds
        ([_policy(_allow(), {"Effect": "Deny", "Action": "*", "Resource": "*",
                             "Condition": {"StringEquals": {"aws:username": "someone-else"}}})], True),
        ([_policy(_allow(), {"Effect": "Deny", "Action": "*", "Resource": "*",
                             "Condition": {"StringEquals": {"aws:username": "app"}}})], False),
        ([_policy(_allow([ROUTE.replace("POST", "GET"), ROUTE]))], True),
        ([_policy(_allow("arn:aws:execute-api:us-east-1:123456789012:local/$default/POST/job?"))], True),
        ([_policy(_allow("arn:aws:execute-api:us-east-1:123456789012:local/$default/POST/jo?"))], False),
    ],
)  # fmt: skip
def test_execute_api_invoke_follows_iam_evaluation(policies: list, allowed: bool) -> None:
    assert _allowed(policies, ROUTE) is allowed


def test_role_inline_policies_are_plain_documents() -> None:
    document = json.dumps({"Version": "2012-10-17", "Statement": _allow()})  # a single statement, not a list
    assert _allowed([document], ROUTE) is True


def test_one_evaluator_reads_policy_statements() -> None:
    """Issue 29 item 2: only ``iam.policy`` reads policy statements; the front door and the API handlers' patch both
    take their decision from ``iam_decision.decide`` (derived from the code: a second reader would be a second
    evaluator)."""
    from pathlib import Path

    import omnireel_local

    folder = Path(omnireel_local.__file__).parent
    readers = sorted(p.name for p in folder.rglob("*.py") if '.get("Statement")' in p.read_text())
    assert readers == ["policy.py"]
    for door in ("iam/authorizer.py", "patches/iam_auth.py"):
        assert "decision.decide" in (folder / door).read_text(), door
