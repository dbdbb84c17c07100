"""Issue 25, items 3, 4 and 6: ``functions/webhook_delivery/handler.py`` itself, on moto (with the local stack's SQS
visibility rule, moto patch 27) and real loopback receivers. The queue is created as the template declares it; the
records are real receives (their receipt handles and receive counts), shaped as Lambda's poller shapes them.

- one record failing (its attempt cannot be recorded) is the only one returned, with its own backoff; the others were
  delivered once and are not failed with it;
- ten receivers that all hang, in one batch: the ten attempts run at once and all end at the deadline, inside the
  function's Timeout;
- the whole retry schedule (13 attempts, the template's base) against the local SQS: every ChangeMessageVisibility is
  accepted, also when the receive happened minutes before the invocation; then the dead-letter queue.
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
import pytest
from moto import mock_aws

from omnireel.events.published import EventIds, EventNotPublished, RecordedDelivery
from omnireel.webhooks.secrets import MASTER_USE
from omnireel_local.event_sources import lambda_record
from omnireel_local.patches.sqs_sns import patch_sqs_visibility_limit
from omnireel_template import ROOT, load_template, offline_lambda_environment
from tests.support.receivers import hanging_receiver

REGION = "us-east-1"
BOUND_S = 30


def _template_queue(sqs: Any, dlq_arn: str) -> str:
    queue = load_template()["Resources"]["WebhookQueue"]["Properties"]
    attributes = {
        "VisibilityTimeout": str(queue["VisibilityTimeout"]),
        "MessageRetentionPeriod": str(queue["MessageRetentionPeriod"]),
        "RedrivePolicy": json.dumps(
            {"deadLetterTargetArn": dlq_arn, "maxReceiveCount": queue["RedrivePolicy"]["maxReceiveCount"]}
        ),
    }
    return sqs.create_queue(QueueName=f"hooks-{uuid.uuid4().hex[:8]}", Attributes=attributes)["QueueUrl"]


class Context:
    def __init__(self, timeout_s: float) -> None:
        self.deadline = time.monotonic() + timeout_s
        self.aws_request_id = str(uuid.uuid4())
        self.function_name = "omnireel-webhook_delivery"
        self.memory_limit_in_mb = 512
        self.invoked_function_arn = f"arn:aws:lambda:{REGION}:123456789012:function:omnireel-webhook_delivery"

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int((self.deadline - time.monotonic()) * 1000))


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    env = offline_lambda_environment("webhook_delivery")
    env.pop("AWS_ENDPOINT_URL")
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("WEBHOOK_ALLOW_LOOPBACK_HTTP", "true")  # the receivers are on 127.0.0.1 (the local setting)
    with mock_aws():
        patch_sqs_visibility_limit(monkeypatch.setattr)
        sqs = boto3.client("sqs", region_name=REGION)
        dlq = sqs.create_queue(QueueName=f"hooks-dlq-{uuid.uuid4().hex[:8]}")["QueueUrl"]
        dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        url = _template_queue(sqs, dlq_arn)
        secret = boto3.client("secretsmanager", region_name=REGION).create_secret(
            Name=f"hooks-{uuid.uuid4().hex[:8]}",
            SecretString=json.dumps({"use": MASTER_USE, "key": "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}),
        )["ARN"]
        monkeypatch.setenv("WEBHOOK_QUEUE_URL", url)
        monkeypatch.setenv("WEBHOOK_SECRET_ARN", secret)
        yield {"sqs": sqs, "url": url, "dlq": dlq, "monkeypatch": monkeypatch}


class OneOwner:
    """The records' owners (omnireel.aws.record_owners): every job and batch belongs to one caller here."""

    def of_job(self, job_id: str) -> str | None:
        return "arn:aws:iam::123456789012:user/alice"

    def of_batch(self, batch_id: str) -> str | None:
        return "arn:aws:iam::123456789012:user/alice"


class Recorded:
    """The stack's records of the events it published (omnireel.aws.record_owners.PublishedEvents; issue 33): here, the
    events ``_send`` queued, as if the stack had published them."""

    events: dict[str, RecordedDelivery] = {}

    def delivery(self, ids: EventIds) -> RecordedDelivery:
        recorded = self.events.get(ids.event_id)
        if recorded is None:
            raise EventNotPublished(f"no record of {ids.event_id}")
        return recorded


def _handler(**env: str) -> Any:
    """A fresh import of the handler module (its settings are read at import, as on a cold start); the owners of the
    events' jobs come from ``OneOwner`` and the published events from ``Recorded`` (no tables here)."""
    mp = pytest.MonkeyPatch()
    for name, value in env.items():
        mp.setenv(name, value)
    path = ROOT / "functions" / "webhook_delivery" / "handler.py"
    name = f"omnireel_fn_webhook_delivery_{uuid.uuid4().hex[:8]}"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    finally:
        mp.undo()
    module.owners = OneOwner()
    module.published = Recorded()
    return module


def _send(sqs: Any, url: str, hook: str, job_id: str | None = None) -> None:
    job_id = job_id or str(uuid.uuid4())  # every job event names its job (its owner's secret signs it)
    event = {"event_id": str(uuid.uuid4()), "event_type": "job.succeeded", "job_id": job_id}
    Recorded.events[event["event_id"]] = RecordedDelivery(
        hook, json.dumps(event), event["event_id"], "job.succeeded", job_id
    )  # published by the stack: its record names the event and the job's webhook
    envelope = {
        "Type": "Notification",
        "Message": json.dumps(event),
        "MessageAttributes": {"webhook": {"Type": "String", "Value": hook}},
    }
    sqs.send_message(QueueUrl=url, MessageBody=json.dumps(envelope))


def _receive(sqs: Any, url: str, count: int) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    ends = time.monotonic() + BOUND_S
    while len(messages) < count and time.monotonic() < ends:
        messages += sqs.receive_message(
            QueueUrl=url, MaxNumberOfMessages=min(10, count - len(messages)), AttributeNames=["All"]
        ).get("Messages", [])
    assert len(messages) == count
    return messages


def _event(messages: list[dict[str, Any]], url: str) -> dict[str, Any]:
    return {"Records": [lambda_record(m, f"arn:aws:sqs:{REGION}:123456789012:{url.rsplit('/', 1)[1]}", REGION)
                        for m in messages]}  # fmt: skip


def _moto_message(url: str, message_id: str) -> Any:
    from moto.sqs.models import sqs_backends

    queue = sqs_backends["123456789012"][REGION].queues[url.rsplit("/", 1)[1]]
    (message,) = [m for m in queue._messages if m.id == message_id]
    return message


class Receivers:
    """One loopback HTTP server; the path says how to answer: /ok (204), /fail (500)."""

    def __init__(self) -> None:
        self.posts: dict[str, int] = {}
        lock = threading.Lock()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("content-length") or 0))
                with lock:
                    owner.posts[self.path] = owner.posts.get(self.path, 0) + 1
                self.send_response(204 if self.path.startswith("/ok") else 500)
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receivers() -> Iterator[Receivers]:
    servers = Receivers()
    try:
        yield servers
    finally:
        servers.close()


class ThrottledJobs:
    """The job store: recording an attempt on ``throttled`` fails (a DynamoDB throttle that outlasted the retries)."""

    def __init__(self, throttled: str) -> None:
        self.throttled = throttled
        self.recorded: list[str] = []

    def record_webhook_attempt(self, job_id: str, event_type: str, state: dict[str, Any]) -> None:
        from botocore.exceptions import ClientError

        if job_id == self.throttled:
            error = {"Code": "ProvisionedThroughputExceededException", "Message": "Rate of requests exceeds"}
            raise ClientError({"Error": error}, "UpdateItem")
        self.recorded.append(job_id)


def test_one_record_failing_to_record_its_attempt_is_the_only_one_retried(aws: dict, receivers: Receivers) -> None:
    sqs, url = aws["sqs"], aws["url"]
    for n in (1, 2, 3):
        _send(sqs, url, receivers.url(f"/ok/{n}"), job_id=f"job-{n}")
    messages = _receive(sqs, url, 3)
    by_job = {json.loads(json.loads(m["Body"])["Message"])["job_id"]: m for m in messages}
    handler = _handler()
    jobs = ThrottledJobs("job-2")
    aws["monkeypatch"].setattr(handler, "jobs", jobs)

    response = handler.handler(_event(messages, url), Context(30))

    assert response == {"batchItemFailures": [{"itemIdentifier": by_job["job-2"]["MessageId"]}]}
    assert receivers.posts == {"/ok/1": 1, "/ok/2": 1, "/ok/3": 1}  # each POSTed once: nothing sent twice
    assert sorted(jobs.recorded) == ["job-1", "job-3"]
    # record 2 alone is invisible for its own backoff (attempt 1: the base, 30 s), not the queue's 180 s
    invisible_s = (_moto_message(url, by_job["job-2"]["MessageId"]).visible_at - time.time() * 1000) / 1000
    assert 20 < invisible_s <= 30


def test_a_secrets_manager_error_fails_the_records_not_the_invocation(aws: dict, receivers: Receivers) -> None:
    sqs, url = aws["sqs"], aws["url"]
    for n in (1, 2):
        _send(sqs, url, receivers.url(f"/ok/{n}"))
    messages = _receive(sqs, url, 2)
    handler = _handler(WEBHOOK_SECRET_ARN=f"arn:aws:secretsmanager:{REGION}:123456789012:secret:gone-{uuid.uuid4()}")
    response = handler.handler(_event(messages, url), Context(30))
    assert {f["itemIdentifier"] for f in response["batchItemFailures"]} == {m["MessageId"] for m in messages}
    assert receivers.posts == {}


def test_ten_hanging_receivers_in_one_batch_end_at_the_deadline_inside_the_timeout(aws: dict) -> None:
    sqs, url = aws["sqs"], aws["url"]
    template = load_template()["Resources"]
    timeout = template["WebhookDeliveryFunction"]["Properties"]["Timeout"]
    batch = template["WebhookDeliveryEventSource"]["Properties"]["BatchSize"]
    with hanging_receiver(BOUND_S) as seen:
        for _ in range(batch):
            _send(sqs, url, f"http://127.0.0.1:{seen['port']}{seen['path']}")  # each its own event (webhook-id)
        messages = _receive(sqs, url, batch)
        handler = _handler(WEBHOOK_ATTEMPT_DEADLINE_SECONDS="2")  # the template's 10 s, shortened for the test
        context = Context(timeout)
        response = handler.handler(_event(messages, url), context)
        left_s = context.get_remaining_time_in_millis() / 1000
        ends = time.monotonic() + BOUND_S
        while seen["closed"] < batch and time.monotonic() < ends:
            time.sleep(0.05)
    assert len(response["batchItemFailures"]) == batch  # every attempt failed (and will be retried)
    assert seen["max_open"] == batch, "the attempts of one batch run at once"
    assert seen["closed"] == batch  # every attempt was ended by the client at its deadline
    assert left_s > 0, "the invocation outlived the function's Timeout"


def test_the_whole_retry_schedule_is_accepted_by_the_local_sqs(aws: dict, receivers: Receivers) -> None:
    """13 attempts with the template's base (30 s): attempts 12 and 13 ask for the cap, which SQS accepts even when
    the poller received the batch minutes before invoking. Today's 43,200 s is refused (InvalidParameterValue)."""
    from omnireel.webhooks.delivery import retry_delay_s

    sqs, url = aws["sqs"], aws["url"]
    queue = load_template()["Resources"]["WebhookQueue"]["Properties"]
    attempts = queue["RedrivePolicy"]["maxReceiveCount"]
    receive_to_invoke_s = queue["VisibilityTimeout"] - 5  # the poller held the batch almost to its visibility
    handler = _handler()
    assert handler.settings.webhook_retry_base_seconds == 30  # the template's default base
    _send(sqs, url, receivers.url("/fail"))
    for attempt in range(1, attempts + 1):
        (message,) = _receive(sqs, url, 1)
        assert message["Attributes"]["ApproximateReceiveCount"] == str(attempt)
        held = _moto_message(url, message["MessageId"])
        held.omnireel_received_ms[message["ReceiptHandle"]] -= receive_to_invoke_s * 1000
        response = handler.handler(_event([message], url), Context(30))
        assert response == {"batchItemFailures": [{"itemIdentifier": message["MessageId"]}]}
        invisible_s = (held.visible_at - time.time() * 1000) / 1000
        if attempt < attempts:
            expected = retry_delay_s(attempt, 30)
            assert expected - 5 < invisible_s <= expected, f"attempt {attempt}: the backoff was not applied"
        else:  # the last attempt: visible at once, so the next receive dead-letters it (no 12 h wait for nothing)
            assert invisible_s <= 0
        sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"], VisibilityTimeout=0)
    assert receivers.posts == {"/fail": attempts}
    assert sqs.receive_message(QueueUrl=url, WaitTimeSeconds=0).get("Messages", []) == []  # redriven on receive 14
    (dead,) = _receive(sqs, aws["dlq"], 1)
    assert dead["MessageId"] == message["MessageId"]
