"""Signed webhooks: the Standard Webhooks signature (the spec's published vector), the SSRF checks with a stubbed
resolver (no packet is ever sent), one delivery attempt and the retry schedule."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime

import pytest

from omnireel.events.job_events import sns_message_attributes
from omnireel.jobs.request import parse_job_request
from omnireel.webhooks.delivery import (
    MAX_DELAY_S,
    RECEIVE_TO_INVOKE_MARGIN_S,
    SAFETY_MARGIN_S,
    AttemptResult,
    retry_delay_s,
    retry_span_s,
    signed_headers,
)
from omnireel.webhooks.dispatch import QueuedEvent, deliver
from omnireel.webhooks.target import WebhookRefused, WebhookUnresolved, resolve_target

# The test vector the Standard Webhooks reference libraries publish (libraries/*/tests: "test_sign_function").
VECTOR_SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
VECTOR_ID = "msg_p5jXN8AQM9LWM0D4loKWxJek"
VECTOR_TIMESTAMP = 1614265330
VECTOR_BODY = '{"test": 2432232314}'
VECTOR_SIGNATURE = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="


def test_the_signature_matches_the_published_test_vector() -> None:
    headers = signed_headers(VECTOR_SECRET, VECTOR_ID, VECTOR_BODY, datetime.fromtimestamp(VECTOR_TIMESTAMP, UTC))
    assert headers["webhook-signature"] == VECTOR_SIGNATURE
    assert headers["webhook-id"] == VECTOR_ID
    assert headers["webhook-timestamp"] == str(VECTOR_TIMESTAMP)


def test_the_signature_is_the_spec_algorithm_computed_by_hand() -> None:
    import base64
    import hashlib
    import hmac

    key = base64.b64decode(VECTOR_SECRET.removeprefix("whsec_"))
    digest = hmac.new(key, f"{VECTOR_ID}.{VECTOR_TIMESTAMP}.{VECTOR_BODY}".encode(), hashlib.sha256).digest()
    assert "v1," + base64.b64encode(digest).decode() == VECTOR_SIGNATURE


def _resolver(*addresses: str):  # type: ignore[no-untyped-def]
    calls: list[tuple[str, int]] = []

    def resolve(host: str, port: int) -> list[str]:
        calls.append((host, port))
        return list(addresses)

    resolve.calls = calls  # type: ignore[attr-defined]
    return resolve


@pytest.mark.parametrize(
    ("address", "why"),
    [
        ("10.1.2.3", "private"),
        ("172.16.0.1", "private"),
        ("192.168.0.10", "private"),
        ("127.0.0.1", "loopback"),
        ("169.254.169.254", "link-local"),
        ("fe80::1", "link-local"),
        ("fd00:ec2::254", "link-local"),
        ("::ffff:10.0.0.1", "private"),
        ("::1", "loopback"),
        ("100.64.0.1", "not a public address"),
        ("0.0.0.0", "private"),
        ("224.0.0.1", "not a public address"),
    ],
)
def test_hosts_resolving_to_internal_addresses_are_refused(address: str, why: str) -> None:
    with pytest.raises(WebhookRefused, match=why):
        resolve_target("https://hooks.example.com/x", allow_loopback_http=False, resolve=_resolver(address))


def test_one_internal_address_among_public_ones_is_enough_to_refuse() -> None:
    with pytest.raises(WebhookRefused, match="private"):
        resolve_target(
            "https://h.example.com/", allow_loopback_http=False, resolve=_resolver("93.184.215.14", "10.0.0.1")
        )


def test_a_public_host_resolves_to_the_address_a_delivery_connects_to() -> None:
    resolve = _resolver("93.184.215.14")
    target = resolve_target("https://hooks.example.com:8443/in?x=1", allow_loopback_http=False, resolve=resolve)
    assert (target.host, target.port, target.target, target.address) == (
        "hooks.example.com",
        8443,
        "/in?x=1",
        "93.184.215.14",
    )
    assert resolve.calls == [("hooks.example.com", 8443)]


def test_http_is_refused_unless_the_deployment_allows_loopback_http() -> None:
    with pytest.raises(WebhookRefused, match="https://"):
        resolve_target("http://93.184.215.14/", allow_loopback_http=True, resolve=_resolver("93.184.215.14"))
    with pytest.raises(WebhookRefused, match="https://"):
        resolve_target("http://127.0.0.1:9000/", allow_loopback_http=False, resolve=_resolver())
    local = resolve_target("http://127.0.0.1:9000/h", allow_loopback_http=True, resolve=_resolver())
    assert (local.address, local.port) == ("127.0.0.1", 9000)


def test_an_unresolvable_host_is_refused_as_unresolved() -> None:
    def fails(host: str, port: int) -> list[str]:
        raise OSError("no such host")

    with pytest.raises(WebhookUnresolved, match="does not resolve"):  # a WebhookRefused: a 400 at submit
        resolve_target("https://nowhere.invalid/", allow_loopback_http=False, resolve=fails)


@pytest.mark.parametrize(
    ("url", "fragment"),
    [
        ("ftp://example.com/", "https://"),
        ("https://user:pw@example.com/", "credentials"),
        ("https://example.com/#frag", "fragment"),
        ("https://exa mple.com/", "printable ASCII"),
        ("https:///nohost", "with a host"),
        ("https://example.com:0/", "invalid port"),
        ("/relative", "with a host"),
    ],
)
def test_webhook_urls_are_checked_when_the_request_is_parsed(url: str, fragment: str) -> None:
    from omnireel.core.errors import InvalidRequest

    with pytest.raises(InvalidRequest, match=fragment):
        parse_job_request({"prompt": "p", "webhook": url})


def _job_event(event_type: str = "job.succeeded", **request: object) -> object:
    from omnireel.events.job_events import EventArtifacts, EventTimings, JobEvent

    return JobEvent(
        event_id="e-1",
        event_type=event_type,
        occurred_at="2026-12-01T00:00:00.000Z",
        job_id="00000000-0000-4000-8000-000000000001",
        status=event_type.split(".")[1],
        prompt="p",
        request=parse_job_request({"prompt": "p", **request}),
        source="api",
        artifacts=EventArtifacts(),
        timings=EventTimings(),
    )


def test_only_the_event_types_a_webhook_asked_for_carry_the_webhook_attribute() -> None:
    plain = sns_message_attributes(_job_event())
    assert "webhook" not in plain
    default = sns_message_attributes(_job_event(webhook="https://h.example.com/"))
    assert default["webhook"] == {"DataType": "String", "StringValue": "https://h.example.com/"}
    chosen = {"webhook": "https://h.example.com/", "webhook_events": ["job.failed"]}
    assert "webhook" not in sns_message_attributes(_job_event(**chosen))
    assert "webhook" in sns_message_attributes(_job_event("job.failed", **chosen))


def test_a_webhook_may_name_the_admission_events() -> None:
    """Issue 34: job.queued (progress, only when named) and job.expired (terminal, in the default set) can be named;
    a list that names them routes them to the webhook, a list without job.expired does not."""
    chosen = {"webhook": "https://h.example.com/", "webhook_events": ["job.queued", "job.expired"]}
    assert "webhook" in sns_message_attributes(_job_event("job.expired", **chosen))
    assert parse_job_request({"prompt": "p", **chosen}).webhook_wants("job.queued")
    assert not parse_job_request({"prompt": "p", "webhook": "https://h.example.com/"}).webhook_wants("job.queued")
    assert parse_job_request({"prompt": "p", "webhook": "https://h.example.com/"}).webhook_wants("job.expired")
    terminal_only = {"webhook": "https://h.example.com/", "webhook_events": ["job.succeeded", "job.failed"]}
    assert "webhook" not in sns_message_attributes(_job_event("job.expired", **terminal_only))


def _queued(url: str = "https://hooks.example.com/in"):  # type: ignore[no-untyped-def]
    body = json.dumps({"event_id": "ev-1", "event_type": "job.succeeded", "job_id": "j-1"})
    return QueuedEvent(url, body, "ev-1", "job.succeeded", "j-1")  # as rebuilt from the job's record (issue 33)


class _Jobs:
    def __init__(self) -> None:
        self.recorded: list[tuple[str, str, dict]] = []

    def record_webhook_attempt(self, job_id: str, event_type: str, state: dict) -> None:
        self.recorded.append((job_id, event_type, state))


def _now() -> datetime:
    return datetime(2026, 12, 1, tzinfo=UTC)


def _deadline(seconds: float = 10) -> float:
    return time.monotonic() + seconds


def test_a_host_that_resolves_inside_at_delivery_is_refused_without_a_connection() -> None:
    """Submitted while it resolved publicly; at delivery it resolves to the metadata address (DNS rebinding)."""
    sent: list[object] = []
    jobs = _Jobs()
    delivery = deliver(
        _queued(), 1, secret=VECTOR_SECRET, allow_loopback_http=False, jobs=jobs, now=_now,  # type: ignore[arg-type]
        resolve=_resolver("169.254.169.254"), send=lambda *a, **k: sent.append(a), deadline=_deadline(),
    )  # fmt: skip
    assert sent == [] and delivery.retry is False
    ((job_id, event_type, state),) = jobs.recorded
    assert (job_id, event_type, state["refused"], state["attempts"]) == ("j-1", "job.succeeded", True, 1)
    assert "link-local" in state["last_error"]


def test_a_delivery_is_signed_sent_to_the_checked_address_and_recorded() -> None:
    seen: dict = {}

    def send(target, body, headers, **timeouts):  # type: ignore[no-untyped-def]
        seen.update(target=target, body=body, headers=headers, timeouts=timeouts)
        return AttemptResult(204)

    jobs = _Jobs()
    queued = _queued()
    deadline = _deadline()
    delivery = deliver(
        queued, 3, secret=VECTOR_SECRET, allow_loopback_http=False, jobs=jobs, now=_now,  # type: ignore[arg-type]
        resolve=_resolver("93.184.215.14"), send=send, connect_timeout_s=2, deadline=deadline,
    )  # fmt: skip
    assert delivery.retry is False and delivery.result.delivered
    assert seen["target"].address == "93.184.215.14" and seen["body"] == queued.body.encode()
    assert seen["timeouts"] == {"connect_timeout_s": 2, "deadline": deadline}
    from standardwebhooks.webhooks import Webhook

    now = datetime.now(UTC)  # verify as a consumer would: the same library, a fresh timestamp
    fresh = signed_headers(VECTOR_SECRET, queued.event_id, queued.body, now)
    assert Webhook(VECTOR_SECRET).verify(queued.body, fresh)["event_id"] == "ev-1"
    assert seen["headers"]["webhook-id"] == "ev-1"
    assert jobs.recorded[0][2]["attempts"] == 3 and jobs.recorded[0][2]["delivered_at"]


@pytest.mark.parametrize("status", [None, 301, 404, 500])
def test_anything_but_a_2xx_is_retried(status: int | None) -> None:
    delivery = deliver(
        _queued(), 1, secret=VECTOR_SECRET, allow_loopback_http=False, jobs=None, now=_now,
        resolve=_resolver("93.184.215.14"), send=lambda *a, **k: AttemptResult(status, "no"), deadline=_deadline(),
    )  # fmt: skip
    assert delivery.retry is True


def test_the_backoff_doubles_is_capped_within_sqs_12_hours_and_lasts_over_a_day() -> None:
    assert [retry_delay_s(n, 30) for n in (1, 2, 3)] == [30, 60, 120]
    # 12 h from the receive, minus the receive-to-invoke margin and a safety margin; minus the invocation's age
    assert retry_delay_s(40, 30) == MAX_DELAY_S == 43200 - RECEIVE_TO_INVOKE_MARGIN_S - SAFETY_MARGIN_S
    assert retry_delay_s(12, 30, invoked_s_ago=25.4) == MAX_DELAY_S - 26  # the age rounded up
    assert [retry_delay_s(n, 30) for n in (11, 12, 13)] == [30720, MAX_DELAY_S, MAX_DELAY_S]
    assert retry_span_s(30, 13) >= 86400  # the template's maxReceiveCount 13 with the default base
    assert retry_span_s(30, 12) < 86400  # one attempt fewer would not reach a day


def test_a_post_to_a_closed_port_fails_fast_and_follows_no_redirect() -> None:
    """A real socket on loopback: a refused connection is a failed attempt, not an exception."""
    from omnireel.webhooks.delivery import post
    from omnireel.webhooks.target import WebhookTarget
    from omnireel_local.home import free_port

    result = post(
        WebhookTarget("http", "127.0.0.1", free_port(), "/", "127.0.0.1"), b"{}", {},
        connect_timeout_s=1, deadline=_deadline(1),
    )  # fmt: skip
    assert result.status is None and "connect" in (result.detail or "") and result.outcome == "unreachable"
