"""Issue 33 item 4: answers that are not the API's, from a scripted server on loopback, through ``Client`` and its
asyncio twin ``AsyncClient``. Every failure is an ``OmnireelClientError``; a redirect is never followed (the request
would carry its signature and Idempotency-Key to the other host); a broken exchange of a request that is safe to
repeat (an Idempotency-Key) is retried with the same key, as a 503 or a timeout is."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from omnireel_client import (
    AsyncClient,
    Client,
    OmnireelClientError,
    RedirectError,
    TransportError,
    UnexpectedResponseError,
)

from .conftest import ACCEPTED, CREDENTIALS, Raw

JOB_ID = ACCEPTED["job_id"]
FLAVOURS = ("sync", "async")
BAD_STATUS_LINE = Raw(b"ICY 200 OK\r\nContent-Type: application/json\r\n\r\n{}")
# Content-Length says 400 bytes; 12 are sent, then the connection closes.
TRUNCATED = Raw(b'HTTP/1.1 202 Accepted\r\nContent-Type: application/json\r\nContent-Length: 400\r\n\r\n{"job_id": "')


def _client(url: str, flavour: str, **options: Any) -> Client | AsyncClient:
    options = {"timeout": 5.0, **options}
    client: Client | AsyncClient = (
        Client(url, "eu-west-1", CREDENTIALS, **options)
        if flavour == "sync"
        else AsyncClient(url, "eu-west-1", CREDENTIALS, **options)
    )
    sync = client if isinstance(client, Client) else client._sync
    sync.transport.backoff_s = 0.01  # the schedule's shape is the same; the test does not wait for it
    return client


def _call(client: Client | AsyncClient, name: str, *args: Any, **kwargs: Any) -> Any:
    """``client.name(*args)``, awaited for the asyncio twin."""
    result = getattr(client, name)(*args, **kwargs)
    return asyncio.run(result) if isinstance(client, AsyncClient) else result


@pytest.mark.parametrize("flavour", FLAVOURS)
@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
def test_a_redirect_is_an_error_and_nothing_reaches_its_target(api, elsewhere, flavour: str, status: int) -> None:
    url, script = api
    target, redirected = elsewhere
    redirected.answers = [(202, ACCEPTED, {}, 0)]
    script.answers = [(status, {"moved": True}, {"Location": f"{target}/jobs"}, 0)]
    with pytest.raises(RedirectError) as raised:
        _call(_client(url, flavour), "submit", "a prompt", idempotency_key="key-1")
    assert (raised.value.status, raised.value.location) == (status, f"{target}/jobs")
    assert isinstance(raised.value, OmnireelClientError) and f"{target}/jobs" in str(raised.value)
    assert len(script.seen) == 1  # an answer, not a transient failure: not repeated
    assert redirected.seen == []  # neither Authorization nor the Idempotency-Key went to the other port


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_a_redirect_of_a_read_is_not_followed_either(api, elsewhere, flavour: str) -> None:
    url, script = api
    target, redirected = elsewhere
    redirected.answers = [(200, {"job_id": JOB_ID, "status": "succeeded"}, {}, 0)]
    script.answers = [(302, b"", {"location": f"{target}/jobs/{JOB_ID}"}, 0)]  # a lower-case header name too
    with pytest.raises(RedirectError) as raised:
        _call(_client(url, flavour), "job", JOB_ID)
    assert raised.value.location == f"{target}/jobs/{JOB_ID}" and redirected.seen == []


@pytest.mark.parametrize("flavour", FLAVOURS)
@pytest.mark.parametrize(
    ("status", "body", "content_type", "said"),
    [
        (202, b"<html><body>Welcome to the hotel wifi</body></html>", "text/html", "not JSON (text/html"),
        (202, b"", "application/json", "an empty body"),
        (202, b"[1, 2, 3]", "application/json", "a JSON array"),
        (202, b'{"status": "accepted"}', "application/json", "KeyError"),  # no job_id
        (202, b'{"job_id": ["not", "an", "id"]}', "application/json", "job_id is not a text"),
        (202, b"[" * 100_000, "application/json", "not JSON"),  # deeper than the JSON parser goes
    ],
    ids=["html", "empty", "array", "no-job-id", "job-id-a-list", "deep-nesting"],
)
def test_a_submit_answered_with_something_else_than_the_apis_object(
    api, flavour: str, status: int, body: bytes, content_type: str, said: str
) -> None:
    url, script = api
    script.answers = [(status, body, {"Content-Type": content_type}, 0)]
    with pytest.raises(UnexpectedResponseError) as raised:
        _call(_client(url, flavour), "submit", "a prompt")
    assert raised.value.status == status and said in str(raised.value)
    assert len(script.seen) == 1


@pytest.mark.parametrize("flavour", FLAVOURS)
@pytest.mark.parametrize(
    ("call", "body"),
    [
        ("job", b"<html>login</html>"),
        ("job", b'{"job_id": "x", "stage_times": ["a list"]}'),
        ("job", b'{"job_id": "x", "artifacts": {"video": "a text"}}'),
        ("jobs_page", b'{"jobs": [1, 2]}'),
        ("jobs_page", b'{"jobs": [], "next_cursor": 7}'),
        ("batch", b'{"batch_id": "b", "counts": {"total": "many"}}'),
        ("webhook_secret", b"[]"),
        ("webhook_secret", b'{"previous_secret": "whsec_x"}'),
        ("cancel", b"null"),
    ],
)
def test_a_read_answered_200_with_the_wrong_shape(api, flavour: str, call: str, body: bytes) -> None:
    url, script = api
    script.answers = [(200, body, {}, 0)]
    args = {"job": (JOB_ID,), "batch": (JOB_ID,), "cancel": (JOB_ID,)}.get(call, ())
    with pytest.raises(UnexpectedResponseError) as raised:
        _call(_client(url, flavour), call, *args)
    assert raised.value.status == 200


@pytest.mark.parametrize("flavour", FLAVOURS)
@pytest.mark.parametrize("broken", [BAD_STATUS_LINE, TRUNCATED], ids=["bad-status-line", "truncated-body"])
def test_a_broken_answer_to_a_keyed_submit_is_retried_with_the_same_key(api, flavour: str, broken: Raw) -> None:
    url, script = api
    script.answers = [broken, broken, (202, ACCEPTED, {}, 0)]
    job = _call(_client(url, flavour), "submit", "a prompt", idempotency_key="key-7")
    assert job.job_id == JOB_ID and len(script.seen) == 3
    assert {seen["headers"]["Idempotency-Key"] for seen in script.seen} == {"key-7"}


@pytest.mark.parametrize("flavour", FLAVOURS)
@pytest.mark.parametrize("broken", [BAD_STATUS_LINE, TRUNCATED], ids=["bad-status-line", "truncated-body"])
def test_a_broken_answer_after_every_attempt_is_a_transport_error(api, flavour: str, broken: Raw) -> None:
    url, script = api
    script.answers = [broken]
    with pytest.raises(TransportError) as raised:
        _call(_client(url, flavour, attempts=3), "submit", "a prompt")
    assert len(script.seen) == 3 and url in str(raised.value)
    with pytest.raises(TransportError):
        _call(_client(url, flavour, attempts=2), "job", JOB_ID)  # a read is retried too
    assert len(script.seen) == 5


@pytest.mark.parametrize("broken", [BAD_STATUS_LINE, TRUNCATED], ids=["bad-status-line", "truncated-body"])
def test_a_broken_answer_to_a_request_without_a_key_is_not_repeated(api, broken: Raw) -> None:
    url, script = api
    script.answers = [broken, (202, ACCEPTED, {}, 0)]
    client = _client(url, "sync")
    assert isinstance(client, Client)
    with pytest.raises(TransportError):
        client.transport.exchange("POST", "/jobs", {"prompt": "p"})
    assert len(script.seen) == 1


def test_a_retry_after_that_is_not_ascii_digits_is_ignored(api) -> None:
    url, script = api
    busy = {"error": {"code": "Busy", "message": "busy"}}
    script.answers = [(503, busy, {"Retry-After": "\u00b2"}, 0), (202, ACCEPTED, {}, 0)]  # "²".isdigit() is True
    assert _call(_client(url, "sync"), "submit", "p").job_id == JOB_ID


def test_a_download_cut_short_is_a_transport_error_and_leaves_no_file(api, tmp_path) -> None:
    from omnireel_client.client import download_to

    url, script = api
    script.answers = [Raw(b"HTTP/1.1 200 OK\r\nContent-Type: video/mp4\r\nContent-Length: 1000\r\n\r\nftyp")]
    with pytest.raises(TransportError):
        download_to(f"{url}/video.mp4", tmp_path / "video.mp4")
    assert list(tmp_path.iterdir()) == []
