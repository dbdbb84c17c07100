"""moto patch 27: ChangeMessageVisibility is refused, as on AWS, when the new timeout would end more than 12 hours
after the receive that produced the receipt handle (moto measured from the send); the batch call refuses per entry."""

from __future__ import annotations

from typing import Any

import boto3
import pytest
from moto import mock_aws

from omnireel_local.patches.sqs_sns import SQS_MAX_VISIBILITY_S, patch_sqs_visibility_limit

LIMIT_MESSAGE = (
    "Value {} for parameter VisibilityTimeout is invalid. Reason: Total VisibilityTimeout for the message is beyond "
    "the limit [43200 seconds]"
)


def _received(sqs: Any, url: str) -> dict[str, Any]:
    (message,) = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=1, AttributeNames=["All"])["Messages"]
    return message


def _age_receipts(monkeypatch: pytest.MonkeyPatch, seconds: float) -> None:
    """Every receipt handle's receive moved ``seconds`` into the past (the clock of the limit, not of visibility)."""
    from moto.sqs.models import sqs_backends

    for backend in sqs_backends["123456789012"].values():
        for queue in backend.queues.values():
            for message in queue._messages:
                times = message.__dict__.get("omnireel_received_ms", {})
                for handle in times:
                    times[handle] -= seconds * 1000


def test_the_limit_runs_from_the_receive_not_the_send(monkeypatch: pytest.MonkeyPatch) -> None:
    with mock_aws():
        patch_sqs_visibility_limit(monkeypatch.setattr)
        sqs = boto3.client("sqs", region_name="us-east-1")
        url = sqs.create_queue(QueueName="hooks")["QueueUrl"]
        sqs.send_message(QueueUrl=url, MessageBody="m")
        # the message was sent 13 hours ago (moto refused every change from then on); its receive is now
        from moto.sqs.models import sqs_backends

        (queue,) = sqs_backends["123456789012"]["us-east-1"].queues.values()
        queue._messages[0].sent_timestamp -= 13 * 3600 * 1000
        handle = _received(sqs, url)["ReceiptHandle"]
        sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=handle, VisibilityTimeout=43000)  # accepted

        _age_receipts(monkeypatch, 300)  # received 5 minutes ago: 43,200 - 300 s left
        with pytest.raises(sqs.exceptions.ClientError) as refused:
            sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=handle, VisibilityTimeout=SQS_MAX_VISIBILITY_S)
        error = refused.value.response["Error"]
        assert error["Code"].endswith("InvalidParameterValue")
        assert error["Message"] == LIMIT_MESSAGE.format(SQS_MAX_VISIBILITY_S)
        assert refused.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400
        sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=handle, VisibilityTimeout=43200 - 300 - 2)


def test_a_new_receive_starts_a_new_12_hours(monkeypatch: pytest.MonkeyPatch) -> None:
    with mock_aws():
        patch_sqs_visibility_limit(monkeypatch.setattr)
        sqs = boto3.client("sqs", region_name="us-east-1")
        url = sqs.create_queue(QueueName="hooks")["QueueUrl"]
        sqs.send_message(QueueUrl=url, MessageBody="m")
        first = _received(sqs, url)["ReceiptHandle"]
        _age_receipts(monkeypatch, 3600)
        sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=first, VisibilityTimeout=0)  # visible again
        second = _received(sqs, url)["ReceiptHandle"]
        sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=second, VisibilityTimeout=43190)
        with pytest.raises(sqs.exceptions.ClientError, match="beyond the limit"):
            sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=first, VisibilityTimeout=43190)


def test_the_batch_call_refuses_per_entry(monkeypatch: pytest.MonkeyPatch) -> None:
    with mock_aws():
        patch_sqs_visibility_limit(monkeypatch.setattr)
        sqs = boto3.client("sqs", region_name="us-east-1")
        url = sqs.create_queue(QueueName="hooks")["QueueUrl"]
        for body in ("a", "b"):
            sqs.send_message(QueueUrl=url, MessageBody=body)
        handles = [m["ReceiptHandle"] for m in sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=2)["Messages"]]
        _age_receipts(monkeypatch, 60)
        answer = sqs.change_message_visibility_batch(
            QueueUrl=url,
            Entries=[
                {"Id": "fits", "ReceiptHandle": handles[0], "VisibilityTimeout": 43200 - 120},
                {"Id": "beyond", "ReceiptHandle": handles[1], "VisibilityTimeout": 43200},
            ],
        )
        assert [s["Id"] for s in answer["Successful"]] == ["fits"]
        (failed,) = answer["Failed"]
        assert (failed["Id"], failed["Code"], failed["SenderFault"]) == ("beyond", "InvalidParameterValue", True)
        assert failed["Message"] == LIMIT_MESSAGE.format(43200)
