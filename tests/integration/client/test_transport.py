"""The client's transport against a scripted API on loopback (hostile answers, not only polite ones): which failures
it retries, that a retried submit carries the same Idempotency-Key (so the API makes one job), that every attempt is
signed afresh, and that errors carry the API's code and problems."""

from __future__ import annotations

import json
import ssl
from typing import Any

import pytest

from omnireel_client import (
    Client,
    ForbiddenError,
    InvalidRequestError,
    NotFoundError,
    ServerError,
    TransportError,
)
from tests.support.relay.tls_cert import self_signed_cert

from .conftest import ACCEPTED, CREDENTIALS, Script, serve


def _client(url: str, **options: Any) -> Client:
    client = Client(url, "eu-west-1", CREDENTIALS, **options)
    client.transport.backoff_s = 0.01  # the schedule's shape is the same; the test does not wait for it
    return client


def test_a_submit_retried_after_503_and_a_timeout_carries_one_key_and_fresh_signatures(api) -> None:
    url, script = api
    script.answers = [
        (503, {"error": {"code": "PublishFailed", "message": "try again"}}, {"Retry-After": "0"}, 0),
        (200, {}, {}, 1.5),  # answered after the client's timeout: the client gives up on it and retries
        (202, ACCEPTED, {}, 0),
    ]
    job = _client(url, timeout=0.5).submit("p", seed=1)
    assert job.job_id == ACCEPTED["job_id"]
    keys = {seen["headers"]["Idempotency-Key"] for seen in script.seen}
    assert len(script.seen) == 3 and keys == {job.idempotency_key}
    assert all(seen["headers"]["Authorization"].startswith("AWS4-HMAC-SHA256 ") for seen in script.seen)
    assert "/eu-west-1/execute-api/aws4_request" in script.seen[0]["headers"]["Authorization"]
    assert json.loads(script.seen[0]["body"]) == {"prompt": "p", "seed": 1}


def test_a_refusal_is_not_retried_and_lists_every_problem(api) -> None:
    url, script = api
    problems = [{"field": "prompt", "message": "String should have at least 1 character"},
                {"field": "video.num_frames", "message": "must be 4k+1"}]  # fmt: skip
    script.answers = [(400, {"error": {"code": "InvalidRequest", "message": "...", "problems": problems}}, {}, 0)]
    with pytest.raises(InvalidRequestError) as refused:
        _client(url).submit("")
    assert len(script.seen) == 1
    assert [(p.field, p.message) for p in refused.value.problems] == [(p["field"], p["message"]) for p in problems]
    assert "video.num_frames: must be 4k+1" in str(refused.value)


@pytest.mark.parametrize(
    ("status", "body", "kind"),
    [
        (403, {"message": "The security token included in the request is invalid."}, ForbiddenError),
        (404, {"error": {"code": "JobNotFound", "message": "no job"}}, NotFoundError),
        (500, "not json at all", ServerError),
    ],
)
def test_errors_are_typed(api, status: int, body: Any, kind: type) -> None:
    url, script = api
    script.answers = [(status, body, {}, 0)]
    with pytest.raises(kind) as raised:
        _client(url, attempts=2).job("00000000-0000-4000-8000-000000000001")
    assert raised.value.status == status
    assert len(script.seen) == 1  # 403/404/500 are answers, not transient failures


def test_a_get_gives_up_after_its_attempts(api) -> None:
    url, script = api
    script.answers = [(503, {"error": {"code": "Unavailable", "message": "busy"}}, {}, 0)]
    with pytest.raises(ServerError) as raised:
        _client(url, attempts=3).job("00000000-0000-4000-8000-000000000001")
    assert raised.value.code == "Unavailable" and len(script.seen) == 3


def test_an_unreachable_api_is_a_transport_error() -> None:
    # Port 9 (discard) on loopback: refused, no packet leaves the machine.
    with pytest.raises(TransportError, match="unreachable"):
        _client("http://127.0.0.1:9", attempts=2).job("00000000-0000-4000-8000-000000000001")


def test_an_unsafe_request_without_a_key_is_never_repeated(api) -> None:
    url, script = api
    script.answers = [(503, {"error": {"code": "Busy", "message": "busy"}}, {}, 0), (200, {}, {}, 0)]
    reply = _client(url).transport.exchange("POST", "/jobs", {"prompt": "p"})
    assert reply.status == 503 and len(script.seen) == 1


def test_for_stack_reads_the_api_url_output_and_signs_with_the_standard_chain(api) -> None:
    import boto3
    import botocore.session
    from moto import mock_aws

    url, script = api
    script.answers = [(202, ACCEPTED, {}, 0)]
    template = {"Resources": {"Topic": {"Type": "AWS::SNS::Topic"}}, "Outputs": {"ApiUrl": {"Value": url}}}
    with mock_aws():
        boto3.client("cloudformation", region_name="eu-west-1").create_stack(
            StackName="prod", TemplateBody=json.dumps(template)
        )
        client = Client.for_stack("prod", "eu-west-1")
        chain = botocore.session.Session().get_credentials().access_key  # what the standard chain finds here
    assert client.api_url == url and client.outputs["ApiUrl"] == url
    client.submit("p")
    assert f"Credential={chain}/" in script.seen[-1]["headers"]["Authorization"]


def test_for_stack_without_the_output_or_the_stack_is_a_clear_error(monkeypatch) -> None:
    import boto3
    from moto import mock_aws

    from omnireel_client import CredentialsError

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDSTANDARDCHAIN")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret")
    with mock_aws():
        boto3.client("cloudformation", region_name="eu-west-1").create_stack(
            StackName="bare", TemplateBody=json.dumps({"Resources": {"Topic": {"Type": "AWS::SNS::Topic"}}})
        )
        with pytest.raises(CredentialsError, match="no ApiUrl output"):
            Client.for_stack("bare", "eu-west-1")
        with pytest.raises(CredentialsError, match="cannot read stack missing"):
            Client.for_stack("missing", "eu-west-1")


# ---------------------------------------------------------------- issue 34 item 5: 429 TooManyPendingJobs
TOO_MANY = {"error": {"code": "TooManyPendingJobs", "message": "2 of this caller's jobs are accepted and not finished"}}
LIMITED = {"RateLimit-Policy": '"pending";q=2;qu="concurrent-requests"', "RateLimit": '"pending";r=0'}


def test_a_submit_over_the_callers_limit_waits_the_retry_after_it_is_told_then_succeeds(api, monkeypatch) -> None:
    """The API's 429 asks for 30 s: the client waits that long (not its 10 s cap for 5xx), once per refusal, with the
    same Idempotency-Key, and the submit succeeds when a place is free."""
    from omnireel_client import transport

    url, script = api
    script.answers = [(429, TOO_MANY, {"Retry-After": "30", **LIMITED}, 0), (202, ACCEPTED, {}, 0)]
    pauses: list[float] = []
    monkeypatch.setattr(transport.time, "sleep", pauses.append)
    job = _client(url).submit("p")
    assert job.job_id == ACCEPTED["job_id"]
    assert len(script.seen) == 2 and len({s["headers"]["Idempotency-Key"] for s in script.seen}) == 1
    pauses = [p for p in pauses if p]  # the scripted server's own sleep(0) goes through the same module
    assert len(pauses) == 1 and 30 <= pauses[0] <= transport.MAX_RATE_LIMIT_WAIT_S


def test_a_429_is_bounded_and_then_a_typed_error_with_its_retry_after(api, monkeypatch) -> None:
    """A hostile Retry-After (a day) is capped; after the client's attempts the refusal is a RateLimitedError."""
    from omnireel_client import RateLimitedError, transport

    url, script = api
    script.answers = [(429, TOO_MANY, {"Retry-After": "86400", **LIMITED}, 0)]
    pauses: list[float] = []
    monkeypatch.setattr(transport.time, "sleep", pauses.append)
    with pytest.raises(RateLimitedError) as caught:
        _client(url).submit("p")
    assert caught.value.status == 429 and caught.value.code == "TooManyPendingJobs"
    assert caught.value.retry_after_s == 86400
    assert len(script.seen) == 4 and [p for p in pauses if p] == [transport.MAX_RATE_LIMIT_WAIT_S] * 3


def test_a_client_of_a_plain_http_api_never_loads_the_ca_certificates(api, monkeypatch) -> None:
    # Loading the system's CA certificates costs ~40 ms of CPU; urllib's HTTPS handler did it whenever a client was
    # built (each CLI command), whatever the API's scheme.
    def refuse(*_: Any, **__: Any) -> None:
        raise AssertionError("the CA certificates were loaded for a plain http API")

    monkeypatch.setattr(ssl.SSLContext, "load_default_certs", refuse)
    monkeypatch.setattr(ssl.SSLContext, "load_verify_locations", refuse)
    url, script = api
    script.answers = [(202, ACCEPTED, {}, 0)]
    assert _client(url).submit("p").job_id == ACCEPTED["job_id"]


@pytest.fixture
def tls_api(tmp_path) -> Any:
    cert, key, _ = self_signed_cert(tmp_path)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    script = Script(answers=[(202, ACCEPTED, {}, 0)])
    server = serve(script, tls=context)
    try:
        yield script.url, script, cert
    finally:
        server.shutdown()
        server.server_close()


def test_an_https_api_is_verified_against_the_systems_certificates(tls_api, monkeypatch) -> None:
    # The TLS context is made at the first https request, and it is urllib's default: a certificate nobody trusts is
    # refused, one in the trusted set (SSL_CERT_FILE, read when the context is made) is accepted.
    url, script, cert = tls_api
    with pytest.raises(TransportError, match="CERTIFICATE_VERIFY_FAILED"):
        _client(url, attempts=1).submit("p")
    assert script.seen == []
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))
    assert _client(url).submit("p").job_id == ACCEPTED["job_id"]
    assert len(script.seen) == 1
