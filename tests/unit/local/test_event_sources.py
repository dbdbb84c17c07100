"""The local SQS event source mappings (omnireel_local/event_sources.py) and DynamoDB transactions under local IAM."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pytest

from omnireel_local.event_sources import SqsMapping, SqsPollers, failed_item_ids, lambda_record
from omnireel_local.iam_policy import transaction_items

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
