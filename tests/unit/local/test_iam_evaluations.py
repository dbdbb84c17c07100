"""The local AWS keeps its policy evaluations by the policies' texts (local/omnireel_local/iam/decision.py:
``evaluated``): the same texts for the same call are not parsed again; a changed policy is decided afresh at once."""

from __future__ import annotations

import json

import pytest

from omnireel_local.iam import decision
from omnireel_local.iam.policy import ALLOW, DENY, NEUTRAL, Principal

PRINCIPAL = Principal("arn:aws:sts::123456789012:assumed-role/worker/session", "123456789012")
TABLE = "arn:aws:dynamodb:us-east-1:123456789012:table/jobs"
CONTEXT = {"aws:SecureTransport": "true", "aws:SourceIp": "127.0.0.1"}


def _policy(effect: str, action: str = "dynamodb:GetItem", condition: dict | None = None) -> str:
    statement = {"Effect": effect, "Action": action, "Resource": TABLE}
    if condition:
        statement["Condition"] = condition
    return json.dumps({"Version": "2012-10-17", "Statement": [statement]})


@pytest.fixture
def parses(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    monkeypatch.setattr(decision, "_EVALUATIONS", {})
    seen: list[object] = []
    real = decision.document

    def counting(policy: object) -> dict:
        seen.append(policy)
        return real(policy)

    monkeypatch.setattr(decision, "document", counting)
    return seen


def test_the_same_texts_for_the_same_call_are_evaluated_once(parses: list[object]) -> None:
    allow = _policy("Allow")
    for _ in range(3):
        assert decision.evaluated([allow], "dynamodb:GetItem", TABLE, dict(CONTEXT), PRINCIPAL) == ALLOW
    assert len(parses) == 1
    # another action, resource, condition value or principal is another evaluation
    assert decision.evaluated([allow], "dynamodb:PutItem", TABLE, dict(CONTEXT), PRINCIPAL) == NEUTRAL
    assert decision.evaluated([allow], "dynamodb:GetItem", TABLE + "x", dict(CONTEXT), PRINCIPAL) == NEUTRAL
    other = Principal("arn:aws:iam::123456789012:user/someone", "123456789012")
    assert decision.evaluated([allow], "dynamodb:GetItem", TABLE, dict(CONTEXT), other) == ALLOW
    assert len(parses) == 4


def test_a_changed_policy_is_decided_afresh(parses: list[object]) -> None:
    assert decision.evaluated([_policy("Allow")], "dynamodb:GetItem", TABLE, dict(CONTEXT), PRINCIPAL) == ALLOW
    both = [_policy("Allow"), _policy("Deny")]  # a Deny attached since: the same call is now denied
    assert decision.evaluated(both, "dynamodb:GetItem", TABLE, dict(CONTEXT), PRINCIPAL) == DENY
    assert decision.evaluated([], "dynamodb:GetItem", TABLE, dict(CONTEXT), PRINCIPAL) == NEUTRAL  # detached


def test_conditions_see_each_call_s_own_context(parses: list[object]) -> None:
    local_only = _policy("Allow", condition={"IpAddress": {"aws:SourceIp": "127.0.0.1/32"}})
    assert decision.evaluated([local_only], "dynamodb:GetItem", TABLE, dict(CONTEXT), PRINCIPAL) == ALLOW
    elsewhere = {**CONTEXT, "aws:SourceIp": "10.1.2.3"}
    assert decision.evaluated([local_only], "dynamodb:GetItem", TABLE, elsewhere, PRINCIPAL) == NEUTRAL


def test_a_policy_held_as_a_mapping_is_evaluated_every_time(parses: list[object]) -> None:
    held = json.loads(_policy("Allow"))
    for _ in range(2):
        assert decision.evaluated([held], "dynamodb:GetItem", TABLE, dict(CONTEXT), PRINCIPAL) == ALLOW
    assert len(parses) == 2
    unhashable = {**CONTEXT, "aws:TagKeys": ["a", "b"]}  # a list-valued condition key cannot be a key: not kept
    for _ in range(2):
        assert decision.evaluated([_policy("Allow")], "dynamodb:GetItem", TABLE, unhashable, PRINCIPAL) == ALLOW
    assert len(parses) == 4
