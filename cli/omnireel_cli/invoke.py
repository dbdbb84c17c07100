"""``omnireel invoke FUNCTION --event events/<file>.json [--job ID]``: one Lambda invocation with a sample event.

Like ``sam local invoke`` / ``sam remote invoke``, against the local stack (default) or a deployed one (``--stack``),
as the developer identity (``lambda:InvokeFunction`` on the stack's functions). The sample events in ``events/``
name their job, buckets, topics and execution with ``{{placeholders}}``; they are filled from a real job of the
stack (``--job ID``, default the latest), so the invocation acts on something that exists. ``--set NAME=VALUE``
fills or overrides any of them. A placeholder that the job cannot fill (a task token of a job that never waited for
its video) is a clear error, naming ``--set``.
"""

from __future__ import annotations

import json
import re
import sys
import time
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import quote_plus

from omnireel_template import ROOT

from .errors import InfraError, JobFailed, UsageError
from .target import Target
from .vocabulary import PLACEHOLDERS

EVENTS_DIR = ROOT / "events"
PLACEHOLDER = re.compile(r"\{\{([a-z_]+)\}\}")
MAX_SCAN_PAGES = 20  # the latest job: a bounded scan of the jobs table


def fill(text: str, values: dict[str, str]) -> str:
    """Replace every ``{{name}}`` (inside JSON strings) with its JSON-escaped value; unknown or unfillable -> error."""
    missing = sorted({name for name in PLACEHOLDER.findall(text) if values.get(name) is None})
    if missing:
        unknown = [m for m in missing if m not in PLACEHOLDERS]
        if unknown:
            raise UsageError(f"unknown placeholder(s) {', '.join(unknown)}; known: {', '.join(PLACEHOLDERS)}")
        raise UsageError(
            f"cannot fill {', '.join(missing)} from job {values.get('job_id')}: pass --job of a job that has them "
            f"or --set NAME=VALUE ({'; '.join(f'{m}: {PLACEHOLDERS[m]}' for m in missing)})"
        )
    return PLACEHOLDER.sub(lambda m: json.dumps(values[m[1]])[1:-1], text)


def latest_job_id(target: Target) -> str:
    table = target.output("JobsTableName")
    ddb = target.client("dynamodb")
    latest: tuple[str, str] | None = None
    kwargs: dict[str, Any] = {"TableName": table, "ProjectionExpression": "job_id, created_at"}
    for _ in range(MAX_SCAN_PAGES):
        page = ddb.scan(**kwargs)
        for item in page.get("Items", []):
            candidate = (item.get("created_at", {}).get("S", ""), item["job_id"]["S"])
            latest = max(latest, candidate) if latest else candidate
        if "LastEvaluatedKey" not in page:
            break
        kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]
    if latest is None:
        raise UsageError("the stack has no job yet: submit one (`omnireel submit ...`) or pass --job ID")
    return latest[1]


def _job_item(target: Target, job_id: str) -> dict[str, Any]:
    from boto3.dynamodb.types import TypeDeserializer

    item = (
        target.client("dynamodb")
        .get_item(TableName=target.output("JobsTableName"), Key={"job_id": {"S": job_id}}, ConsistentRead=True)
        .get("Item")
    )
    if not item:
        raise UsageError(f"no job {job_id} in {target.output('JobsTableName')}")
    deserializer = TypeDeserializer()
    return {k: deserializer.deserialize(v) for k, v in item.items()}


def values(target: Target, job_id: str, overrides: dict[str, str]) -> dict[str, str | None]:
    job = _job_item(target, job_id)
    account = target.state.get("account_id") or _account(target)
    region = target.region
    out = target.outputs
    found: dict[str, str | None] = {
        "job_id": job_id,
        "account_id": account,
        "region": region,
        "inbox_bucket": out.get("InboxBucketName"),
        "artifacts_bucket": out.get("ArtifactsBucketName"),
        "state_machine_arn": out.get("StateMachineArn"),
        "video_success_topic_arn": out.get("VideoSuccessTopicArn"),
        "video_error_topic_arn": out.get("VideoErrorTopicArn"),
        "video_endpoint": out.get("VideoEndpointName"),
        "execution_name": job.get("execution_name"),
        "task_token": job.get("task_token"),
        "idempotency_key": f"cli-invoke-{uuid.uuid4()}",
        # The job's owner is a unique id (omnireel.core.caller), its ARN kept beside it for people (owner_arn).
        "caller_arn": job.get("owner_arn") or (target.state.get("developer") or {}).get("arn"),
        "caller_id": job.get("owner") or (target.state.get("developer") or {}).get("user_id"),
    }
    machine = out.get("StateMachineArn")
    if machine and job.get("execution_name"):
        found["execution_arn"] = machine.replace(":stateMachine:", ":execution:") + f":{job['execution_name']}"
    bucket = out.get("ArtifactsBucketName")
    invocation = job.get("async_invocation") or {}
    found["async_output_location"] = invocation.get("output_location") or (
        f"s3://{bucket}/async/outputs/{job_id}.out" if bucket else None
    )
    found["async_failure_location"] = invocation.get("failure_location") or (
        f"s3://{bucket}/async/failures/{job_id}-error.out" if bucket else None
    )
    source = str(job.get("source") or "")
    if source.startswith("s3://"):
        key = source[5:].partition("/")[2]
        version = job.get("source_version") or {}
        found.update(
            source_key=key,
            source_key_url=quote_plus(key, safe="/"),
            source_version_id=version.get("version_id"),
            source_etag=version.get("etag"),
        )
    rules = (target.state.get("provisioned") or {}).get("schedules") or []
    found["schedule_rule_arn"] = rules[0].get("rule_arn") if rules else f"arn:aws:events:{region}:{account}:rule/none"
    found.update(overrides)
    return found


def _account(target: Target) -> str:
    return target.client("sts").get_caller_identity()["Account"]


def function_name(target: Target, wanted: str) -> str:
    """FUNCTION as its folder (generate_image), template logical id (GenerateImageFunction) or physical name."""
    if target.local:
        functions = (target.state.get("provisioned") or {}).get("functions") or {}
        names = {}
        for physical, spec in functions.items():
            for alias in (physical, spec.get("logical_id"), Path(spec.get("code_dir", "")).name):
                if alias:
                    names[alias] = physical
    else:
        names = _deployed_functions(target)
    if wanted in names:
        return names[wanted]
    folders = sorted(n for n in names if n.islower() and "-" not in n)
    raise UsageError(f"no function {wanted!r} in the {target.name} stack; functions: {', '.join(folders)}")


def _deployed_functions(target: Target) -> dict[str, str]:
    from omnireel_template import load_template

    folders = {
        logical: Path(str(r.get("Properties", {}).get("CodeUri", ""))).name
        for logical, r in load_template().get("Resources", {}).items()
        if r.get("Type") == "AWS::Serverless::Function"
    }
    names: dict[str, str] = {}
    paginator = target.client("cloudformation").get_paginator("list_stack_resources")
    for page in paginator.paginate(StackName=target.name):
        for resource in page["StackResourceSummaries"]:
            if resource["ResourceType"] == "AWS::Lambda::Function":
                logical, physical = resource["LogicalResourceId"], resource["PhysicalResourceId"]
                names[logical] = names[physical] = physical
                if folders.get(logical):
                    names[folders[logical]] = physical
    return names


def event_path(function_folder: str, event: Path | None) -> Path:
    if event is not None:
        if not event.is_file():
            raise UsageError(f"no such event file: {event}")
        return event
    default = EVENTS_DIR / f"{function_folder}.json"
    if default.is_file():
        return default
    choices = sorted(p.name for p in EVENTS_DIR.glob(f"{function_folder}*.json"))
    raise UsageError(f"which event? --event events/<file>.json ({', '.join(choices) or 'none in events/'})")


def invoke(target: Target, wanted: str, event: Path | None, job_id: str | None, overrides: dict[str, str],
           as_json: bool) -> int:  # fmt: skip
    name = function_name(target, wanted)
    folder = wanted if wanted.islower() and "-" not in wanted else _folder_of(target, name)
    path = event_path(folder, event)
    text = path.read_text()
    job = job_id or (None if not PLACEHOLDER.search(text) else latest_job_id(target))
    payload = fill(text, values(target, job, overrides)) if job else text
    try:
        json.loads(payload)
    except ValueError as exc:
        raise UsageError(f"{path} is not valid JSON after filling its placeholders: {exc}") from exc
    print(f"invoking {name} with {path.name}" + (f" (job {job})" if job else ""), file=sys.stderr, flush=True)
    started = time.monotonic()
    try:
        response = target.client("lambda").invoke(FunctionName=name, Payload=payload.encode())
    except Exception as exc:
        raise InfraError(f"cannot invoke {name}: {exc}") from exc
    elapsed = time.monotonic() - started
    body = response["Payload"].read().decode(errors="replace")
    try:
        result: Any = json.loads(body) if body else None
    except ValueError:
        result = body
    error = response.get("FunctionError")
    if as_json:
        print(json.dumps({"function": name, "job_id": job, "function_error": error, "result": result}))
    else:
        print(json.dumps(result, indent=2) if not isinstance(result, str) else result)
    print(f"{name}: {'error (' + error + ')' if error else 'ok'} in {elapsed * 1000:.0f} ms", file=sys.stderr)
    if error:
        message = result.get("errorMessage") if isinstance(result, dict) else result
        kind = result.get("errorType") if isinstance(result, dict) else error
        raise JobFailed(f"{name} failed: {kind}: {str(message)[:500]}")
    return 0


def _folder_of(target: Target, physical: str) -> str:
    if target.local:
        spec = ((target.state.get("provisioned") or {}).get("functions") or {}).get(physical) or {}
        return Path(spec.get("code_dir", physical)).name
    return next((alias for alias, p in _deployed_functions(target).items() if p == physical and alias.islower()),
                physical)  # fmt: skip


def parse_sets(items: list[str]) -> dict[str, str]:
    out = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or name not in PLACEHOLDERS:
            raise UsageError(f"--set wants NAME=VALUE with NAME one of {', '.join(PLACEHOLDERS)}; got {item!r}")
        out[name] = value
    return out
