"""The local SQS event source mappings (omnireel_local/event_sources.py) and DynamoDB transactions under local IAM."""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from typing import Any

import pytest

from omnireel_local.event_sources import SqsMapping, SqsPollers, failed_item_ids, lambda_record, state_of
from omnireel_local.iam.policy import transaction_items

QUEUE = "arn:aws:sqs:us-east-1:123456789012:q"


def test_mapping_reads_the_template_settings() -> None:
    spec = {
        "EventSourceArn": QUEUE,
        "FunctionArn": "arn:aws:lambda:us-east-1:123456789012:function:f",
        "BatchSize": 2,
        "FunctionResponseTypes": ["ReportBatchItemFailures"],
        "ScalingConfig": {"MaximumConcurrency": 7},
    }
    mapping = SqsMapping.from_spec("u", spec)
    assert (mapping.batch_size, mapping.concurrency, mapping.report_item_failures) == (2, 7, True)
    assert SqsMapping.from_spec("u", {**spec, "ScalingConfig": {"MaximumConcurrency": 1}}).concurrency == 2  # AWS min


@pytest.mark.parametrize(
    ("payload", "expected"),
    [
        ("", set()),
        ("null", set()),
        ('{"batchItemFailures": []}', set()),
        ('{"batchItemFailures": [{"itemIdentifier": "m2"}]}', {"m2"}),
        ('{"batchItemFailures": [{"itemIdentifier": ""}]}', None),  # AWS: a malformed response fails the batch
        ('{"batchItemFailures": "m2"}', None),
        ("not json", None),
    ],
)
def test_partial_batch_responses(payload: str, expected: set[str] | None) -> None:
    assert failed_item_ids(payload) == expected


@dataclass
class Result:
    payload: str
    errored: bool = False


class FakeSqs:
    def __init__(self, messages: list[dict[str, Any]]):
        self.messages = messages
        self.deleted: list[str] = []

    def receive_message(self, **kwargs: Any) -> dict[str, Any]:
        taken, self.messages = (
            self.messages[: kwargs["MaxNumberOfMessages"]],
            self.messages[kwargs["MaxNumberOfMessages"] :],
        )
        return {"Messages": taken}

    def delete_message_batch(self, QueueUrl: str, Entries: list[dict[str, str]]) -> None:
        self.deleted += [e["ReceiptHandle"] for e in Entries]


def _deliver(result: Result, report: bool) -> FakeSqs:
    messages = [{"MessageId": f"m{i}", "ReceiptHandle": f"r{i}", "Body": "{}"} for i in range(3)]
    sqs = FakeSqs(list(messages))
    mapping = SqsMapping("u", QUEUE, "f", batch_size=3, report_item_failures=report)
    pollers = SqsPollers([mapping], function_of=lambda a: None, invoke=lambda fn, p: result,
                         sqs_client_for=lambda r: sqs, queue_url_of=lambda a: "url", region="us-east-1")  # fmt: skip
    batch = pollers._receive(sqs, "url", mapping)
    assert [m["MessageId"] for m in batch] == ["m0", "m1", "m2"]
    pollers._deliver(sqs, "url", mapping, None, batch)
    return sqs


def test_a_successful_batch_is_deleted_except_the_reported_failures() -> None:
    assert _deliver(Result('{"batchItemFailures": [{"itemIdentifier": "m1"}]}'), report=True).deleted == ["r0", "r2"]
    # Without ReportBatchItemFailures on the mapping, the response body is not read: everything is deleted.
    assert _deliver(Result('{"batchItemFailures": [{"itemIdentifier": "m1"}]}'), report=False).deleted == [
        "r0", "r1", "r2"
    ]  # fmt: skip


def test_a_failed_invocation_deletes_nothing() -> None:
    assert _deliver(Result('{"errorMessage": "boom"}', errored=True), report=True).deleted == []


class HeldReceive:
    """An SQS client whose receives block until released (a long poll under way), counting them."""

    def __init__(self) -> None:
        self.started = threading.Semaphore(0)
        self.ends = threading.Semaphore(0)  # one release() ends one receive
        self.receives = 0

    def receive_message(self, **kwargs: Any) -> dict[str, Any]:
        self.receives += 1
        self.started.release()
        assert self.ends.acquire(timeout=10), "the test never ended the receive"
        return {"Messages": []}


def test_a_disabled_mapping_is_disabling_until_its_receive_ends_and_then_receives_nothing() -> None:
    """UpdateEventSourceMapping Enabled=false (patch 15b): State Disabling while a receive begun before is under way,
    Disabled once it ended; no receive begins while disabled; Enabled=true resumes polling."""
    sqs, enabled = HeldReceive(), {"u": True}
    mapping = SqsMapping("u", QUEUE, "f", concurrency=2)
    pollers = SqsPollers([mapping], function_of=lambda a: type("Fn", (), {"role": "r"})(), invoke=lambda fn, p: None,
                         sqs_client_for=lambda r: sqs, queue_url_of=lambda a: "url", region="us-east-1",
                         enabled_of=lambda u: enabled[u])  # fmt: skip
    pollers.start()
    try:
        for _ in range(2):  # both pollers are inside a long poll
            assert sqs.started.acquire(timeout=10)
        assert state_of("u", True) == "Enabled" and state_of("other", True) is None
        enabled["u"] = False
        assert state_of("u", False) == "Disabling"
        sqs.ends.release()  # one long poll ends; the other is still under way
        with pollers._idle:
            assert pollers._idle.wait_for(lambda: mapping.active <= 1, timeout=10)
        assert state_of("u", False) == "Disabling"
        sqs.ends.release()
        with pollers._idle:
            assert pollers._idle.wait_for(lambda: mapping.active == 0, timeout=10)
        assert state_of("u", False) == "Disabled"
        assert sqs.receives == 2  # nothing began while disabled
        enabled["u"] = True
        assert sqs.started.acquire(timeout=10), "polling did not resume once enabled"
        assert state_of("u", True) == "Enabled"
    finally:
        pollers.shutdown()
        sqs.ends.release(4)
    assert state_of("u", True) is None  # a stopped fleet answers for no mapping


def test_records_have_the_lambda_sqs_shape() -> None:
    message = {
        "MessageId": "m",
        "ReceiptHandle": "r",
        "Body": "b",
        "Attributes": {"ApproximateReceiveCount": "2"},
        "MessageAttributes": {"event_type": {"StringValue": "job.failed", "DataType": "String"}},
    }
    record = lambda_record(message, QUEUE, "us-east-1")
    assert record["eventSource"] == "aws:sqs" and record["eventSourceARN"] == QUEUE
    assert record["messageAttributes"]["event_type"]["stringValue"] == "job.failed"
    assert record["attributes"]["ApproximateReceiveCount"] == "2"


def test_dynamodb_transactions_are_authorised_per_item() -> None:
    body = json.dumps(
        {
            "TransactItems": [
                {"Update": {"TableName": "batches", "Key": {}}},
                {"ConditionCheck": {"TableName": "arn:aws:dynamodb:us-east-1:1:table/jobs", "Key": {}}},
            ]
        }
    )
    assert transaction_items("dynamodb:TransactWriteItems", body, "us-east-1", "1") == [
        ("dynamodb:UpdateItem", "arn:aws:dynamodb:us-east-1:1:table/batches"),
        ("dynamodb:ConditionCheckItem", "arn:aws:dynamodb:us-east-1:1:table/jobs"),
    ]
    assert transaction_items("dynamodb:PutItem", body, "us-east-1", "1") == []
