"""moto patch 21: the Step Functions interpreter no longer drags moto's Batch and EC2 models into every stack start,
and Batch still works when something uses it. Fresh interpreters: what is imported is per process."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]

PROBE = """
import json, sys
sys.path[:0] = ["local"]
defer = sys.argv[1] == "defer"
if defer:
    from omnireel_local.patches.speed import defer_batch_package
    defer_batch_package()
import moto.stepfunctions.parser.models  # what the stack imports when it applies its patches
after_parser = {m: m in sys.modules for m in ("moto.batch.models", "moto.ec2")}
import boto3
from moto import mock_aws
from moto.backends import get_backend
with mock_aws():
    batch = boto3.client("batch", region_name="us-east-1")
    queues = batch.describe_job_queues()["jobQueues"]
    backends = get_backend("batch")
print(json.dumps({"after_parser": after_parser, "queues": queues, "backends": type(backends).__name__}))
"""


def run_fresh(code: str, *args: str) -> dict:
    """Run ``code`` in a fresh interpreter from the repository root; its last stdout line is JSON."""
    result = subprocess.run([sys.executable, "-c", code, *args], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def probe(mode: str) -> dict:
    return run_fresh(PROBE, mode)


def test_the_step_functions_interpreter_imports_without_batch_or_ec2_and_batch_still_works() -> None:
    deferred = probe("defer")
    assert deferred["after_parser"] == {"moto.batch.models": False, "moto.ec2": False}
    assert deferred["queues"] == [] and deferred["backends"] == "BackendDict"


def test_without_the_patch_the_interpreter_imports_batch_and_ec2() -> None:
    """The cost the patch removes is real (a moto upgrade that drops it makes this fail: then drop the patch)."""
    plain = probe("plain")
    assert plain["after_parser"] == {"moto.batch.models": True, "moto.ec2": True}
    assert plain["queues"] == []


def test_rebinding_a_patched_function_across_modules_leaves_a_deferred_package_unloaded() -> None:
    """The IAM patch rebinds Step Functions' boto_client_for in every module; that scan once used getattr, which ran
    the deferred moto.batch __init__ (and EC2) at every stack start anyway."""
    probe = """
import json, sys
sys.path[:0] = ["local"]
from omnireel_local.patches.cards import rebind_everywhere
from omnireel_local.patches.speed import defer_batch_package
defer_batch_package()
from moto.stepfunctions.parser.asl.component.state.exec.state_task.service import state_task_service_batch as batch
from moto.stepfunctions.parser.asl.utils import boto_client
original = boto_client.boto_client_for
def replacement(*args): return None
rebind_everywhere("boto_client_for", original, replacement)
print(json.dumps({"rebound": batch.boto_client_for is replacement, "ec2": "moto.ec2" in sys.modules}))
"""
    assert run_fresh(probe) == {"rebound": True, "ec2": False}
