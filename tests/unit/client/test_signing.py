"""The client's SigV4 signer (omnireel_client/signing.py) signs exactly as botocore's ``SigV4Auth`` for
``execute-api``: the same headers, the same ``Authorization``, on generated requests and on the edge cases of the
canonical request (dot segments, escapes, empty segments, query order, repeated and spaced header values, unsigned
headers, session tokens, a given Date header, default and other ports, IPv6 hosts, empty and binary bodies)."""

from __future__ import annotations

import random
import string
import subprocess
import sys
from datetime import UTC, datetime
from unittest import mock

import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials, RefreshableCredentials

from omnireel_client.signing import StaticCredentials, signed_headers

NOW = datetime(2026, 12, 6, 14, 52, 7, 123456, tzinfo=UTC)


def botocore_headers(method: str, url: str, body: bytes | None, headers: dict[str, str], credentials: Credentials,
                     region: str) -> dict[str, str]:  # fmt: skip
    request = AWSRequest(method=method, url=url, data=body or b"", headers=headers)
    with mock.patch("botocore.auth.get_current_datetime", return_value=NOW.replace(tzinfo=None)):
        SigV4Auth(credentials.get_frozen_credentials(), "execute-api", region).add_auth(request)
    return dict(request.headers.items())


def ours(method: str, url: str, body: bytes | None, headers: dict[str, str], credentials: Credentials,
         region: str) -> dict[str, str]:  # fmt: skip
    return signed_headers(method, url, body, headers, credentials, region, now=NOW)


KEY = Credentials("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY")
SESSION = Credentials("ASIAEXAMPLE", "secret/with+chars", "FQoGZXIvYXdzEJr//////////wEaDtoken==")

CASES = [
    ("GET", "https://abc123.execute-api.us-east-1.amazonaws.com/jobs", None, {}, KEY),
    ("POST", "https://abc123.execute-api.us-east-1.amazonaws.com/jobs", b'{"prompt":"a fox"}',
     {"Content-Type": "application/json", "Idempotency-Key": "k-1"}, SESSION),
    ("GET", "http://127.0.0.1:4711/jobs?limit=10&next=abc%3D%3D&caller=x", None, {"Accept": "application/json"}, KEY),
    ("GET", "http://127.0.0.1:80/jobs?b=2&a=1&a=0&c", None, {}, KEY),
    ("GET", "https://host.example:443/a/./b/../c//d/", None, {}, KEY),
    ("GET", "https://host.example:8443/jobs/%E2%9C%93/ä ö~x", None, {}, KEY),
    ("DELETE", "http://[::1]:4711/jobs/7ae1a9d2", None, {"X-Custom": "  spaced   out\tvalue  "}, SESSION),
    ("PUT", "http://localhost:4711/", b"\x00\xff" * 100, {"User-Agent": "ua", "Expect": "100-continue",
     "Connection": "keep-alive", "X-Amzn-Trace-Id": "Root=1", "traceparent": "00-1"}, KEY),
    ("GET", "http://localhost:4711", None, {"Date": "Mon, 01 Jan 2024 00:00:00 GMT"}, KEY),
    ("GET", "http://localhost:4711/x", None, {"Authorization": "stale", "X-Amz-Date": "20000101T000000Z",
     "X-Amz-Security-Token": "stale"}, SESSION),
    ("get", "http://User:pw@LOCALHOST:4711/x/..", b"", {"host": "given.example"}, KEY),
]  # fmt: skip


@pytest.mark.parametrize("case", CASES, ids=range(len(CASES)))
def test_the_edge_cases_sign_as_botocore_does(case: tuple) -> None:
    assert ours(*case, "us-east-1") == botocore_headers(*case, "us-east-1")


def test_generated_requests_sign_as_botocore_does() -> None:
    rng = random.Random(35)
    alphabet = string.ascii_letters + string.digits + "-._~%/+=&?:@!$'()*,; äö✓"
    for n in range(400):
        path = "/" + "".join(rng.choice(alphabet.replace("?", "").replace("&", "")) for _ in range(rng.randrange(30)))
        query = "&".join(
            "".join(rng.choice(string.ascii_letters + "%2B=") for _ in range(rng.randrange(1, 8)))
            for _ in range(rng.randrange(4))
        )
        url = f"http://127.0.0.1:{rng.choice([80, 4711])}{path}" + (f"?{query}" if query else "")
        headers = {
            f"X-H{rng.randrange(5)}": " ".join(rng.choice(["a", "b c", "\t", "  d"]) for _ in range(rng.randrange(4)))
            for _ in range(rng.randrange(4))
        }
        body = bytes(rng.randrange(256) for _ in range(rng.randrange(64))) if n % 2 else None
        credentials = SESSION if n % 3 == 0 else KEY
        method = rng.choice(["GET", "POST", "DELETE", "PUT"])
        region = rng.choice(["us-east-1", "eu-west-3"])
        assert ours(method, url, body, headers, credentials, region) == botocore_headers(
            method, url, body, headers, credentials, region
        ), url


def test_static_and_refreshable_credentials_sign_alike() -> None:
    static = StaticCredentials("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY")
    refreshable = RefreshableCredentials.create_from_metadata(
        {"access_key": KEY.access_key, "secret_key": KEY.secret_key, "token": None,
         "expiry_time": "2999-01-01T00:00:00Z"},
        refresh_using=lambda: {}, method="test",
    )  # fmt: skip
    url = "http://127.0.0.1:4711/jobs"
    expected = botocore_headers("GET", url, None, {}, KEY, "us-east-1")
    assert ours("GET", url, None, {}, static, "us-east-1") == expected  # type: ignore[arg-type]
    assert ours("GET", url, None, {}, refreshable, "us-east-1") == expected


def test_the_signature_depends_on_every_signed_part() -> None:
    base = ours("POST", "http://127.0.0.1:4711/jobs?a=1", b"{}", {"X-A": "1"}, KEY, "us-east-1")
    for changed in [
        ours("PUT", "http://127.0.0.1:4711/jobs?a=1", b"{}", {"X-A": "1"}, KEY, "us-east-1"),
        ours("POST", "http://127.0.0.1:4711/job?a=1", b"{}", {"X-A": "1"}, KEY, "us-east-1"),
        ours("POST", "http://127.0.0.1:4711/jobs?a=2", b"{}", {"X-A": "1"}, KEY, "us-east-1"),
        ours("POST", "http://127.0.0.1:4712/jobs?a=1", b"{}", {"X-A": "1"}, KEY, "us-east-1"),
        ours("POST", "http://127.0.0.1:4711/jobs?a=1", b"[]", {"X-A": "1"}, KEY, "us-east-1"),
        ours("POST", "http://127.0.0.1:4711/jobs?a=1", b"{}", {"X-A": "2"}, KEY, "us-east-1"),
        ours("POST", "http://127.0.0.1:4711/jobs?a=1", b"{}", {"X-A": "1"}, SESSION, "us-east-1"),
        ours("POST", "http://127.0.0.1:4711/jobs?a=1", b"{}", {"X-A": "1"}, KEY, "us-west-2"),
    ]:
        assert changed["Authorization"] != base["Authorization"]


def test_the_client_signs_without_importing_botocore() -> None:
    code = (
        "import sys, omnireel_client\n"
        "from omnireel_client.signing import StaticCredentials, signed_headers\n"
        "signed_headers('GET', 'http://127.0.0.1:4711/jobs', None, {}, StaticCredentials('a', 'b'), 'us-east-1')\n"
        "print(sorted(m for m in ('botocore', 'asyncio', 'standardwebhooks', 'yaml') if m in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.strip() == "[]"
