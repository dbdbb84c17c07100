"""moto patch 25: SendMessage no longer counts the queue's messages (it cost O(messages in the queue) per send); the
attribute it reads is the same, and GetQueueAttributes still counts."""

from __future__ import annotations

from typing import Any

import boto3
import pytest
from moto import mock_aws
from moto.sqs.models import Message

from omnireel_local.patches.speed import patch_sqs_send_attributes


def _count_visibility_checks(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    checks = [0]
    visible = Message.visible.fget

    def counted(self: Any) -> bool:
        checks[0] += 1
        return visible(self)

    monkeypatch.setattr(Message, "visible", property(counted))
    return checks


def test_a_send_does_not_walk_the_queue_and_the_counts_stay_right(monkeypatch: pytest.MonkeyPatch) -> None:
    with mock_aws():
        patch_sqs_send_attributes(monkeypatch.setattr)
        sqs = boto3.client("sqs", region_name="us-east-1")
        url = sqs.create_queue(QueueName="cli-job-events")["QueueUrl"]
        for index in range(50):
            sqs.send_message(QueueUrl=url, MessageBody=f"event {index}")
        checks = _count_visibility_checks(monkeypatch)
        sqs.send_message(QueueUrl=url, MessageBody="one more")
        assert checks[0] == 0  # before the patch: 3 walks of the 50 messages already there
        counted = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
        assert counted["ApproximateNumberOfMessages"] == "51"
        assert checks[0] > 0  # GetQueueAttributes still counts


def test_fifo_content_based_deduplication_still_reads_the_attribute(monkeypatch: pytest.MonkeyPatch) -> None:
    with mock_aws():
        patch_sqs_send_attributes(monkeypatch.setattr)
        sqs = boto3.client("sqs", region_name="us-east-1")
        dedup = sqs.create_queue(
            QueueName="d.fifo", Attributes={"FifoQueue": "true", "ContentBasedDeduplication": "true"}
        )["QueueUrl"]
        for _ in range(2):
            sqs.send_message(QueueUrl=dedup, MessageBody="same", MessageGroupId="g")
        attributes = sqs.get_queue_attributes(QueueUrl=dedup, AttributeNames=["ApproximateNumberOfMessages"])
        assert attributes["Attributes"]["ApproximateNumberOfMessages"] == "1"  # the duplicate was dropped
        plain = sqs.create_queue(QueueName="p.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]
        with pytest.raises(sqs.exceptions.ClientError, match="ContentBasedDeduplication"):
            sqs.send_message(QueueUrl=plain, MessageBody="x", MessageGroupId="g")  # needs a deduplication id
