"""Issue 25 item 1 on the local stack: every caller has its own webhook secret, and one caller can make another
caller's receiver accept nothing -- neither a genuine delivery of its own job aimed at it nor a delivery it forges with
the secret it can read. Dropped files' deliveries use a secret only operators derive; a rotation of the master key
signs with both keys during its grace period, then with the new one only.

Two callers through the front door: A is the developer identity (the CLI), B a second IAM user with only
execute-api:Invoke (``tests.support.frontdoor.new_user``). Receivers are ``omnireel webhooks listen``.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from botocore.exceptions import ClientError
from standardwebhooks.webhooks import Webhook

from omnireel_local.home import free_port
from tests.support.frontdoor import FrontDoorClient, developer_door, new_user
from tests.support.stack import ROOT, LocalStack, cli_command

from .helpers import SMALL_MEDIA, LineReader, aws_client, wait_for

pytestmark = pytest.mark.e2e

DELIVERY_TIMEOUT_S = 150


class Receiver:
    """`omnireel webhooks listen` holding one secret: verified deliveries on stdout, refusals on stderr."""

    def __init__(self, stack: LocalStack, secret: str):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.process = subprocess.Popen(
            [*cli_command(), "webhooks", "listen", "--port", str(self.port), "--secret", secret, "--json",
             "--timeout", "400"],
            env=stack.env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        assert self.process.stderr is not None
        assert "listening on" in self.process.stderr.readline()  # bound before anything is sent to it
        self.accepted = LineReader(self.process)
        self.refused = LineReader(self.process, "stderr")
        self.seen: list[dict] = []

    def delivery_for(self, path: str, timeout: float = DELIVERY_TIMEOUT_S) -> dict | None:
        found = self.accepted.wait_for_json(lambda line: line["path"] == path, timeout)
        if found:
            self.seen.append(found)
        return found

    def drain_accepted(self) -> list[dict]:
        while line := self.accepted.next_line(0.1):
            self.seen.append(json.loads(line))
        return self.seen

    def refusals(self, path: str, timeout: float) -> list[str]:
        deadline, lines = time.monotonic() + timeout, []
        while time.monotonic() < deadline and not lines:
            line = self.refused.next_line(max(0.1, deadline - time.monotonic()))
            if f"refused a delivery to {path}" in line:
                lines.append(line)
        return lines

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=10)


@contextlib.contextmanager
def receivers(stack: LocalStack, *secrets: str) -> Iterator[list[Receiver]]:
    started: list[Receiver] = []
    try:
        for secret in secrets:
            started.append(Receiver(stack, secret))
        yield started
    finally:
        for receiver in started:
            receiver.stop()


def _submit(stack: LocalStack, prompt: str, webhook: str) -> str:
    result = stack.cli("submit", prompt, "--webhook", webhook, "--json", check=True)
    return json.loads(result.stdout)["job_id"]


def _delivery_state(stack: LocalStack, job_id: str) -> dict:
    job = json.loads(stack.cli("status", job_id, "--json", check=True).stdout)
    return ((job.get("webhook") or {}).get("deliveries") or {}).get("job.succeeded") or {}


def _post(url: str, body: bytes, headers: dict[str, str]) -> int:
    request = urllib.request.Request(url, data=body, method="POST", headers=headers)  # noqa: S310 - loopback
    try:
        with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code


def _caller_b(stack: LocalStack) -> tuple[FrontDoorClient, Any]:
    state = stack.state()
    _, credentials = new_user(state)
    return FrontDoorClient(state["api_url"], state["region"], credentials), credentials


def test_each_caller_has_its_own_secret_and_cannot_make_another_callers_receiver_accept_anything(
    stack: LocalStack,
) -> None:
    a_secret = stack.cli("webhooks", "secret", check=True).stdout.strip()
    assert a_secret == stack.outputs["OMNIREEL_WEBHOOK_SECRET"]  # `omnireel local env` exports the developer's own
    door_b, b_credentials = _caller_b(stack)
    reply = door_b.request("GET", "/webhooks/secret", b"", [])
    assert reply.status == 200, reply.body
    assert reply.header("Cache-Control") == "no-store"
    b_secret = reply.json["secret"]
    assert b_secret.startswith("whsec_") and b_secret != a_secret
    assert reply.json["previous_secret"] is None and reply.json["previous_until"] is None
    assert door_b.request("GET", "/webhooks/secret", b"", []).json["secret"] == b_secret  # stable

    # B (an API caller) cannot read the master key the secrets derive from.
    import boto3

    b_aws = boto3.client(
        "secretsmanager", endpoint_url=stack.outputs["AWS_ENDPOINT_URL"], region_name=stack.outputs["AWS_REGION"],
        aws_access_key_id=b_credentials.access_key, aws_secret_access_key=b_credentials.secret_key,
    )  # fmt: skip
    with pytest.raises(ClientError) as denied:
        b_aws.get_secret_value(SecretId=stack.outputs["OMNIREEL_WEBHOOK_SIGNING_SECRET_ARN"])
    assert denied.value.response["ResponseMetadata"]["HTTPStatusCode"] in (400, 403)

    with receivers(stack, a_secret, b_secret) as (a_receiver, b_receiver):
        # Path 1: A aims a genuine delivery of A's own job at B's receiver.
        aimed = _submit(stack, "a job of A aimed at B's receiver", f"{b_receiver.url}/from-a")
        own = _submit(stack, "a job of A for A's receiver", f"{a_receiver.url}/a-own")
        reply = door_b.post_json(
            {"prompt": "a job of B for B's receiver", **SMALL_MEDIA, "webhook": f"{b_receiver.url}/b-own"}
        )
        assert reply.status == 202, reply.body

        assert a_receiver.delivery_for("/a-own") is not None, "A's receiver never verified A's own delivery"
        assert b_receiver.delivery_for("/b-own") is not None, "B's receiver never verified B's own delivery"
        assert b_receiver.refusals("/from-a", DELIVERY_TIMEOUT_S), "A's delivery never reached B's receiver"
        refused = wait_for(lambda: _delivery_state(stack, aimed).get("last_status") == 401, 30, "the 401 recorded")
        assert refused
        state = _delivery_state(stack, aimed)
        assert state["delivered_at"] is None and state["attempts"] >= 1
        assert json.loads(stack.cli("status", own, "--json", check=True).stdout)["job_id"] == own

        # Path 2: A forges a job.succeeded for a job of its own invention, signed with the secret A can read.
        forged_body = json.dumps({
            "version": 1, "event_id": str(uuid.uuid4()), "event_type": "job.succeeded", "job_id": str(uuid.uuid4()),
            "status": "succeeded", "artifacts": {"video": {"url": "https://attacker.example/video.mp4"}},
        })  # fmt: skip
        now = datetime.now(UTC)
        event_id = json.loads(forged_body)["event_id"]
        forged = {
            "webhook-id": event_id,
            "webhook-timestamp": str(int(now.timestamp())),
            "webhook-signature": Webhook(a_secret).sign(event_id, now, forged_body),
            "content-type": "application/json",
        }
        assert _post(f"{b_receiver.url}/forged", forged_body.encode(), forged) == 401
        assert b_receiver.refusals("/forged", 10)

        paths = {line["path"] for line in b_receiver.drain_accepted()}
        assert paths == {"/b-own"}, f"B's receiver accepted something that was not B's: {paths}"


def test_a_dropped_files_delivery_is_signed_with_the_unowned_secret_only_operators_read(stack: LocalStack) -> None:
    unowned = stack.cli("webhooks", "secret", "--unowned", check=True).stdout.strip()
    developer = stack.outputs["OMNIREEL_WEBHOOK_SECRET"]
    assert unowned.startswith("whsec_") and unowned != developer
    with receivers(stack, unowned, developer) as (operator_receiver, developer_receiver):
        s3 = aws_client(stack, "s3")
        for receiver, path in ((operator_receiver, "/dropped"), (developer_receiver, "/dropped-dev")):
            body = {"prompt": "a dropped prompt with a webhook", **SMALL_MEDIA, "webhook": receiver.url + path}
            key = f"prompts/e2e-unowned-{uuid.uuid4().hex[:8]}.json"
            s3.put_object(Bucket=stack.outputs["OMNIREEL_INBOX_BUCKET_NAME"], Key=key, Body=json.dumps(body).encode())
        got = operator_receiver.delivery_for("/dropped")
        assert got is not None, "the unowned secret did not verify the dropped file's delivery"
        assert got["event"]["source"].startswith("s3://") and got["signatures"] == 1
        # A caller's secret (the developer's, which is also the operator's identity here) verifies none of them.
        assert developer_receiver.refusals("/dropped-dev", DELIVERY_TIMEOUT_S)
        assert developer_receiver.drain_accepted() == []


# ---------------------------------------------------------------- rotation
QUICK_PICKUP = {"WEBHOOK_KEY_CACHE_SECONDS": "1", "WEBHOOK_PICKUP_MARGIN_SECONDS": "4"}


@pytest.fixture
def quick_key_pickup(stack: LocalStack) -> Iterator[None]:
    """The API and delivery functions keep the master key 1 s instead of 5 minutes and wait 4 s instead of 30 s beyond
    it for a rotation to reach them all (their environment, as a developer tunes a function: one host, one clock):
    a rotation takes effect after 5 s. The master key and the environments are put back afterwards."""
    lambda_ = aws_client(stack, "lambda")
    manager = aws_client(stack, "secretsmanager")
    arn = stack.outputs["OMNIREEL_WEBHOOK_SIGNING_SECRET_ARN"]
    original_key = manager.get_secret_value(SecretId=arn)["SecretString"]
    names = [
        f["FunctionName"]
        for f in lambda_.list_functions()["Functions"]
        if any(part in f["FunctionName"] for part in ("-ApiFunction", "-WebhookDeliveryFunction"))
    ]
    assert len(names) == 2, names
    originals = {name: lambda_.get_function_configuration(FunctionName=name)["Environment"] for name in names}
    for name, environment in originals.items():
        variables = {**environment["Variables"], **QUICK_PICKUP}
        lambda_.update_function_configuration(FunctionName=name, Environment={"Variables": variables})
    try:
        yield
    finally:
        manager.put_secret_value(SecretId=arn, SecretString=original_key)
        for name, environment in originals.items():  # new environments: they read the restored key
            lambda_.update_function_configuration(FunctionName=name, Environment=environment)


def _secret_view(stack: LocalStack) -> dict:
    return json.loads(stack.cli("webhooks", "secret", "--json", check=True).stdout)


def polled_secret_view(stack: LocalStack) -> dict:
    """GET /webhooks/secret in-process, what `webhooks secret --json` prints: for wait loops (a CLI process per poll
    burnt a core for the half-minute a rotation takes to be picked up); each wait ends with the CLI's own view."""
    reply = developer_door(stack.state()).request("GET", "/webhooks/secret", b"", [])
    assert reply.status == 200, reply.body
    return dict(reply.json)


def test_a_rotation_signs_with_both_keys_during_the_grace_period_then_with_the_new_one_only(
    stack: LocalStack, quick_key_pickup: None
) -> None:
    old = stack.cli("webhooks", "secret", check=True).stdout.strip()
    rotated = stack.cli("webhooks", "rotate", "--grace-hours", "24", check=True)
    assert "until" in rotated.stdout
    # the first view with the new secret (read within the 1 s key cache of the rotation) still signs with the old key
    # alone: the new key signs once every function has read it (issue 33 item 9: the key cache + the margin, 5 s here)
    first = wait_for(lambda: (v := polled_secret_view(stack))["secret"] != old and v, 30, "the new secret served")
    assert first["signing"] == ["previous_secret"] and first["secret_signs_from"], first
    view = _secret_view(stack)
    new = view["secret"]
    assert view["previous_secret"] == old
    both = ["secret", "previous_secret"]
    wait_for(lambda: polled_secret_view(stack)["signing"] == both, 60, "the new key to start signing")
    view = _secret_view(stack)
    assert view["signing"] == both, view
    until = datetime.fromisoformat(view["previous_until"])
    assert 23.9 * 3600 < (until - datetime.now(UTC)).total_seconds() <= 24 * 3600
    again = stack.cli("webhooks", "rotate")
    assert again.returncode == 2 and "grace period" in again.stderr  # the oldest key would stop at once

    with receivers(stack, old, new) as (old_receiver, new_receiver):
        _submit(stack, "delivered during the grace period (old receiver)", f"{old_receiver.url}/grace-old")
        _submit(stack, "delivered during the grace period (new receiver)", f"{new_receiver.url}/grace-new")
        for receiver, path in ((old_receiver, "/grace-old"), (new_receiver, "/grace-new")):
            got = receiver.delivery_for(path)
            assert got is not None, f"the receiver at {path} did not verify a delivery made during the grace period"
            assert got["signatures"] == 2

        assert stack.cli("webhooks", "rotate", "--end-grace", check=True).returncode == 0
        wait_for(lambda: polled_secret_view(stack)["previous_secret"] is None, 60, "the API to end the grace period")
        assert _secret_view(stack)["previous_secret"] is None
        after_old = _submit(stack, "delivered after the grace period (old receiver)", f"{old_receiver.url}/after-old")
        _submit(stack, "delivered after the grace period (new receiver)", f"{new_receiver.url}/after-new")
        got = new_receiver.delivery_for("/after-new")
        assert got is not None and got["signatures"] == 1
        assert old_receiver.refusals("/after-old", DELIVERY_TIMEOUT_S), "no delivery reached the old receiver"
        assert "/after-old" not in {line["path"] for line in old_receiver.drain_accepted()}
        wait_for(lambda: _delivery_state(stack, after_old).get("last_status") == 401, 30, "the 401 recorded")


def test_the_single_secret_of_before_signs_nothing_until_an_operator_rotates_it(
    stack: LocalStack, quick_key_pickup: None
) -> None:
    """A stack upgraded from one secret per deployment keeps that value (no "use" marker) until rotated: every caller
    has read it as whsec_<key>, so nothing is derived from it, and its rotation keeps no grace period."""
    manager = aws_client(stack, "secretsmanager")
    arn = stack.outputs["OMNIREEL_WEBHOOK_SIGNING_SECRET_ARN"]
    disclosed = uuid.uuid4().hex + uuid.uuid4().hex[:12]  # 44 characters, as GenerateSecretString made it
    manager.put_secret_value(SecretId=arn, SecretString=json.dumps({"key": disclosed}))
    # polled in-process (the CLI retries a 503 with backoff: seconds per poll), then the CLI's own answer
    door = developer_door(stack.state())
    wait_for(lambda: door.request("GET", "/webhooks/secret", b"", []).status == 503, 30, "the API to refuse")
    refused = stack.cli("webhooks", "secret")
    assert refused.returncode != 0, refused.stdout
    assert "503" in refused.stderr and "SigningKeyUnavailable" in refused.stderr, refused.stderr
    assert stack.cli("webhooks", "secret", "--unowned").returncode != 0  # operators cannot derive from it either

    rotated = stack.cli("webhooks", "rotate", "--grace-hours", "24", check=True)
    assert "no longer signs" in rotated.stdout
    stored = json.loads(manager.get_secret_value(SecretId=arn)["SecretString"])
    assert stored["use"] == "webhook-master-v1" and "previous" not in stored and stored["key"] != disclosed
    wait_for(lambda: door.request("GET", "/webhooks/secret", b"", []).status == 200, 30, "the API to serve again")
    served = _secret_view(stack)
    assert served["secret"] != f"whsec_{disclosed}" and served["previous_secret"] is None
