"""Issue 33 item 1 on the local stack: the delivery function is not a signing oracle.

The attacker is the local developer identity (``sqs:*`` on the stack's queues, ``lambda:InvokeFunction`` on its
functions); the victim is a second caller, B, whose job asked for a webhook. The attacker writes a ``job.succeeded`` for
B's job with its own video URL and aims it at a receiver that verifies with B's secret (what a consumer of B's would
run). Before issue 33 both paths below delivered it, and B's secret verified it.

- Through the webhook queue: the queue policy refuses the send (AccessDenied), as AWS does: the policy lets only the
  job-events topic (an AWS service) send there.
- Straight into the delivery function (a direct Invoke with a hand-made SQS record, as a principal that may invoke the
  function but not send to the queue would): the function finds no record of that event on B's job and drops it; no
  request reaches the receiver.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from botocore.exceptions import ClientError

from tests.support.frontdoor import FrontDoorClient, new_user
from tests.support.stack import LocalStack

from .helpers import aws_client
from .test_webhook_tenants import Receiver

pytestmark = pytest.mark.e2e

QUIET_S = 5  # the receiver has printed nothing this long after the (synchronous) invoke returned


def _caller_b(stack: LocalStack) -> tuple[FrontDoorClient, str]:
    """A second caller (its own IAM user through the front door) and its webhook secret."""
    state = stack.state()
    _, credentials = new_user(state)
    door = FrontDoorClient(state["api_url"], state["region"], credentials)
    reply = door.request("GET", "/webhooks/secret", b"", [])
    assert reply.status == 200, reply.body
    return door, reply.json["secret"]


def _b_job(door: FrontDoorClient, webhook: str) -> str:
    """B's job with a webhook that asked only for an event it never gets (so no genuine delivery runs beside the
    forged one): only its id matters to the attacker."""
    reply = door.post_json({"prompt": "B's lighthouse", "webhook": webhook, "webhook_events": ["job.cancelled"]})
    assert reply.status == 202, reply.body
    return str(reply.json["job_id"])


def _forged_envelope(stack: LocalStack, job_id: str, hook: str) -> str:
    event = {
        "version": 1, "event_id": str(uuid.uuid4()), "event_type": "job.succeeded", "job_id": job_id,
        "status": "succeeded", "artifacts": {"video": {"url": "https://attacker.example/evil.mp4"}},
    }  # fmt: skip
    return json.dumps(
        {
            "Type": "Notification",
            "MessageId": str(uuid.uuid4()),
            "TopicArn": "arn:aws:sns:us-east-1:000000000000:JobEventsTopic",
            "Subject": "omnireel job.succeeded",
            "Message": json.dumps(event),
            "MessageAttributes": {"webhook": {"Type": "String", "Value": hook}},
        }
    )


def _named(client: Any, lister: str, key: str, field: str, part: str) -> str:
    found = [item[field] for item in getattr(client, lister)().get(key, []) if part in item[field]]
    assert len(found) == 1, found
    return str(found[0])


def test_the_developer_cannot_put_a_forged_event_for_another_callers_job_into_the_webhook_queue(
    stack: LocalStack,
) -> None:
    door, b_secret = _caller_b(stack)
    sqs = aws_client(stack, "sqs")
    queue = next(u for u in sqs.list_queues()["QueueUrls"] if "WebhookQueue" in u and "DeadLetter" not in u)
    receiver = Receiver(stack, b_secret)  # the attacker's receiver, verifying with the victim's secret
    try:
        job_id = _b_job(door, "http://127.0.0.1:9/b-own")
        forged = _forged_envelope(stack, job_id, f"{receiver.url}/forged")
        with pytest.raises(ClientError) as refused:
            sqs.send_message(QueueUrl=queue, MessageBody=forged)
        error = refused.value.response["Error"]
        assert error["Code"] in ("AccessDenied", "AccessDeniedException"), error
        assert "explicit deny" in error["Message"]
        with pytest.raises(ClientError) as refused_batch:  # SendMessageBatch is authorised as SendMessage
            sqs.send_message_batch(QueueUrl=queue, Entries=[{"Id": "1", "MessageBody": forged}])
        assert refused_batch.value.response["ResponseMetadata"]["HTTPStatusCode"] == 403
        # Nor may the attacker publish into the job-events topic, which feeds the queue.
        sns = aws_client(stack, "sns")
        topic = _named(sns, "list_topics", "Topics", "TopicArn", "JobEventsTopic")
        with pytest.raises(ClientError) as refused_publish:
            sns.publish(TopicArn=topic, Message=json.loads(forged)["Message"])
        assert refused_publish.value.response["ResponseMetadata"]["HTTPStatusCode"] == 403
        assert receiver.delivery_for("/forged", QUIET_S) is None
    finally:
        receiver.stop()


def test_a_forged_event_handed_to_the_delivery_function_is_dropped_unsigned(stack: LocalStack) -> None:
    door, b_secret = _caller_b(stack)
    function = _named(aws_client(stack, "lambda"), "list_functions", "Functions", "FunctionName", "WebhookDelivery")
    receiver = Receiver(stack, b_secret)
    try:
        job_id = _b_job(door, "http://127.0.0.1:9/b-own")
        record = {
            "messageId": str(uuid.uuid4()),
            "receiptHandle": "forged-receipt-handle",
            "body": _forged_envelope(stack, job_id, f"{receiver.url}/forged"),
            "attributes": {"ApproximateReceiveCount": "1", "SentTimestamp": "1764547200000"},
            "messageAttributes": {},
            "md5OfBody": "0" * 32,
            "eventSource": "aws:sqs",
            "eventSourceARN": f"arn:aws:sqs:{stack.outputs['AWS_REGION']}:000000000000:WebhookQueue",
            "awsRegion": stack.outputs["AWS_REGION"],
        }
        answer = aws_client(stack, "lambda").invoke(
            FunctionName=function, Payload=json.dumps({"Records": [record]}).encode()
        )
        assert "FunctionError" not in answer, answer["Payload"].read()
        assert json.loads(answer["Payload"].read()) == {"batchItemFailures": []}  # dropped for good, not retried
        assert receiver.delivery_for("/forged", QUIET_S) is None, "a forged event was delivered with B's secret"
        assert receiver.refusals("/forged", 1) == []  # nothing was POSTed at all
    finally:
        receiver.stop()
