"""moto patches 31 and 32: lookups moto repeated on every request, made once (same answers).

31: an access key's account is found in the IAM partitions that exist; before, the lookup created every partition's
IAM backend (with the stack's MOTO_IAM_LOAD_MANAGED_POLICIES, ~1,300 managed policies each).
32: a response class's action names are listed once per class, and again when the class gains a method."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import boto3
import moto.core.responses as responses
import pytest
from moto import mock_aws
from moto.core import DEFAULT_ACCOUNT_ID
from moto.dynamodb.responses import DynamoHandler
from moto.iam import models as iam_models

from omnireel_local.patches.speed import patch_account_lookup, patch_action_names


def test_a_key_s_account_is_found_without_creating_a_partition(monkeypatch: pytest.MonkeyPatch) -> None:
    with mock_aws():
        patch_account_lookup(monkeypatch.setattr)  # every request below looks its key up through it
        iam = boto3.client("iam", region_name="us-east-1")
        iam.create_user(UserName="dev")
        key = iam.create_access_key(UserName="dev")["AccessKey"]["AccessKeyId"]
        account = iam_models.iam_backends[DEFAULT_ACCOUNT_ID]
        assert set(account.keys()) == {"aws"}
        assert iam_models.get_account_id_from(key) == DEFAULT_ACCOUNT_ID
        assert iam_models.get_account_id_from("AKIAUNKNOWN000000000") == DEFAULT_ACCOUNT_ID
        assert set(account.keys()) == {"aws"}, "the lookup created a partition's IAM backend"
        # The key is found through the patched lookup on a request: a call signed with it is that user's.
        sts = boto3.client("sts", region_name="us-east-1", aws_access_key_id=key, aws_secret_access_key="x" * 40)
        assert sts.get_caller_identity()["Account"] == DEFAULT_ACCOUNT_ID
        assert set(account.keys()) == {"aws"}


class _Started(Exception):
    """Raised where the local AWS would take its first request: the stack goes no further."""


def test_the_stack_installs_the_lookup_before_the_local_aws_takes_its_first_request(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The stack's first requests (its admin user's, before ``patches.apply``) went through moto's own lookup, which
    created all six partitions' IAM backends: py-spy put it at ~0.8 s of CPU in every stack's start."""
    from omnireel_local import aws_server, stack
    from omnireel_local.patches import speed

    installed = speed.patch_account_lookup
    monkeypatch.setattr(speed, "patch_account_lookup", lambda: installed(monkeypatch.setattr))  # undone after
    seen: list[bool] = []

    def start(self: aws_server.AwsServer) -> None:
        seen.append(getattr(iam_models.get_account_id_from, "omnireel_existing_only", False))
        raise _Started

    monkeypatch.setattr(aws_server.AwsServer, "start", start)
    args = argparse.Namespace(home=str(tmp_path), moto_port=None, api_port=None, ephemeral_ports=True,
                              region="us-east-1", stack_name="omnireel-local", parameter=[], lambda_workers=1,
                              relay=False)  # fmt: skip
    environ = dict(os.environ)  # Stack.start sets the stack's own variables
    local = stack.Stack(args)
    try:
        with pytest.raises(_Started):
            local.start()
    finally:
        local.http.close()
        os.environ.clear()
        os.environ.update(environ)
    assert seen == [True]


def test_action_names_are_listed_once_per_class_and_follow_a_new_method(monkeypatch: pytest.MonkeyPatch) -> None:
    listed: list[type] = []
    original = responses.method_names_from_class

    def counted(clazz: type) -> list[str]:
        listed.append(clazz)
        return original(clazz)

    monkeypatch.setattr(responses, "method_names_from_class", counted)
    patch_action_names(monkeypatch.setattr)
    names = responses.method_names_from_class(DynamoHandler)
    assert set(names) == set(original(DynamoHandler)) and "update_item" in names
    assert responses.method_names_from_class(DynamoHandler) is names
    assert listed == [DynamoHandler]
    monkeypatch.setattr(DynamoHandler, "update_item", lambda self: None)  # replaced: no name changes
    assert responses.method_names_from_class(DynamoHandler) is names
    monkeypatch.setattr(DynamoHandler, "omnireel_new_action", lambda self: None, raising=False)  # added: listed again
    assert "omnireel_new_action" in responses.method_names_from_class(DynamoHandler)
    assert listed == [DynamoHandler, DynamoHandler]
    with mock_aws():  # requests still reach their actions
        ddb = boto3.client("dynamodb", region_name="us-east-1")
        assert ddb.list_tables()["TableNames"] == []
