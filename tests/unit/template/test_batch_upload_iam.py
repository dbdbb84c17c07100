"""Issue 33 item 7 in the template: a presigned upload URL can do no more than the role that signed it, so no role may
put into the inbox bucket except the API function's, and only under prompts/uploads/ (POST /batches/uploads). Rules
over every role of the transformed template, derived from the statements: a new role or a wider resource fails."""

from __future__ import annotations

import json
from typing import Any

import pytest

from omnireel_template import load_template, placeholder_code, sam_transform

PUT_ACTIONS = {"s3:putobject", "s3:*", "*", "s3:put*"}


@pytest.fixture(scope="module")
def cfn() -> dict[str, Any]:
    return sam_transform(placeholder_code(load_template(), "placeholder")[0], "omnireel-test")


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _inbox_puts(cfn: dict[str, Any]) -> dict[str, list[Any]]:
    """Per role, the resources of every Allow that grants a put and names the inbox bucket."""
    found: dict[str, list[Any]] = {}
    for name, resource in cfn["Resources"].items():
        if resource["Type"] != "AWS::IAM::Role":
            continue
        for policy in resource["Properties"].get("Policies", []):
            for statement in _as_list(policy["PolicyDocument"]["Statement"]):
                actions = {a.lower() for a in _as_list(statement.get("Action", []))}
                if statement["Effect"] != "Allow" or not actions & PUT_ACTIONS:
                    continue
                for target in _as_list(statement.get("Resource", [])):
                    if "InboxBucket" in json.dumps(target) or "-inbox-" in json.dumps(target):
                        found.setdefault(name, []).append(target)
    return found


def test_only_the_api_function_may_put_into_the_inbox_and_only_under_prompts_uploads(cfn: dict[str, Any]) -> None:
    puts = _inbox_puts(cfn)
    assert set(puts) == {"ApiFunctionRole"}, puts
    for target in puts["ApiFunctionRole"]:
        assert json.dumps(target).endswith('/prompts/uploads/*"}'), target


def test_the_api_function_knows_the_inbox_bucket_and_serves_the_upload_route(cfn: dict[str, Any]) -> None:
    api = cfn["Resources"]["ApiFunction"]["Properties"]
    assert api["Environment"]["Variables"]["INBOX_BUCKET"] == {"Ref": "InboxBucket"}
    body = json.dumps(cfn["Resources"]["HttpApi"]["Properties"].get("Body", {}))
    assert '"/batches/uploads"' in body
