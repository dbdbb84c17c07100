"""moto patch 29b (issue 33 item 6): SQS allows only #x9 | #xA | #xD | #x20-#xD7FF | #xE000-#xFFFD |
#x10000-#x10FFFF in a message body (SendMessage's MessageBody reference). SendMessage refuses any other character with
400 ``InvalidMessageContents``; SendMessageBatch fails that entry with the same code and sends the others. Unpatched
moto delivered any character, so a body SQS would refuse (a raw U+FFFE in a batch line) passed locally."""

from __future__ import annotations

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws

from omnireel_local.patches.sqs_sns import patch_sqs_message_characters, sqs_disallowed_character

REFUSED = ["\x00", "\x08", "\x0b", "\x0c", "\x1f", "\ud800", "\udfff", "\ufffe", "\uffff"]
ALLOWED = ["\t", "\n", "\r", " ", "\ud7ff", "\ue000", "\ufffd", "\U00010000", "\U0010ffff", "é", "\U0001f600"]


@pytest.fixture
def sqs(monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    with mock_aws():
        patch_sqs_message_characters(monkeypatch.setattr)
        yield boto3.client("sqs", region_name="us-east-1")


@pytest.mark.parametrize("character", REFUSED, ids=[f"U+{ord(c):04X}" for c in REFUSED])
def test_send_message_refuses_a_character_outside_the_set(sqs, character: str) -> None:  # type: ignore[no-untyped-def]
    url = sqs.create_queue(QueueName="q")["QueueUrl"]
    with pytest.raises(ClientError) as refused:
        sqs.send_message(QueueUrl=url, MessageBody=f'{{"prompt": "a {character} fox"}}')
    assert refused.value.response["Error"]["Code"] == "InvalidMessageContents"
    assert refused.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400
    assert f"#x{ord(character):X}" in refused.value.response["Error"]["Message"]
    assert "Messages" not in sqs.receive_message(QueueUrl=url)


@pytest.mark.parametrize("character", ALLOWED, ids=[f"U+{ord(c):04X}" for c in ALLOWED])
def test_every_character_of_the_set_is_delivered(sqs, character: str) -> None:  # type: ignore[no-untyped-def]
    url = sqs.create_queue(QueueName="q")["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody=f"a {character} fox")
    assert sqs.receive_message(QueueUrl=url)["Messages"][0]["Body"] == f"a {character} fox"


def test_send_message_batch_fails_that_entry_and_sends_the_others(sqs) -> None:  # type: ignore[no-untyped-def]
    url = sqs.create_queue(QueueName="q")["QueueUrl"]
    entries = [{"Id": "ok-1", "MessageBody": "one"}, {"Id": "bad", "MessageBody": "a \uffff fox"},
               {"Id": "ok-2", "MessageBody": "two"}]  # fmt: skip
    done = sqs.send_message_batch(QueueUrl=url, Entries=entries)
    assert sorted(s["Id"] for s in done["Successful"]) == ["ok-1", "ok-2"]
    assert [(f["Id"], f["Code"], f["SenderFault"]) for f in done["Failed"]] == [("bad", "InvalidMessageContents", True)]
    assert "#xFFFF" in done["Failed"][0]["Message"]
    received = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)["Messages"]
    assert sorted(m["Body"] for m in received) == ["one", "two"]


def test_whole_call_refusals_come_before_the_character_check(sqs) -> None:  # type: ignore[no-untyped-def]
    url = sqs.create_queue(QueueName="q")["QueueUrl"]
    eleven = [{"Id": str(i), "MessageBody": "\ufffe"} for i in range(11)]
    with pytest.raises(ClientError) as refused:
        sqs.send_message_batch(QueueUrl=url, Entries=eleven)
    assert refused.value.response["Error"]["Code"].endswith("TooManyEntriesInBatchRequest")


def test_the_rule_is_the_documented_set() -> None:
    """Derived from the ranges, not a list: every BMP code point and the edges of the supplementary planes."""
    allowed = [(0x9, 0x9), (0xA, 0xA), (0xD, 0xD), (0x20, 0xD7FF), (0xE000, 0xFFFD), (0x10000, 0x10FFFF)]
    for point in [*range(0x10000), 0x10000, 0x10FFFF]:
        inside = any(low <= point <= high for low, high in allowed)
        assert (sqs_disallowed_character(chr(point)) is None) == inside, hex(point)
