"""The HTTP API against the bad-input corpus (tests/corpus/api/cases.json): one test per case.

Each case: a clear error (status, error code, message fragment), no crash (the handler returns a response), and
nothing started on rejection (the number of Step Functions executions does not change).
"""

from __future__ import annotations

import base64
import json
import time
from typing import Any

import pytest

from tests.integration.pipeline.harness import Context, api_event, load_template
from tests.support.corpus import expand, params

CASE_SECONDS = 5.0


def _event(request: dict[str, Any]) -> dict[str, Any]:
    method = request.get("method", "POST")
    path = expand(request.get("path", "/jobs"))
    if "body_b64" in request:
        body, is_b64 = request["body_b64"], True
    elif "json" in request:
        body, is_b64 = json.dumps(request["json"], ensure_ascii=False), False
    else:
        body, is_b64 = expand(request["body"]) if "body" in request else None, False
    headers = {k: expand(v) for k, v in request.get("headers", {}).items()}
    return api_event(
        method, path, body, headers, is_base64=is_b64, caller="corpus" if request.get("auth", True) else None
    )


def _call(pipeline, request: dict[str, Any]) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    response = pipeline.handlers["api"].handler(_event(request), Context("api"))
    body = response.get("body")
    if response.get("isBase64Encoded") and body:
        body = base64.b64decode(body).decode()
    response["json"] = json.loads(body) if body else None
    return response


@pytest.mark.parametrize("case", params("api"))
def test_api_case(corpus_pipeline, case: dict[str, Any]) -> None:
    expect = case["expect"]
    for request in case.get("before", []):
        assert _call(corpus_pipeline, request)["statusCode"] < 300
    started_before = len(corpus_pipeline.executions())
    t0 = time.monotonic()
    response = _call(corpus_pipeline, case)
    assert time.monotonic() - t0 < CASE_SECONDS, "the API took too long to answer"
    started = len(corpus_pipeline.executions()) - started_before

    assert response["statusCode"] == expect["status"], response.get("json")
    assert response["headers"]["Content-Type"].startswith("application/json")
    if expect["status"] >= 400:
        error = response["json"]["error"]
        assert error["code"] == expect["code"]
        assert expect["message"] in error["message"], error["message"]
        assert len(error["message"]) <= 1024, "error messages are bounded (no echo of a huge input)"
    else:
        job_id = response["json"]["job_id"]
        assert response["headers"]["Location"] == f"/jobs/{job_id}"
        replayed = "true" if expect.get("replayed") else "false"
        assert response["headers"]["Idempotent-Replayed"] == replayed
    assert started == expect["started"]


def test_template_puts_aws_iam_in_front_of_every_api_route() -> None:
    """Missing auth on AWS: API Gateway refuses unsigned requests (403) before the function runs."""
    template = load_template()
    apis = {k: v for k, v in template["Resources"].items() if v["Type"] == "AWS::Serverless::HttpApi"}
    assert apis, "no HttpApi in template.yaml"
    for api in apis.values():
        assert api["Properties"]["Auth"]["DefaultAuthorizer"] == "AWS_IAM"
    routes = [
        event
        for resource in template["Resources"].values()
        for event in (resource.get("Properties", {}).get("Events") or {}).values()
        if event.get("Type") == "HttpApi"
    ]
    assert routes
    for route in routes:  # no route opts out of the default authorizer
        assert route["Properties"].get("Auth", {}).get("Authorizer", "AWS_IAM") == "AWS_IAM", route
