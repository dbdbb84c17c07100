"""The X-Ray SDK is off by default (template parameter ``XRaySdkTracing``): no handler imports ``aws_xray_sdk``.

Each handler is imported in a fresh interpreter with its environment from template.yaml (parameter defaults) in a
Lambda-like environment (``LAMBDA_TASK_ROOT`` set and ``POWERTOOLS_TRACE_DISABLED`` unset, so Powertools' Tracer
would be enabled if it were created). With the parameter on, the same import creates Powertools' Tracer, enabled,
with botocore patched. ``omnireel.runtime.tracing`` is the one place that decides; the decorators work either way.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from omnireel.runtime.tracing import ENV, NoTracer, make_tracer, xray_sdk_enabled
from omnireel_template import (
    function_environment,
    function_folder,
    function_folders,
    load_template,
    offline_lambda_environment,
    serverless_functions,
)

ROOT = Path(__file__).resolve().parents[3]
TEMPLATE = load_template()
LOGICAL_BY_FOLDER = {function_folder(fn): logical for logical, fn in serverless_functions(TEMPLATE).items()}

PROBE = """
import json, sys
import botocore.session
created = []
_create = botocore.session.Session.create_client
def create_client(self, service_name, *args, **kwargs):
    created.append(service_name)
    return _create(self, service_name, *args, **kwargs)
botocore.session.Session.create_client = create_client
import handler
from omnireel.runtime.observability import tracer  # the one tracer every handler shares
state = {"sdk_modules": sorted(m for m in sys.modules if m.split(".")[0] == "aws_xray_sdk"),
         "tracer": type(tracer).__module__ + "." + type(tracer).__name__, "disabled": bool(tracer.disabled),
         "clients": sorted(set(created)), "packages": sorted({m.split(".")[0] for m in sys.modules})}
if state["sdk_modules"]:
    from aws_xray_sdk.core import patcher
    state["patched"] = sorted(patcher._PATCHED_MODULES)
print("STATE " + json.dumps(state))
"""


def import_handler(folder: str, parameters: dict[str, str] | None = None) -> dict[str, object]:
    """Import functions/<folder>/handler.py in a fresh interpreter with the template's environment for it."""
    env = {
        **offline_lambda_environment(folder, parameters),  # clients are created at import but make no call
        "PYTHONPATH": os.pathsep.join([str(ROOT / "functions" / folder), str(ROOT / "layers" / "omnireel")]),
    }
    proc = subprocess.run(
        [sys.executable, "-c", PROBE], env=env, cwd=ROOT / "functions" / folder, capture_output=True, text=True,
        timeout=120, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = next(row for row in proc.stdout.splitlines() if row.startswith("STATE "))
    return json.loads(line.removeprefix("STATE "))


def test_the_parameter_defaults_to_off_and_reaches_every_function() -> None:
    parameter = TEMPLATE["Parameters"]["XRaySdkTracing"]
    assert parameter["Default"] == "false" and parameter["AllowedValues"] == ["false", "true"]
    assert TEMPLATE["Globals"]["Function"]["Tracing"] == "Active"  # Lambda's own segment stays on either way
    assert TEMPLATE["Globals"]["Function"]["Environment"]["Variables"][ENV] == {"Ref": "XRaySdkTracing"}
    for folder, logical in LOGICAL_BY_FOLDER.items():
        assert function_environment(TEMPLATE, logical)[ENV] == "false", folder


@pytest.fixture(scope="module")
def default_imports() -> dict[str, dict[str, object]]:
    """Each handler imported once, in its own fresh interpreter, with the template's default environment."""
    return {folder: import_handler(folder) for folder in function_folders()}


@pytest.mark.parametrize("folder", function_folders())
def test_by_default_no_handler_imports_the_xray_sdk(folder: str, default_imports: dict[str, dict[str, object]]) -> None:
    state = default_imports[folder]
    assert state["sdk_modules"] == [], f"{folder} imports the X-Ray SDK with XRaySdkTracing=false"
    assert state["tracer"] == "omnireel.runtime.tracing.NoTracer"


def test_with_the_parameter_on_the_tracer_is_active_and_patches_botocore() -> None:
    state = import_handler("publish_event", {"XRaySdkTracing": "true"})
    assert state["tracer"] == "aws_lambda_powertools.tracing.tracer.Tracer"
    assert state["disabled"] is False
    assert "aws_xray_sdk.core" in state["sdk_modules"]
    assert state["patched"] == ["botocore"]


def test_the_switch_reads_true_or_false_only() -> None:
    assert xray_sdk_enabled({}) is False
    assert xray_sdk_enabled({ENV: "false"}) is False
    assert xray_sdk_enabled({ENV: " TRUE "}) is True
    with pytest.raises(RuntimeError, match=ENV):
        xray_sdk_enabled({ENV: "yes"})


def test_the_no_op_tracer_keeps_every_decorator_form_and_adds_nothing() -> None:
    tracer = make_tracer("probe", {ENV: "false"})
    assert isinstance(tracer, NoTracer)

    def handler(event: dict[str, int], context: object) -> int:
        return event["n"]

    def method(x: int) -> int:
        return x + 1

    # Bare and with arguments, as Powertools' Tracer takes them: the function itself comes back (no wrapper).
    assert tracer.capture_lambda_handler(handler) is handler
    assert tracer.capture_lambda_handler(capture_response=False)(handler) is handler
    assert tracer.capture_method(method) is method
    assert tracer.capture_method(capture_response=False, capture_error=True)(method) is method
    assert handler({"n": 2}, None) == 2 and method(1) == 2
    tracer.put_annotation("job_id", "j-1")
    tracer.put_metadata("k", {"v": 1}, namespace="omnireel")
    tracer.patch(["botocore"])
    assert tracer.disabled is True


# The clients each function uses on every call (the rule of issue 11: they are created at import, so the cold-start
# benchmark measures them and the first invocation does not hide their cost). Clients for paths some calls take only
# (a rejected drop's job.failed event, a batch in the API, the safety nets' rare publishes) may be created on first use.
EVERY_CALL_CLIENTS = {
    "api": {"dynamodb", "s3", "stepfunctions"},
    "async_result": {"dynamodb", "s3", "stepfunctions", "sns", "events"},  # job.succeeded on every success
    "batch_progress": {"dynamodb", "s3"},
    "batch_submit": {"dynamodb", "s3", "sqs", "stepfunctions"},
    "fail_overdue_jobs": {"dynamodb", "s3", "stepfunctions"},
    "generate_image": {"dynamodb", "s3", "sagemaker-runtime", "sns", "events"},  # job.image_ready on every call
    "inbox": {"dynamodb", "s3", "stepfunctions"},
    "invoke_video": {"dynamodb", "s3", "sagemaker-runtime", "stepfunctions"},  # HEAD of the request, heartbeat
    "publish_event": {"dynamodb", "s3", "sns", "events"},
    "reconcile_batches": {"dynamodb"},  # the open-items index; job reads and repairs are rare
    "reconcile_video": {"dynamodb", "s3"},
    "webhook_delivery": {"dynamodb", "sqs"},
    "workflow_ended": {"dynamodb", "s3"},
}


@pytest.mark.parametrize("folder", function_folders())
def test_clients_used_on_every_call_are_created_at_import(
    folder: str, default_imports: dict[str, dict[str, object]]
) -> None:
    state = default_imports[folder]
    assert folder in EVERY_CALL_CLIENTS, f"{folder}: list the clients its every call uses in EVERY_CALL_CLIENTS"
    missing = EVERY_CALL_CLIENTS[folder] - set(state["clients"])  # type: ignore[arg-type]
    assert not missing, f"{folder} creates {sorted(missing)} on first use: create them at import (cold start)"


# What the cold path dropped (issue 11 item 2; docs/decisions.md): pydantic (the records, events, settings and step
# inputs are msgspec structs), boto3 and its s3transfer (clients come from botocore), Pillow (the PNG check walks the
# chunks), requests and requests-toolbelt (the video request's multipart comes from urllib3).
NOT_ON_THE_COLD_PATH = {"pydantic", "pydantic_core", "boto3", "s3transfer", "PIL", "requests", "requests_toolbelt"}


@pytest.mark.parametrize("folder", function_folders())
def test_no_handler_import_loads_what_the_cold_path_dropped(
    folder: str, default_imports: dict[str, dict[str, object]]
) -> None:
    packages = set(default_imports[folder]["packages"])  # type: ignore[arg-type]
    assert packages & NOT_ON_THE_COLD_PATH == set(), f"{folder} imports {sorted(packages & NOT_ON_THE_COLD_PATH)}"
    assert {"omnireel", "botocore", "msgspec"} <= packages  # the probe sees what the handler imports
