"""Issue 33 items 3 and 11: verifying webhook deliveries with the client.

Item 3: a rotated-out secret is trusted until its ``previous_until`` only, checked when a delivery is verified (not when
the secret was read); ``WebhookVerifier`` picks up a rotation without a restart by reading the secret again (from a
scripted ``GET /webhooks/secret`` on loopback) when a delivery matches none of its secrets, at most once per interval.
Item 11: ``verify_webhook`` says what is wrong (a malformed header, a body that is not JSON, a bad secret), not
"not a webhook secret" for all of them."""

from __future__ import annotations

import asyncio
import base64
import hmac
import json
import os
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from omnireel_client import (
    AsyncClient,
    Client,
    InvalidWebhookError,
    WebhookSecret,
    WebhookVerifier,
    verify_webhook,
)

from .conftest import CREDENTIALS

BODY = b'{"event_type": "job.succeeded", "job_id": "j-1"}'


def new_secret() -> str:
    return "whsec_" + base64.b64encode(os.urandom(32)).decode()


def delivery(body: bytes | str = BODY, *secrets: str, stamp: float | None = None, msg_id: str = "msg_1"
             ) -> dict[str, str]:  # fmt: skip
    """The headers of a delivery of ``body`` signed with each of ``secrets`` (Standard Webhooks: HMAC-SHA256 of
    ``id.timestamp.body`` over the raw bytes, so a body that is not UTF-8 can be signed too)."""
    stamp_text = str(int(time.time() if stamp is None else stamp))
    raw = body.encode() if isinstance(body, str) else body
    signed = f"{msg_id}.{stamp_text}.".encode() + raw
    keys = [base64.b64decode(s.removeprefix("whsec_")) for s in secrets]
    signatures = " ".join("v1," + base64.b64encode(hmac.new(k, signed, "sha256").digest()).decode() for k in keys)
    return {"Webhook-Id": msg_id, "Webhook-Timestamp": stamp_text, "Webhook-Signature": signatures}


# ---------------------------------------------------------------- item 3: previous_until


def test_a_previous_secret_is_not_trusted_after_its_previous_until() -> None:
    old, new = new_secret(), new_secret()
    ended = WebhookSecret(new, old, datetime.now(UTC) - timedelta(seconds=1))
    assert ended.secrets == (new,)
    with pytest.raises(InvalidWebhookError) as refused:
        verify_webhook(delivery(BODY, old), BODY, ended)  # signed with the rotated-out (maybe leaked) key only
    assert refused.value.reason == "signature"
    assert verify_webhook(delivery(BODY, new, old), BODY, ended).job_id == "j-1"  # what the stack sends in the grace


def test_a_previous_secret_without_an_end_is_not_trusted() -> None:
    old, new = new_secret(), new_secret()
    with pytest.raises(InvalidWebhookError):
        verify_webhook(delivery(BODY, old), BODY, WebhookSecret(new, old, None))


def test_the_grace_period_is_checked_at_each_verification_not_when_the_secret_was_read() -> None:
    old, new = new_secret(), new_secret()
    until = datetime.now(UTC) + timedelta(seconds=1)
    secret = WebhookSecret(new, old, until)  # read during the grace period: both secrets verify
    assert secret.secrets == (new, old)
    assert verify_webhook(delivery(BODY, old), BODY, secret).id == "msg_1"
    deadline = time.monotonic() + 5  # the clock passing previous_until (bounded), not a synchronisation
    while datetime.now(UTC) <= until and time.monotonic() < deadline:
        time.sleep(0.05)
    assert secret.secrets == (new,) and secret.secrets_at(until - timedelta(seconds=1)) == (new, old)
    with pytest.raises(InvalidWebhookError):
        verify_webhook(delivery(BODY, old), BODY, secret)  # the same WebhookSecret object, later


# ---------------------------------------------------------------- item 3: picking up a rotation


def _secret_api(script: Any, *secrets: str) -> None:
    script.answers = [(200, {"secret": s, "previous_secret": None, "previous_until": None}, {}, 0) for s in secrets]


def _reads(script: Any) -> int:
    return sum(1 for seen in script.seen if seen["path"] == "/webhooks/secret")


@pytest.mark.parametrize("flavour", ["sync", "async"])
def test_a_receiver_picks_up_a_rotation_without_a_restart(api, flavour: str) -> None:
    url, script = api
    old, new = new_secret(), new_secret()
    _secret_api(script, old, new)  # the API serves the old secret, then (rotated) the new one

    async def main() -> list[str]:
        verifier = await AsyncClient(url, "eu-west-1", CREDENTIALS).webhook_verifier(refresh_interval_s=0)
        assert verifier.secret.secret == old
        first = await verifier.verify_async(delivery(BODY, old, msg_id="before"), BODY)
        second = await verifier.verify_async(delivery(BODY, new, msg_id="after"), BODY)  # only the new key signs
        return [first.id, second.id]

    if flavour == "sync":
        verifier = Client(url, "eu-west-1", CREDENTIALS).webhook_verifier(refresh_interval_s=0)
        ids = [verifier.verify(delivery(BODY, old, msg_id="before"), BODY).id,
               verifier.verify(delivery(BODY, new, msg_id="after"), BODY).id]  # fmt: skip
    else:
        ids = asyncio.run(main())
    assert ids == ["before", "after"] and _reads(script) == 2


def test_refreshes_are_rate_limited_and_only_a_signature_mismatch_asks_for_one(api) -> None:
    url, script = api
    mine, other = new_secret(), new_secret()
    _secret_api(script, mine)
    now = [1000.0]
    client = Client(url, "eu-west-1", CREDENTIALS)
    verifier = WebhookVerifier(client.webhook_secret, client.webhook_secret(), refresh_interval_s=60,
                               clock=lambda: now[0])  # fmt: skip
    assert verifier.refresh_interval_s == 60 and _reads(script) == 1
    now[0] += 61
    for i in range(20):  # a stream of forged deliveries: one read, then none within the interval
        with pytest.raises(InvalidWebhookError) as refused:
            verifier.verify(delivery(BODY, other, msg_id=f"forged-{i}"), BODY)
        assert refused.value.reason == "signature"
    assert _reads(script) == 2 and verifier.refreshes == 1
    now[0] += 59
    with pytest.raises(InvalidWebhookError):
        verifier.verify(delivery(BODY, other), BODY)
    assert _reads(script) == 2
    now[0] += 2
    malformed = [
        {**delivery(BODY, mine), "Webhook-Signature": "garbage"},
        delivery(BODY, mine, stamp=time.time() - 3600),
        delivery(b"not json", mine),
    ]
    for headers in malformed:  # not a rotation: no read
        with pytest.raises(InvalidWebhookError) as refused:
            verifier.verify(headers, b"not json" if headers is malformed[2] else BODY)
        assert refused.value.reason in ("headers", "timestamp", "body")
    assert _reads(script) == 2
    with pytest.raises(InvalidWebhookError):
        verifier.verify(delivery(BODY, other), BODY)
    assert _reads(script) == 3


def test_a_failed_refresh_keeps_the_secret_and_refuses_the_delivery(api) -> None:
    url, script = api
    mine, rotated = new_secret(), new_secret()
    _secret_api(script, mine)
    client = Client(url, "eu-west-1", CREDENTIALS, attempts=1)
    verifier = client.webhook_verifier(refresh_interval_s=0)
    script.answers = [(503, {"error": {"code": "Unavailable", "message": "down"}}, {}, 0)]
    with pytest.raises(InvalidWebhookError):
        verifier.verify(delivery(BODY, rotated), BODY)
    assert verifier.last_refresh_error is not None and "Unavailable" in str(verifier.last_refresh_error)
    assert verifier.verify(delivery(BODY, mine), BODY).job_id == "j-1"  # the secret it had still verifies


def test_the_refresh_interval_is_a_parameter_and_cannot_be_negative() -> None:
    with pytest.raises(ValueError, match="refresh_interval_s"):
        WebhookVerifier(lambda: WebhookSecret(new_secret()), refresh_interval_s=-1)


# ---------------------------------------------------------------- item 11: what is wrong


@pytest.mark.parametrize(
    ("change", "said"),
    [
        ({"Webhook-Signature": "v1"}, "malformed webhook-signature header"),  # no comma
        ({"Webhook-Signature": "v1,!!!not-base64!!!"}, "malformed webhook-signature header"),
        ({"Webhook-Signature": "v1,abc"}, "malformed webhook-signature header"),  # base64 of a wrong length
        ({"Webhook-Signature": "v1,YWJjZA==  v1,YWJjZA=="}, "malformed webhook-signature header"),  # two spaces
        ({"Webhook-Signature": ""}, "no webhook-signature header"),
        ({"Webhook-Timestamp": "soon"}, "malformed webhook-timestamp header"),
        ({"Webhook-Timestamp": "1.5e9"}, "malformed webhook-timestamp header"),
        ({"Webhook-Id": ""}, "no webhook-id header"),
    ],
)
def test_a_malformed_header_is_named(change: dict[str, str], said: str) -> None:
    secret = new_secret()
    headers = {**delivery(BODY, secret), **change}
    with pytest.raises(InvalidWebhookError) as refused:
        verify_webhook(headers, BODY, secret)
    assert refused.value.reason == "headers" and said in str(refused.value)
    assert "not a webhook secret" not in str(refused.value)


@pytest.mark.parametrize(
    ("body", "said"),
    [
        (b"this is not json", "the signed body is not JSON"),
        (b'["an", "array"]', "the signed body is not a JSON object"),
        (b"\xff\xfe not utf-8", "the body is not JSON (not UTF-8 text)"),
        (b"[" * 100_000, "the signed body is not JSON"),
    ],
)
def test_a_body_that_is_not_a_json_object_is_named(body: bytes, said: str) -> None:
    secret = new_secret()
    with pytest.raises(InvalidWebhookError) as refused:
        verify_webhook(delivery(body, secret), body, secret)
    assert refused.value.reason == "body" and said in str(refused.value)


@pytest.mark.parametrize(
    "secret",
    ["", "whsec_", "whsec_!!!!", "not base64 at all", ["whsec_" + "A" * 43 + "=", "whsec_%%%"], []],
    ids=["empty", "prefix-only", "bad-base64", "words", "one-bad-of-two", "none"],
)
def test_a_bad_secret_is_named_and_never_shown(secret: Any) -> None:
    headers = delivery(BODY, new_secret())
    with pytest.raises(InvalidWebhookError) as refused:
        verify_webhook(headers, BODY, secret)
    assert refused.value.reason == "secret" and "bad secret" in str(refused.value)
    assert "%%%" not in str(refused.value) and "!!!!" not in str(refused.value)


def test_a_stale_delivery_and_a_forgery_are_told_apart() -> None:
    secret = new_secret()
    with pytest.raises(InvalidWebhookError) as stale:
        verify_webhook(delivery(BODY, secret, stamp=time.time() - 600), BODY, secret)
    assert stale.value.reason == "timestamp" and "more than 5 minutes" in str(stale.value)
    with pytest.raises(InvalidWebhookError) as forged:
        verify_webhook(delivery(BODY, new_secret()), BODY, secret)
    assert forged.value.reason == "signature" and "no signature matches" in str(forged.value)
    event = verify_webhook(delivery(BODY, secret), BODY.decode(), secret)  # a str body too
    assert (event.type, event.job_id, json.loads(BODY)) == ("job.succeeded", "j-1", event.data)
