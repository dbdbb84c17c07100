"""Issue 33 item 1, the message-level defence: the delivery function is not a signing oracle.

``functions/webhook_delivery/handler.py`` on moto, with the stack's real records: a jobs table and a batches table,
the job-events topic and the webhook queue subscribed to it as the template subscribes it. A victim's job asked for a
webhook; the stack publishes its ``job.succeeded`` (``EventPublisher``: recorded on the job, then published). Then
whoever may send to the queue (the queue policy is the other half of the fix: ``tests/e2e/test_forged_webhooks.py``)
sends it hand-made SNS envelopes naming the victim's job, with a fake event and an attacker's receiver:

- a made-up event id: dropped, not retried, nothing POSTed or signed; logged and counted (``webhook_forged_dropped``);
- the genuine event id with a changed body and URL: delivered as the stack recorded it, to the job's own webhook;
- a ``batch.completed`` for a batch that never published one: dropped.

On the code before issue 33 the forged events reached the attacker's receiver, signed with the victim's secret.
"""

from __future__ import annotations

import importlib.util
import json
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import boto3
import msgspec
import pytest
from moto import mock_aws

from omnireel.aws import clients
from omnireel.aws.event_publisher import EventPublisher
from omnireel.core.records import to_json
from omnireel.events.job_events import EventArtifacts, EventTimings, JobEvent
from omnireel.jobs.request import JobRequest
from omnireel.webhooks.secrets import MASTER_USE
from omnireel_local.event_sources import lambda_record
from omnireel_template import ROOT, load_template, offline_lambda_environment

REGION = "us-east-1"
ACCOUNT = "123456789012"
VICTIM = f"arn:aws:iam::{ACCOUNT}:user/victim"
BOUND_S = 30


class Receivers:
    """One loopback HTTP server answering 204 to every POST, keeping each (path, body, headers)."""

    def __init__(self) -> None:
        self.posts: list[tuple[str, bytes, dict[str, str]]] = []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                owner.posts.append((self.path, body, dict(self.headers.items())))
                self.send_response(204)
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}{path}"

    def paths(self) -> list[str]:
        return sorted(path for path, _, _ in self.posts)


class Context:
    def __init__(self, timeout_s: float) -> None:
        self.deadline = time.monotonic() + timeout_s
        self.aws_request_id = str(uuid.uuid4())
        self.function_name = "omnireel-webhook_delivery"
        self.memory_limit_in_mb = 512
        self.invoked_function_arn = f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:omnireel-webhook_delivery"

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int((self.deadline - time.monotonic()) * 1000))


def _table(ddb: Any, logical: str) -> str:
    """The table as the template declares its keys (the placeholder name the offline environment names)."""
    props = load_template()["Resources"][logical]["Properties"]
    name = f"placeholder-{logical}"
    ddb.create_table(
        TableName=name,
        BillingMode="PAY_PER_REQUEST",
        AttributeDefinitions=[a for a in props["AttributeDefinitions"] if a["AttributeName"] in
                              {k["AttributeName"] for k in props["KeySchema"]}],
        KeySchema=props["KeySchema"],
    )  # fmt: skip
    return name


@pytest.fixture
def stack(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    env = offline_lambda_environment("webhook_delivery")
    env.pop("AWS_ENDPOINT_URL")
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("WEBHOOK_ALLOW_LOOPBACK_HTTP", "true")  # the receivers are on 127.0.0.1 (the local setting)
    receivers = Receivers()
    clients.client.cache_clear()
    try:
        with mock_aws():
            ddb = boto3.client("dynamodb", region_name=REGION)
            jobs, batches = _table(ddb, "JobsTable"), _table(ddb, "BatchesTable")
            sns, sqs = boto3.client("sns", region_name=REGION), boto3.client("sqs", region_name=REGION)
            topic = sns.create_topic(Name="job-events")["TopicArn"]
            queue = sqs.create_queue(QueueName="webhooks")["QueueUrl"]
            queue_arn = sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
            subscription = load_template()["Resources"]["WebhookSubscription"]["Properties"]
            sns.subscribe(
                TopicArn=topic, Protocol="sqs", Endpoint=queue_arn,
                Attributes={"FilterPolicyScope": subscription["FilterPolicyScope"],
                            "FilterPolicy": json.dumps(subscription["FilterPolicy"])},
            )  # fmt: skip
            secret = boto3.client("secretsmanager", region_name=REGION).create_secret(
                Name=f"hooks-{uuid.uuid4().hex[:8]}",
                SecretString=json.dumps({"use": MASTER_USE, "key": "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}),
            )["ARN"]
            monkeypatch.setenv("WEBHOOK_QUEUE_URL", queue)
            monkeypatch.setenv("WEBHOOK_SECRET_ARN", secret)
            yield {"ddb": ddb, "jobs": jobs, "batches": batches, "topic": topic, "sqs": sqs, "queue": queue,
                   "queue_arn": queue_arn, "receivers": receivers}  # fmt: skip
    finally:
        receivers.server.shutdown()
        receivers.server.server_close()
        clients.client.cache_clear()


def _handler() -> Any:
    """A fresh import of the handler module (its settings and clients are made at import, as on a cold start)."""
    path = ROOT / "functions" / "webhook_delivery" / "handler.py"
    name = f"omnireel_fn_webhook_delivery_{uuid.uuid4().hex[:8]}"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _victim_job(stack: dict[str, Any], hook: str) -> tuple[str, JobRequest]:
    """A job of the victim's that asked for its terminal events at ``hook`` (the record as the API writes it)."""
    job_id = str(uuid.uuid4())
    request = msgspec.convert({"prompt": "a lighthouse at dusk", "webhook": hook}, JobRequest)
    stamp = {"S": "2026-12-04T12:00:00.000Z"}
    item = {
        "job_id": {"S": job_id}, "owner": {"S": VICTIM}, "status": {"S": "succeeded"}, "source": {"S": "api"},
        "request_json": {"S": to_json(request)}, "created_at": stamp, "updated_at": stamp,
        "webhook_deliveries": {"M": {}},
    }  # fmt: skip
    stack["ddb"].put_item(TableName=stack["jobs"], Item=item)
    return job_id, request


def _publish_succeeded(stack: dict[str, Any], job_id: str, request: JobRequest) -> JobEvent:
    """What the stack does at the job's end: ``EventPublisher`` records the event on the job, then publishes it."""
    event = JobEvent(
        event_id=str(uuid.uuid4()), event_type="job.succeeded", occurred_at="2026-12-04T12:00:00.000Z", job_id=job_id,
        status="succeeded", prompt=request.prompt, request=request, source="api", artifacts=EventArtifacts(),
        timings=EventTimings(),
    )  # fmt: skip
    EventPublisher(stack["topic"], jobs_table=stack["jobs"], batches_table=stack["batches"]).publish(event)
    return event


def _forge(stack: dict[str, Any], event: dict[str, Any], hook: str) -> None:
    """The attacker's hand-made SNS envelope, sent straight to the webhook queue."""
    envelope = {
        "Type": "Notification",
        "MessageId": str(uuid.uuid4()),
        "TopicArn": stack["topic"],
        "Message": json.dumps(event),
        "MessageAttributes": {"webhook": {"Type": "String", "Value": hook}},
    }
    stack["sqs"].send_message(QueueUrl=stack["queue"], MessageBody=json.dumps(envelope))


def _invoke_on_queue(stack: dict[str, Any], count: int) -> dict[str, Any]:
    messages: list[dict[str, Any]] = []
    ends = time.monotonic() + BOUND_S
    while len(messages) < count and time.monotonic() < ends:
        messages += (
            stack["sqs"]
            .receive_message(
                QueueUrl=stack["queue"], MaxNumberOfMessages=10, AttributeNames=["All"], MessageAttributeNames=["All"]
            )
            .get("Messages", [])
        )
    assert len(messages) == count
    event = {"Records": [lambda_record(m, stack["queue_arn"], REGION) for m in messages]}
    return dict(_handler().handler(event, Context(30)))


def test_a_forged_event_for_another_callers_job_is_dropped_unsigned(
    stack: dict[str, Any], caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    from omnireel.runtime.observability import metrics

    counted: list[str] = []  # metrics are disabled in tests (tests/conftest.py): what the function adds is kept here
    monkeypatch.setattr(metrics, "add_metric", lambda name, unit, value: counted.append(name))
    receivers: Receivers = stack["receivers"]
    job_id, _ = _victim_job(stack, receivers.url("/victim"))
    fake = {
        "version": 1, "event_id": str(uuid.uuid4()), "event_type": "job.succeeded", "job_id": job_id,
        "status": "succeeded", "artifacts": {"video": {"url": "https://attacker.example/evil.mp4"}},
    }  # fmt: skip
    _forge(stack, fake, receivers.url("/attacker"))

    response = _invoke_on_queue(stack, 1)

    assert response == {"batchItemFailures": []}  # dropped for good: not retried
    assert receivers.posts == []  # nothing sent, so nothing signed with the victim's secret
    (dropped,) = [r for r in caplog.records if r.getMessage() == "webhook event not published by the stack: dropped"]
    assert dropped.levelname == "ERROR" and getattr(dropped, "job_id", None) == job_id
    assert counted == ["webhook_forged_dropped"]


def test_a_replayed_event_id_is_delivered_as_recorded_to_the_jobs_own_webhook(stack: dict[str, Any]) -> None:
    """The genuine event (through the topic) and a copy of its id with another body and URL: both deliveries carry
    the recorded body to the job's webhook; the attacker's receiver gets nothing."""
    receivers: Receivers = stack["receivers"]
    job_id, request = _victim_job(stack, receivers.url("/victim"))
    genuine = _publish_succeeded(stack, job_id, request)
    tampered = {**json.loads(to_json(genuine)), "prompt": "tampered", "artifacts": {"video": {"url": "https://x/e"}}}
    _forge(stack, tampered, receivers.url("/attacker"))

    response = _invoke_on_queue(stack, 2)

    assert response == {"batchItemFailures": []}
    assert receivers.paths() == ["/victim", "/victim"]
    for _, body, headers in receivers.posts:
        assert body.decode() == to_json(genuine)  # the recorded body, byte for byte
        assert headers["webhook-id"] == genuine.event_id


def test_a_forged_batch_completed_is_dropped(stack: dict[str, Any]) -> None:
    receivers: Receivers = stack["receivers"]
    batch_id = uuid.uuid4().hex
    item = {"batch_id": {"S": batch_id}, "item": {"S": "batch"}, "owner": {"S": VICTIM},
            "webhook": {"S": receivers.url("/victim-batch")}}  # fmt: skip
    stack["ddb"].put_item(TableName=stack["batches"], Item=item)
    fake = {"version": 1, "event_id": str(uuid.uuid4()), "event_type": "batch.completed", "batch_id": batch_id}
    _forge(stack, fake, receivers.url("/attacker"))

    assert _invoke_on_queue(stack, 1) == {"batchItemFailures": []}
    assert receivers.posts == []
