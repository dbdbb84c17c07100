"""moto patch 29: SQS sizes as AWS counts them (UTF-8 bytes of the body and message attributes), refused as AWS
refuses them: over the queue's MaximumMessageSize (default 262,144) ``InvalidParameterValue``, a SendMessageBatch over
1 MiB in all ``BatchRequestTooLong``. Unpatched moto counted characters and allowed 1 MiB per message."""

from __future__ import annotations

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws

from omnireel_local.patches.sqs_sns import (
    SQS_DEFAULT_MAXIMUM_MESSAGE_SIZE,
    SQS_MAXIMUM_BATCH_BYTES,
    patch_sqs_message_sizes,
    sqs_message_size,
)

EMOJI = "\U0001f600"  # 1 character, 4 bytes


@pytest.fixture
def sqs(monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    with mock_aws():
        patch_sqs_message_sizes(monkeypatch.setattr)
        yield boto3.client("sqs", region_name="us-east-1")


def _code(error: pytest.ExceptionInfo[ClientError]) -> str:
    return error.value.response["Error"]["Code"]


def test_the_default_limit_is_262144_bytes_counted_in_utf8(sqs) -> None:  # type: ignore[no-untyped-def]
    url = sqs.create_queue(QueueName="q")["QueueUrl"]
    attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["MaximumMessageSize"])["Attributes"]
    assert attributes["MaximumMessageSize"] == str(SQS_DEFAULT_MAXIMUM_MESSAGE_SIZE) == "262144"
    sqs.send_message(QueueUrl=url, MessageBody=EMOJI * (262_144 // 4))  # exactly the limit in bytes
    with pytest.raises(ClientError) as refused:
        sqs.send_message(QueueUrl=url, MessageBody=EMOJI * (262_144 // 4) + "x")  # 65,537 characters, 262,145 bytes
    assert _code(refused) == "InvalidParameterValue" and "262144 bytes" in str(refused.value)
    with pytest.raises(ClientError) as refused:  # 200,000 characters (under 262,144), 800,000 bytes
        sqs.send_message(QueueUrl=url, MessageBody=EMOJI * 200_000)
    assert _code(refused) == "InvalidParameterValue"


def test_message_attributes_count(sqs) -> None:  # type: ignore[no-untyped-def]
    url = sqs.create_queue(QueueName="q")["QueueUrl"]
    attributes = {"k": {"DataType": "String", "StringValue": "vv"}}
    extra = sqs_message_size("", attributes)
    assert extra == len("k") + len("String") + len("vv")
    sqs.send_message(QueueUrl=url, MessageBody="x" * (262_144 - extra), MessageAttributes=attributes)
    with pytest.raises(ClientError) as refused:
        sqs.send_message(QueueUrl=url, MessageBody="x" * (262_144 - extra + 1), MessageAttributes=attributes)
    assert _code(refused) == "InvalidParameterValue"


def test_a_queue_may_raise_its_limit_to_one_mebibyte(sqs) -> None:  # type: ignore[no-untyped-def]
    url = sqs.create_queue(QueueName="big", Attributes={"MaximumMessageSize": "1048576"})["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody=EMOJI * (1_048_576 // 4))


def test_a_batch_is_at_most_one_mebibyte_in_all(sqs) -> None:  # type: ignore[no-untyped-def]
    url = sqs.create_queue(QueueName="q")["QueueUrl"]
    quarter = EMOJI * (262_144 // 4)
    full = [{"Id": str(i), "MessageBody": quarter} for i in range(4)]  # 4 x 262,144 = 1,048,576 bytes
    assert sum(len(e["MessageBody"].encode()) for e in full) == SQS_MAXIMUM_BATCH_BYTES
    assert len(sqs.send_message_batch(QueueUrl=url, Entries=full)["Successful"]) == 4
    big = sqs.create_queue(QueueName="big", Attributes={"MaximumMessageSize": "1048576"})["QueueUrl"]
    half = "x" * 524_288
    over = [{"Id": "a", "MessageBody": half}, {"Id": "b", "MessageBody": half + "y"}]  # one byte more in all
    with pytest.raises(ClientError) as refused:
        sqs.send_message_batch(QueueUrl=big, Entries=over)
    assert _code(refused).endswith("BatchRequestTooLong")  # boto3 shows SQS's query-compatible code
    # 10 messages of 26,215 four-byte characters: 1,048,600 bytes (moto counted 262,150 characters: accepted)
    many = [{"Id": str(i), "MessageBody": EMOJI * 26_215} for i in range(10)]
    with pytest.raises(ClientError) as refused:
        sqs.send_message_batch(QueueUrl=url, Entries=many)
    assert _code(refused).endswith("BatchRequestTooLong")  # boto3 shows SQS's query-compatible code
    # an entry over the queue's limit is refused as SendMessage refuses it
    with pytest.raises(ClientError) as refused:
        sqs.send_message_batch(QueueUrl=url, Entries=[{"Id": "a", "MessageBody": quarter + "x"}])
    assert _code(refused) == "InvalidParameterValue"
