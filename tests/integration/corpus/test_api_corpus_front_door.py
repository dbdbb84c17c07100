"""The HTTP API's bad-input corpus (tests/corpus/api/cases.json) through the local stack's front door.

The same cases as test_api_corpus.py, but as real HTTP requests signed with SigV4 like the CLI signs them, against
one local stack for the whole session: the door's framing, encoding and IAM checks are on the path. A case whose
answer comes from API Gateway itself (no such route, an unsigned request) says so with ``front_door``.
"""

from __future__ import annotations

import base64
import json
import time
from typing import Any
from urllib.parse import quote

import pytest

from tests.support.corpus import expand, params
from tests.support.frontdoor import FrontDoorClient, Reply, executions

CASE_SECONDS = 10.0  # a real HTTP round trip, a SigV4 check and a Lambda worker in between


def _call(door: FrontDoorClient, request: dict[str, Any]) -> Reply:
    method = request.get("method", "POST")
    path, _, query = expand(request.get("path", "/jobs")).partition("?")
    path = quote(path, safe="/%") + (f"?{quote(query, safe='=&%')}" if query else "")  # GET /jobs?limit=...
    if "body_b64" in request:
        body = base64.b64decode(request["body_b64"])  # declared JSON; not UTF-8 ones reach the function as base64
    elif "json" in request:
        body = json.dumps(request["json"], ensure_ascii=False).encode()
    else:
        body = expand(request["body"]).encode() if "body" in request else b""
    headers = [("Content-Type", "application/json")] if body or method == "POST" else []
    headers += [(k, expand(v)) for k, v in request.get("headers", {}).items()]
    client = door if request.get("auth", True) else door.as_(None)
    return client.request(method, path, body, headers)


@pytest.mark.parametrize("case", params("api"))
def test_api_case_through_the_front_door(door: FrontDoorClient, door_state: dict[str, Any], case) -> None:
    expect = {**case["expect"], **case.get("front_door", {})}
    for request in case.get("before", []):
        assert _call(door, request).status < 300
    before = len(executions(door_state))
    t0 = time.monotonic()
    reply = _call(door, case)
    assert time.monotonic() - t0 < CASE_SECONDS, "the API took too long to answer"
    started = len(executions(door_state)) - before

    assert reply.status == expect["status"], reply.body[:500]
    assert (reply.header("Content-Type") or "").startswith("application/json")
    if "gateway_message" in expect:
        assert reply.json == {"message": expect["gateway_message"]}
    elif expect["status"] >= 400:
        error = reply.json["error"]
        assert error["code"] == expect["code"]
        assert expect["message"] in error["message"], error["message"]
        assert len(error["message"]) <= 1024, "error messages are bounded (no echo of a huge input)"
    else:
        job_id = reply.json["job_id"]
        assert reply.header("Location") == f"/jobs/{job_id}"
        assert reply.header("Idempotent-Replayed") == ("true" if expect.get("replayed") else "false")
    assert started == expect.get("started", 0)
