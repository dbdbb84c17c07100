"""What each handler's import loads (its cold path), imported in a fresh Lambda-like interpreter with its environment
from template.yaml (parameter defaults; ``LAMBDA_TASK_ROOT`` set).

No tracing SDK (docs/decisions.md, 2026-12-03, "Tracing after the X-Ray SDK"): the functions rely on Lambda active
tracing, so no handler imports ``aws_xray_sdk`` or OpenTelemetry; the clients every call uses are created at import;
what the cold path dropped stays dropped.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

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
state = {"clients": sorted(set(created)), "packages": sorted({m.split(".")[0] for m in sys.modules})}
print("STATE " + json.dumps(state))
"""
# Tracing SDKs no function may load (Lambda active tracing is the tracing story).
TRACING_SDKS = {"aws_xray_sdk", "opentelemetry"}


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


def test_tracing_is_lambda_active_tracing_with_no_sdk_switch() -> None:
    assert TEMPLATE["Globals"]["Function"]["Tracing"] == "Active"
    assert TEMPLATE["Resources"]["PipelineStateMachine"]["Properties"]["Tracing"] == {"Enabled": True}
    assert "XRaySdkTracing" not in TEMPLATE["Parameters"]
    for folder, logical in LOGICAL_BY_FOLDER.items():
        assert "XRAY_SDK_TRACING" not in function_environment(TEMPLATE, logical), folder
    requirements = (ROOT / "layers" / "omnireel" / "requirements.txt").read_text()
    assert "aws-xray-sdk" not in requirements and "[tracer]" not in requirements  # not even shipped in the layer


@pytest.fixture(scope="module")
def default_imports() -> dict[str, dict[str, object]]:
    """Each handler imported once, in its own fresh interpreter, with the template's default environment."""
    return {folder: import_handler(folder) for folder in function_folders()}


@pytest.mark.parametrize("folder", function_folders())
def test_no_handler_imports_a_tracing_sdk(folder: str, default_imports: dict[str, dict[str, object]]) -> None:
    packages = set(default_imports[folder]["packages"])  # type: ignore[arg-type]
    assert packages & TRACING_SDKS == set(), f"{folder} imports {sorted(packages & TRACING_SDKS)}"


# The clients each function uses on every call (the rule of issue 11: they are created at import, so the cold-start
# benchmark measures them and the first invocation does not hide their cost). Clients for paths some calls take only
# (a rejected drop's job.failed event, a batch in the API, the safety nets' rare publishes) may be created on first use.
EVERY_CALL_CLIENTS = {
    "api": {"dynamodb", "s3", "stepfunctions"},
    "async_result": {"dynamodb", "s3", "stepfunctions", "sns", "events"},  # job.succeeded on every success
    "batch_progress": {"dynamodb", "s3"},
    "batch_submit": {"dynamodb", "s3", "sqs", "stepfunctions"},
    "fail_overdue_jobs": {"dynamodb", "s3", "stepfunctions"},
    "heal_admission": {"dynamodb", "sagemaker", "stepfunctions", "cloudwatch"},  # every minute: all of them
    "wait_for_slot": {"dynamodb", "stepfunctions"},  # the queue, and the token answered when a slot is free
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
