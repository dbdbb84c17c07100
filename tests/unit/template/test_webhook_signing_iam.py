"""Issue 25 item 1 in the template: the webhook master key is read by the two functions that derive secrets from it and
written by no role of the stack (rotation is the operator's: ``omnireel webhooks rotate``); the delivery function
reads the owner of a job or a batch from its record, and nothing more of the batches table.

Rules over every role of the transformed template, so a new role cannot slip past them."""

from __future__ import annotations

from typing import Any

import pytest

from omnireel_template import load_template, placeholder_code, sam_transform

READERS = {"ApiFunctionRole", "WebhookDeliveryFunctionRole"}


@pytest.fixture(scope="module")
def cfn() -> dict[str, Any]:
    return sam_transform(placeholder_code(load_template(), "placeholder")[0], "omnireel-test")


def _actions(statement: dict[str, Any]) -> list[str]:
    action = statement.get("Action", [])
    return [action] if isinstance(action, str) else list(action)


def _resources(statement: dict[str, Any]) -> list[Any]:
    resource = statement.get("Resource", [])
    return resource if isinstance(resource, list) else [resource]


def _role_statements(cfn: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    roles = {k: v for k, v in cfn["Resources"].items() if v["Type"] == "AWS::IAM::Role"}
    out: dict[str, list[dict[str, Any]]] = {}
    for name, role in roles.items():
        props = role["Properties"]
        assert not props.get("ManagedPolicyArns") or all(
            "SecretsManager" not in str(arn) for arn in props["ManagedPolicyArns"]
        ), f"{name} has an AWS-managed Secrets Manager policy"
        out[name] = [s for p in props.get("Policies", []) for s in p["PolicyDocument"]["Statement"]]
    return out


def _touches_the_master(statement: dict[str, Any]) -> bool:
    return any(r == {"Ref": "WebhookSigningSecret"} or r == "*" for r in _resources(statement))


def test_no_role_of_the_stack_may_write_the_webhook_master_key(cfn: dict[str, Any]) -> None:
    writes = {"secretsmanager:PutSecretValue", "secretsmanager:UpdateSecret", "secretsmanager:RotateSecret",
              "secretsmanager:UpdateSecretVersionStage", "secretsmanager:*", "*"}  # fmt: skip
    for role, statements in _role_statements(cfn).items():
        for statement in statements:
            if statement.get("Effect") == "Allow" and _touches_the_master(statement):
                assert not set(_actions(statement)) & writes, f"{role} may write the webhook master key"


def test_only_the_api_and_the_delivery_function_read_the_webhook_master_key(cfn: dict[str, Any]) -> None:
    readers = {
        role
        for role, statements in _role_statements(cfn).items()
        for s in statements
        if s.get("Effect") == "Allow" and _touches_the_master(s) and "secretsmanager:GetSecretValue" in _actions(s)
    }
    assert readers == READERS


def test_the_delivery_function_reads_batch_owners_and_only_updates_batch_records(cfn: dict[str, Any]) -> None:
    """GetItem: the owner; UpdateItem: each batch.completed attempt, recorded on the batch (never Put or Delete)."""
    statements = _role_statements(cfn)["WebhookDeliveryFunctionRole"]
    on_batches = [s for s in statements if {"Fn::GetAtt": ["BatchesTable", "Arn"]} in _resources(s)]
    assert [sorted(_actions(s)) for s in on_batches] == [["dynamodb:GetItem", "dynamodb:UpdateItem"]]
    env = cfn["Resources"]["WebhookDeliveryFunction"]["Properties"]["Environment"]["Variables"]
    assert env["BATCHES_TABLE"] == {"Ref": "BatchesTable"}
    assert env["WEBHOOK_SECRET_ARN"] == {"Ref": "WebhookSigningSecret"}
