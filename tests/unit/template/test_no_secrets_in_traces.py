"""No secrets in traces: functions whose responses carry presigned URLs or prompts do not copy them into X-Ray.

Powertools' Tracer stores every traced handler's and method's return value as subsegment metadata unless
``POWERTOOLS_TRACER_CAPTURE_RESPONSE`` is false. The API's GET /jobs/{id} answers with presigned artifact URLs (bearer
credentials until they expire) and the job's prompt, so the API function turns response capture off for all its routes
at once (a route added later inherits it).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from omnireel_local.cfn_template import load_template

# Functions whose responses carry presigned URLs or prompts.
SECRET_RESPONSES = {"ApiFunction": "GET /jobs/{id}: presigned artifact URLs and the prompt"}

# Runs Powertools' real Tracer (enabled, with a recording provider) in a fresh interpreter: the Tracer's configuration
# is shared by every instance in a process, so changing it here would leak into other tests.
_PROBE = r"""
import contextlib, json, sys
from aws_lambda_powertools import Tracer
from aws_lambda_powertools.tracing.base import BaseProvider

puts = []

class Subsegment:
    def put_metadata(self, key, value, namespace=None):
        puts.append(key)
    def put_annotation(self, key, value):
        pass
    def add_exception(self, *args, **kwargs):
        pass

class Provider(BaseProvider):
    @contextlib.contextmanager
    def in_subsegment(self, name=None, **kwargs):
        yield Subsegment()
    in_subsegment_async = in_subsegment
    def put_annotation(self, key, value): pass
    def put_metadata(self, key, value, namespace="default"): pass
    def patch(self, modules): pass
    def patch_all(self): pass

tracer = Tracer(service="probe", provider=Provider(), disabled=False, auto_patch=False)

@tracer.capture_method
def route():
    return {"artifacts": {"video": {"url": "https://example.invalid/?X-Amz-Signature=secret"}}}

@tracer.capture_lambda_handler
def handler(event, context):
    return {"statusCode": 200, "body": json.dumps(route())}

handler({}, None)
print(json.dumps(puts))
"""


def _metadata_keys(env: dict[str, str]) -> list[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("POWERTOOLS_TRACER")}
    proc = subprocess.run(
        [sys.executable, "-c", _PROBE],
        env={**clean, "AWS_LAMBDA_FUNCTION_NAME": "probe", **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return json.loads(proc.stdout.strip().splitlines()[-1])


def function_environment(name: str) -> dict[str, str]:
    return load_template()["Resources"][name]["Properties"].get("Environment", {}).get("Variables", {})


@pytest.mark.parametrize("function", sorted(SECRET_RESPONSES))
def test_functions_with_secret_responses_turn_response_capture_off(function: str) -> None:
    assert function_environment(function).get("POWERTOOLS_TRACER_CAPTURE_RESPONSE") == "false", SECRET_RESPONSES[
        function
    ]


def test_the_pinned_powertools_honours_the_switch() -> None:
    """With the template's value no response reaches the trace; without it both do (so the check above matters)."""
    assert _metadata_keys({}) == ["__main__.route response", "handler response"]
    value = function_environment("ApiFunction")["POWERTOOLS_TRACER_CAPTURE_RESPONSE"]
    assert _metadata_keys({"POWERTOOLS_TRACER_CAPTURE_RESPONSE": value}) == []
