"""The local front door answers like API Gateway (HTTP API, payload format 2.0, AWS_IAM) -- through real HTTP.

Defect 9 (framing, size, encoding, repeated headers) and defect 7 (caller identity from the SigV4 access key), each
checked on the wire against the running local stack. Nothing refused at the door may start an execution.
"""

from __future__ import annotations

import hashlib
import json
import socket
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any
from unittest import mock
from urllib.parse import urlsplit

import pytest
from botocore.credentials import Credentials

from tests.support.frontdoor import FrontDoorClient, aws, executions, new_role, new_user, session_of

TEN_MB = 10 * 1024 * 1024


def _started(state: dict[str, Any]) -> int:
    return len(executions(state))


# ---------------------------------------------------------------- defect 9: framing, size, encoding, headers
def test_non_utf8_json_body_reaches_the_function_base64_encoded_and_gets_its_400(door: FrontDoorClient) -> None:
    body = b'{"prompt": "a \xff fox"}'  # declared application/json, not UTF-8
    reply = door.request("POST", "/jobs", body, [("Content-Type", "application/json")])
    assert reply.status == 400, reply.body
    assert reply.json["error"]["code"] == "InvalidRequest"
    assert "not valid UTF-8 (byte 14)" in reply.json["error"]["message"]


@pytest.mark.parametrize("announced", ["abc", "-1", "1e3", "12, 13", " "])
def test_an_invalid_content_length_is_a_400_json_answer_not_a_dropped_connection(
    door: FrontDoorClient, door_state: dict[str, Any], announced: str
) -> None:
    before = _started(door_state)
    body = b'{"prompt": "a fox"}'
    headers = door.signed("POST", "/jobs", body, [("Content-Type", "application/json")])
    reply = door.send("POST", "/jobs", body, headers, content_length=announced, timeout=10)
    assert reply.status == 400
    assert reply.json == {"message": "Bad Request"}
    assert reply.header("Content-Type") == "application/json"
    assert _started(door_state) == before


def test_a_body_over_10_mb_is_413_before_it_is_read(door: FrontDoorClient, door_state: dict[str, Any]) -> None:
    """Announced 10 MB + 1 and nothing sent: the door answers from the Content-Length, it does not wait for it."""
    before = _started(door_state)
    headers = door.signed("POST", "/jobs", b"", [("Content-Type", "application/json")])
    reply = door.send("POST", "/jobs", b"", headers, content_length=str(TEN_MB + 1), timeout=10)
    assert reply.status == 413
    assert reply.json == {"message": "Request Entity Too Large"}
    assert _started(door_state) == before


def test_a_chunked_body_over_10_mb_is_413(door: FrontDoorClient) -> None:
    headers = [("Content-Type", "application/json"), ("Transfer-Encoding", "chunked")]
    # The first chunk announces 10 MB + 1 bytes: refused from its size line, before any of it is read.
    reply = door.send_raw("POST", "/jobs", headers, f"{TEN_MB + 1:x}\r\n".encode(), timeout=10)
    assert reply.status == 413
    assert reply.json == {"message": "Request Entity Too Large"}


def test_a_chunked_body_within_the_limit_reaches_the_function(door: FrontDoorClient) -> None:
    body = b'{"prompt": "a chunked fox", "seed": 1}'
    headers = door.signed("POST", "/jobs", body, [("Content-Type", "application/json")])
    chunks = b"".join(f"{len(part):x}\r\n".encode() + part + b"\r\n" for part in (body[:10], body[10:])) + b"0\r\n\r\n"
    reply = door.send_raw("POST", "/jobs", [*headers, ("Transfer-Encoding", "chunked")], chunks)
    assert reply.status == 202, reply.body


def test_repeated_headers_reach_the_function_joined_with_commas(door: FrontDoorClient) -> None:
    """Payload format 2.0 joins repeated headers: two Idempotency-Key headers are one invalid key "a,b"."""
    reply = door.post_json({"prompt": "a fox"}, ("Idempotency-Key", "key-a"), ("Idempotency-Key", "key-b"))
    assert reply.status == 400, reply.body
    assert reply.json["error"]["code"] == "InvalidIdempotencyKey"


def test_a_malformed_request_line_gets_json_not_html(door: FrontDoorClient) -> None:
    where = urlsplit(door.api_url)
    with socket.create_connection((where.hostname, where.port), timeout=10) as sock:
        sock.sendall(b"NOT AN HTTP REQUEST\r\n\r\n")
        raw = b""
        while chunk := sock.recv(65536):
            raw += chunk
    head, _, body = raw.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 400 ")
    assert b"content-type: application/json" in head.lower()
    assert json.loads(body) == {"message": "Bad request version ('REQUEST')"}


# ---------------------------------------------------------------- defect 7: caller identity
def test_two_access_keys_are_two_callers(door: FrontDoorClient, door_state: dict[str, Any]) -> None:
    _, alice = new_user(door_state)
    _, bob = new_user(door_state)
    key = ("Idempotency-Key", f"shared-{uuid.uuid4().hex}")
    as_alice, as_bob = door.as_(alice), door.as_(bob)

    first = as_alice.post_json({"prompt": "alice's fox"}, key)
    second = as_bob.post_json({"prompt": "alice's fox"}, key)
    assert (first.status, second.status) == (202, 202), (first.body, second.body)
    assert first.json["job_id"] != second.json["job_id"], "one Idempotency-Key, two callers: two jobs"
    assert second.header("Idempotent-Replayed") == "false"

    assert as_alice.get_job(first.json["job_id"]).status == 200
    theirs = as_alice.get_job(second.json["job_id"])
    assert theirs.status == 404 and theirs.json["error"]["code"] == "JobNotFound"
    assert as_bob.get_job(first.json["job_id"]).status == 404


def test_two_sessions_of_one_role_are_one_caller(door: FrontDoorClient, door_state: dict[str, Any]) -> None:
    role = new_role(door_state)
    replica_1 = door.as_(session_of(door_state, role, "replica-1"))
    replica_2 = door.as_(session_of(door_state, role, "replica-2"))
    key = ("Idempotency-Key", f"replica-{uuid.uuid4().hex}")

    first = replica_1.post_json({"prompt": "one app, two replicas"}, key)
    retried = replica_2.post_json({"prompt": "one app, two replicas"}, key)
    assert (first.status, retried.status) == (202, 202), (first.body, retried.body)
    assert retried.json["job_id"] == first.json["job_id"]
    assert retried.header("Idempotent-Replayed") == "true"
    assert replica_2.get_job(first.json["job_id"]).status == 200


def _stale_clock() -> datetime:
    return datetime.now(UTC) - timedelta(minutes=6)


@pytest.mark.parametrize(
    "who, message",
    [
        ("unsigned", "Forbidden"),
        ("unknown key", "The security token included in the request is invalid."),
        ("wrong secret", "The request signature we calculated does not match"),
        ("tampered body", "The request signature we calculated does not match"),
        # Issue 27 item 7: the signature covers the body received, whatever X-Amz-Content-SHA256 claims.
        ("body other than the signed hash", "The request signature we calculated does not match"),
        ("UNSIGNED-PAYLOAD", "The request signature we calculated does not match"),
        ("session without its token", "The security token included in the request is invalid."),
        ("no execute-api:Invoke", "is not authorized to perform: execute-api:Invoke on resource: arn:aws:execute-api:"),
        ("signed 6 minutes ago", "Signature expired"),
    ],
)
def test_requests_api_gateway_would_refuse_get_its_403(
    door: FrontDoorClient, door_state: dict[str, Any], who: str, message: str
) -> None:
    before = _started(door_state)
    body = b'{"prompt": "a refused fox"}'
    headers = [("Content-Type", "application/json")]
    if who == "unsigned":
        reply = door.as_(None).request("POST", "/jobs", body, headers)
    elif who == "unknown key":
        reply = door.as_(Credentials("AKIA" + "Z" * 16, "x" * 40)).request("POST", "/jobs", body, headers)
    elif who == "wrong secret":
        access_key = door.credentials.access_key  # type: ignore[union-attr]
        reply = door.as_(Credentials(access_key, "x" * 40)).request("POST", "/jobs", body, headers)
    elif who == "tampered body":
        signed = door.signed("POST", "/jobs", body, headers)
        reply = door.send("POST", "/jobs", body.replace(b"refused", b"changed"), signed)
    elif who == "body other than the signed hash":
        claimed = [*headers, ("X-Amz-Content-SHA256", hashlib.sha256(body).hexdigest())]
        signed = door.signed("POST", "/jobs", body, claimed)
        reply = door.send("POST", "/jobs", body.replace(b"refused", b"changed"), signed)  # same length
    elif who == "UNSIGNED-PAYLOAD":
        signed = door.signed("POST", "/jobs", body, [*headers, ("X-Amz-Content-SHA256", "UNSIGNED-PAYLOAD")])
        reply = door.send("POST", "/jobs", body.replace(b"refused", b"changed"), signed)
    elif who == "session without its token":
        session = session_of(door_state, new_role(door_state), "tokenless")
        reply = door.as_(Credentials(session.access_key, session.secret_key)).request("POST", "/jobs", body, headers)
    elif who == "no execute-api:Invoke":
        _, nobody = new_user(door_state, may_invoke=False)
        reply = door.as_(nobody).request("POST", "/jobs", body, headers)
    else:
        with mock.patch("botocore.auth.get_current_datetime", _stale_clock):
            signed = door.signed("POST", "/jobs", body, headers)
        reply = door.send("POST", "/jobs", body, signed)
    assert reply.status == 403, reply.body
    assert message in reply.json["message"]
    assert set(reply.json) == {"message"}, "API Gateway's own answer, not the function's"
    assert _started(door_state) == before


def test_a_signed_content_hash_that_matches_the_body_is_accepted(door: FrontDoorClient) -> None:
    """The other side of issue 27 item 7: SDKs that send X-Amz-Content-SHA256 (signed, matching) still get in."""
    body = json.dumps({"prompt": "a fox whose body was hashed"}).encode()
    headers = [("Content-Type", "application/json"), ("X-Amz-Content-SHA256", hashlib.sha256(body).hexdigest())]
    reply = door.request("POST", "/jobs", body, headers)
    assert reply.status == 202, reply.body


# ---------------------------------------------------------------- issue 29 item 2: one evaluator, Conditions included
INVOKE = "execute-api:Invoke"
ANY_ROUTE = "arn:aws:execute-api:*:*:*/*/*/*"


def _user_with(state: dict[str, Any], statements: Callable[[str], list[dict[str, Any]]]) -> Credentials:
    """A user whose only policy is ``statements(its user name)`` (for ``aws:username`` Conditions)."""
    arn, credentials = new_user(state, may_invoke=False)
    name = arn.rsplit("/", 1)[1]
    policy = {"Version": "2012-10-17", "Statement": statements(name)}
    aws(state, "iam").put_user_policy(UserName=name, PolicyName="invoke", PolicyDocument=json.dumps(policy))
    return credentials


def _deny_if(username: str) -> dict[str, Any]:
    return {"Effect": "Deny", "Action": INVOKE, "Resource": ANY_ROUTE,
            "Condition": {"StringEquals": {"aws:username": username}}}  # fmt: skip


ALLOW_INVOKE = {"Effect": "Allow", "Action": INVOKE, "Resource": ANY_ROUTE}


def test_a_deny_whose_condition_does_not_match_the_caller_does_not_deny(
    door: FrontDoorClient, door_state: dict[str, Any]
) -> None:
    """AWS evaluates the Deny's Condition: another user's name does not match this caller, so the Allow stands (the
    front door used to ignore Conditions and refuse)."""
    credentials = _user_with(door_state, lambda name: [ALLOW_INVOKE, _deny_if("someone-else")])
    reply = door.as_(credentials).request("GET", "/jobs", b"", [])
    assert reply.status == 200, reply.body


def test_a_deny_whose_condition_matches_the_caller_denies(door: FrontDoorClient, door_state: dict[str, Any]) -> None:
    credentials = _user_with(door_state, lambda name: [ALLOW_INVOKE, _deny_if(name)])
    reply = door.as_(credentials).request("GET", "/jobs", b"", [])
    assert reply.status == 403 and reply.json["message"].endswith("with an explicit deny"), reply.body
    assert set(reply.json) == {"message"}


@pytest.mark.parametrize(("network", "status"), [("127.0.0.0/8", 200), ("203.0.113.0/24", 403)])
def test_an_allow_applies_only_where_its_condition_holds(
    door: FrontDoorClient, door_state: dict[str, Any], network: str, status: int
) -> None:
    allow = {**ALLOW_INVOKE, "Condition": {"IpAddress": {"aws:SourceIp": network}}}
    credentials = _user_with(door_state, lambda name: [allow])
    assert door.as_(credentials).request("GET", "/jobs", b"", []).status == status
