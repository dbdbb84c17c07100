"""An in-process deployment of the pipeline on moto, for handler and state-machine tests.

Real pieces: the ASL file (rendered with the template's substitutions and run by moto's executing
Step Functions), every handler module, DynamoDB/S3/SNS/SQS/EventBridge (moto). Replaced pieces: the
GPU models (a fake image endpoint and a fake async video endpoint whose completion the test drives
by writing S3 objects and publishing the SageMaker notification to the async topics), and moto's
Docker-based Lambda runtime (``_invoke_lambda`` calls the handler module in-process).
"""

from __future__ import annotations

import base64
import contextlib
import functools
import hashlib
import importlib.util
import io
import json
import os
import re
import sys
import threading
import time
import uuid
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import boto3
from moto.awslambda.models import LambdaFunction

from omnireel.core.errors import EndpointUnavailable
from omnireel.jobs.job import AsyncInvocation
from omnireel_local.patches.speed import defer_batch_package
from omnireel_template import (
    definition_file,
    function_folder,
    function_folders,
    load_template,
    render_definition,
    serverless_functions,
    state_machine_substitutions,
)
from tests.support.media import tiny_mp4 as tiny_mp4  # the pipeline tests import it from here

# Patch 21 (omnireel_local.patches.speed), for this process: moto's Step Functions interpreter, which the harness's
# executions import, imports moto.batch, whose models build EC2's region and instance-type tables (~0.4 s of CPU per
# test process). Deferred until something Batch defines is used; a no-op once moto.batch is imported. It must run
# before the interpreter's first import, so here rather than in speed_patches (per test).
defer_batch_package()

ROOT = Path(__file__).resolve().parents[3]
REGION = "us-east-1"
ACCOUNT = "123456789012"
# Every function under functions/ (a new one is loaded without editing this file), except the batch and webhook
# functions: their tables, queues and secret are not created here (the e2e tests run them on the local stack).
NOT_IN_HARNESS = {"batch_submit", "batch_progress", "reconcile_batches", "webhook_delivery"}
FUNCTIONS = [name for name in function_folders() if name not in NOT_IN_HARNESS]


def png(width: int = 64, height: int = 64) -> bytes:
    from PIL import Image

    buffer = io.BytesIO()
    Image.new("RGB", (width, height), (200, 30, 30)).save(buffer, format="PNG")
    return buffer.getvalue()


class FakeImageEndpoint:
    """Stands in for the FLUX endpoint: returns a PNG, or fails ``failures`` times first."""

    def __init__(self):
        self.calls: list[dict[str, Any]] = []
        self.failures = 0
        self.error: Exception = EndpointUnavailable("endpoint image: model returned HTTP 503: injected")
        self.latency_s = 0.0  # the model's own time per call (a slow image, e.g. a cold endpoint)

    def generate(self, body: dict[str, Any]) -> bytes:
        self.calls.append(body)
        if self.latency_s:
            time.sleep(self.latency_s)  # stands for the model's work, not a wait for another thread
        if self.failures:
            self.failures -= 1
            raise self.error
        return png(96, 96)


class FakeVideoEndpoint:
    """Stands in for InvokeEndpointAsync: records the call and says where output/failure will go."""

    def __init__(self, bucket: str):
        self.bucket = bucket
        self.calls: list[dict[str, Any]] = []

    def invoke_async(self, **kwargs: Any) -> AsyncInvocation:
        self.calls.append(kwargs)
        out = uuid.uuid4()
        return AsyncInvocation(
            inference_id=kwargs["inference_id"],
            output_location=f"s3://{self.bucket}/async/outputs/{out}.out",
            failure_location=f"s3://{self.bucket}/async/failures/{out}-error.out",
        )


class FakeInstances:
    """Stands in for DescribeEndpoint's instances in service, per endpoint name (admission's capacity)."""

    def __init__(self, image: int = 64, video: int = 64):
        self.counts = {"image-endpoint": image, "video-endpoint": video}

    def count(self, endpoint: str) -> int:
        return self.counts.get(endpoint, 0)


@dataclass
class Context:
    function_name: str
    memory_limit_in_mb: int = 512
    invoked_function_arn: str = ""
    aws_request_id: str = field(default_factory=lambda: str(uuid.uuid4()))

    def get_remaining_time_in_millis(self) -> int:
        return 60_000


class Pipeline:
    def __init__(self, *, suffix: str | None = None, **parameter_overrides: str):
        """``suffix`` names this deployment's resources. Within one moto mock each deployment needs its own; the
        fixtures pass the deployment's index in its test (each test has a fresh mock), so a test's first pipeline has
        the same names, hence the same state machine definition, as every other test's: moto's ASL parse is cached
        per definition (local patch 22) and runs once per process instead of once per test."""
        self.overrides = {"RetryIntervalSeconds": "1", "ImageMaxAttempts": "2", **parameter_overrides}
        self.suffix = suffix or uuid.uuid4().hex[:8]
        self.table = f"jobs-{self.suffix}"
        self.artifacts_bucket = f"artifacts-{self.suffix}"
        self.inbox_bucket = f"inbox-{self.suffix}"
        self.handlers: dict[str, Any] = {}
        self.invocations: list[tuple[str, dict[str, Any]]] = []
        self.crash_next: dict[str, int] = {}

    # ------------------------------------------------------------------ setup
    def deploy(self) -> Pipeline:
        self.s3 = _client("s3")
        self.ddb = _client("dynamodb")
        self.sns = _client("sns")
        self.sqs = _client("sqs")
        self.sfn = _client("stepfunctions")
        self.lam = _client("lambda")
        iam = _client("iam")
        for bucket in (self.artifacts_bucket, self.inbox_bucket):
            self.s3.create_bucket(Bucket=bucket)
        # as template.yaml: every upload to the inbox is its own version, and its event names it
        self.s3.put_bucket_versioning(Bucket=self.inbox_bucket, VersioningConfiguration={"Status": "Enabled"})
        template = load_template()
        table = template["Resources"]["JobsTable"]["Properties"]  # keys and the open-jobs index as deployed
        self.ddb.create_table(
            TableName=self.table,
            AttributeDefinitions=table["AttributeDefinitions"],
            KeySchema=table["KeySchema"],
            GlobalSecondaryIndexes=table["GlobalSecondaryIndexes"],
            BillingMode="PAY_PER_REQUEST",
        )
        self.admission_table = f"admission-{self.suffix}"
        admission = template["Resources"]["AdmissionTable"]["Properties"]  # as deployed (issue 34)
        self.ddb.create_table(
            TableName=self.admission_table,
            AttributeDefinitions=admission["AttributeDefinitions"],
            KeySchema=admission["KeySchema"],
            BillingMode="PAY_PER_REQUEST",
        )
        self.success_topic = self.sns.create_topic(Name=f"video-ok-{self.suffix}")["TopicArn"]
        self.error_topic = self.sns.create_topic(Name=f"video-err-{self.suffix}")["TopicArn"]
        self.events_topic = self.sns.create_topic(Name=f"job-events-{self.suffix}")["TopicArn"]
        self.events_queue = self.sqs.create_queue(QueueName=f"consumer-{self.suffix}")["QueueUrl"]
        queue_arn = self.sqs.get_queue_attributes(QueueUrl=self.events_queue, AttributeNames=["QueueArn"])[
            "Attributes"
        ]["QueueArn"]
        self.sns.subscribe(TopicArn=self.events_topic, Protocol="sqs", Endpoint=queue_arn)
        role = iam.create_role(RoleName=f"fn-{self.suffix}", AssumeRolePolicyDocument="{}")["Role"]["Arn"]

        zipped = io.BytesIO()
        with zipfile.ZipFile(zipped, "w") as archive:
            archive.writestr("handler.py", "def handler(event, context):\n    return event\n")
        arns = {}
        for name in FUNCTIONS:
            arns[name] = self.lam.create_function(
                FunctionName=f"{name}-{self.suffix}",
                Runtime="python3.13",
                Role=role,
                Handler="handler.handler",
                Code={"ZipFile": zipped.getvalue()},
            )["FunctionArn"]
        for topic in (self.success_topic, self.error_topic):
            self.sns.subscribe(TopicArn=topic, Protocol="lambda", Endpoint=arns["async_result"])

        parameters = {
            name: str(spec.get("Default", "")) for name, spec in template["Parameters"].items()
        } | self.overrides

        folders = {logical: function_folder(fn) for logical, fn in serverless_functions(template).items()}

        def resolve(value: dict[str, Any]) -> str:
            return arns[folders[value["Fn::GetAtt"][0]]]

        subs = state_machine_substitutions(template, "PipelineStateMachine", resolve, parameters)
        definition = render_definition(definition_file(template, "PipelineStateMachine").read_text(), subs)
        self.state_machine = self.sfn.create_state_machine(
            name=f"pipeline-{self.suffix}", definition=json.dumps(definition), roleArn=role
        )["stateMachineArn"]

        os.environ.update(
            {
                "JOBS_TABLE": self.table,
                "ADMISSION_TABLE": self.admission_table,
                "ARTIFACTS_BUCKET": self.artifacts_bucket,
                "STATE_MACHINE_ARN": self.state_machine,
                "JOB_EVENTS_TOPIC_ARN": self.events_topic,
                "IMAGE_ENDPOINT_NAME": "image-endpoint",
                "VIDEO_ENDPOINT_NAME": "video-endpoint",
                "VIDEO_MODEL_ID": "Wan-AI/Wan2.1-VACE-1.3B-diffusers",
                "IMAGE_MODEL_ID": "black-forest-labs/FLUX.2-klein-4B",
                "JOB_DEADLINE_SECONDS": parameters["JobDeadlineSeconds"],
            }
        )
        _product_clients_for_moto()
        for name in FUNCTIONS:
            self.handlers[name] = _load_handler(name, self.suffix)
        self.image_endpoint = FakeImageEndpoint()
        self.video_endpoint = FakeVideoEndpoint(self.artifacts_bucket)
        self.handlers["generate_image"].endpoint = self.image_endpoint
        self.handlers["invoke_video"].endpoint = self.video_endpoint
        # Admission: the endpoints' instances in service as DescribeEndpoint would say (capacity = instances x the
        # per-instance concurrency); many by default, so a test that is not about admission never waits.
        self.instances = FakeInstances()
        for name in ("wait_for_slot", "heal_admission"):
            self.handlers[name].gate.instances = self.instances
        self.heal_admission()  # the pools exist before the first job, as once the schedule has run on a stack
        return self

    def heal_admission(self) -> dict[str, Any]:
        """One run of admission's healing schedule (EventBridge would invoke it every minute)."""
        return self.handlers["heal_admission"].handler({}, Context("heal_admission"))

    def lambda_patch(self) -> Callable[..., tuple[str, bool, str]]:
        """Replacement for ``LambdaFunction._invoke_lambda``: run our handler in-process."""
        pipeline = self

        def invoke(function: LambdaFunction, event: Any = None) -> tuple[str, bool, str]:
            name = function.function_name.rsplit("-", 1)[0]
            payload = json.loads(event) if isinstance(event, (str, bytes)) else (event or {})
            payload = _aws_shaped_sns(payload)
            pipeline.invocations.append((name, payload))
            try:
                if pipeline.crash_next.get(name):
                    pipeline.crash_next[name] -= 1
                    raise RuntimeError(f"injected crash in {name}")
                result = pipeline.handlers[name].handler(payload, Context(function.function_name))
                return json.dumps(result), False, ""
            except Exception as exc:
                body = {"errorMessage": str(exc), "errorType": type(exc).__name__, "stackTrace": []}
                return json.dumps(body), True, ""

        return invoke

    # ------------------------------------------------------------------ driving
    def api(
        self, method: str, path: str, body: Any = None, headers: dict[str, str] | None = None, caller: str = "tester"
    ) -> dict:
        raw = body if isinstance(body, str) or body is None else json.dumps(body)
        response = self.handlers["api"].handler(api_event(method, path, raw, headers, caller=caller), Context("api"))
        response["json"] = json.loads(response["body"]) if response.get("body") else None
        return response

    def s3_event(self, key: str, body: bytes, sequencer: str = "0A1B2C3D4E5F", bucket: str | None = None) -> dict:
        """Upload ``body`` and return the ObjectCreated event S3 sends for that upload (its version and ETag)."""
        bucket = bucket or self.inbox_bucket
        put = self.s3.put_object(Bucket=bucket, Key=key, Body=body)
        return s3_put_event(
            bucket,
            key,
            size=len(body),
            etag=put["ETag"].strip('"'),
            sequencer=sequencer,
            version_id=put.get("VersionId"),
        )

    def job(self, job_id: str) -> dict[str, Any]:
        return self.api("GET", f"/jobs/{job_id}")["json"]

    def wait(self, predicate: Callable[[], Any], timeout: float = 30.0, what: str = "condition") -> Any:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                value = predicate()
            except RuntimeError as exc:
                # The poll reads moto's in-memory table on the test's thread while a handler writes the same item on
                # one of moto's threads; moto copies the item without a lock, so the read can fail with "dictionary
                # changed size during iteration" (make test, 2026-12-02). On AWS a read is atomic: poll again.
                if "changed size during iteration" not in str(exc):
                    raise
                value = None
            if value:
                return value
            time.sleep(0.1)
        raise AssertionError(f"timed out after {timeout}s waiting for {what}")

    def wait_rendering(self, job_id: str) -> dict[str, Any]:
        def queued() -> bool:
            item = self.ddb.get_item(TableName=self.table, Key={"job_id": {"S": job_id}}).get("Item", {})
            return "async_invocation" in item and "task_token" in item

        self.wait(queued, what=f"job {job_id} to queue its video")
        return next(c for c in self.video_endpoint.calls if c["inference_id"] == job_id)

    def execution_arn(self, job_id: str) -> str:
        """The ARN of the execution the job's record names (each record names its own: job id + random suffix)."""
        item = self.ddb.get_item(TableName=self.table, Key={"job_id": {"S": job_id}}, ConsistentRead=True)["Item"]
        name = item["execution_name"]["S"] if "execution_name" in item else job_id
        return self.state_machine.replace(":stateMachine:", ":execution:") + f":{name}"

    def execution(self, job_id: str, timeout: float = 45.0) -> dict[str, Any]:
        arn = self.execution_arn(job_id)

        def finished() -> dict[str, Any] | None:
            description = self.sfn.describe_execution(executionArn=arn)
            return description if description["status"] != "RUNNING" else None

        return self.wait(finished, timeout, what=f"execution {job_id} to finish")

    def async_location(self, job_id: str) -> dict[str, str]:
        item = self.ddb.get_item(TableName=self.table, Key={"job_id": {"S": job_id}})["Item"]
        return {k: v["S"] for k, v in item["async_invocation"]["M"].items()}

    def notification(self, job_id: str, status: str, **extra: Any) -> dict[str, Any]:
        where = self.async_location(job_id)
        body: dict[str, Any] = {
            "awsRegion": REGION,
            "eventTime": "2026-11-29T12:00:10.000Z",
            "receivedTime": "2026-11-29T12:00:01.000Z",
            "invocationStatus": status,
            "requestParameters": {
                "accept": "video/mp4",
                "contentType": "multipart/form-data",
                "endpointName": "video-endpoint",
                "inputLocation": f"s3://{self.artifacts_bucket}/jobs/{job_id}/video-request.multipart",
            },
            "inferenceId": job_id,
            "eventVersion": "1.0",
            "eventSource": "aws:sagemaker",
            "eventName": "InferenceResult",
        }
        if status == "Completed":
            body["responseParameters"] = {"contentType": "video/mp4", "outputLocation": where["output_location"]}
        else:
            body["failureLocation"] = where["failure_location"]
        body.update(extra)
        return body

    def write_output(self, job_id: str, data: bytes) -> None:
        where = self.async_location(job_id)["output_location"]
        bucket, key = where.removeprefix("s3://").split("/", 1)
        self.s3.put_object(Bucket=bucket, Key=key, Body=data)

    def write_failure(self, job_id: str, text: str) -> None:
        where = self.async_location(job_id)["failure_location"]
        bucket, key = where.removeprefix("s3://").split("/", 1)
        self.s3.put_object(Bucket=bucket, Key=key, Body=text.encode())

    def publish_notification(self, job_id: str, status: str, **extra: Any) -> None:
        topic = self.success_topic if status == "Completed" else self.error_topic
        self.sns.publish(TopicArn=topic, Message=json.dumps(self.notification(job_id, status, **extra)))

    def consumer_events(
        self, expect: int = 1, timeout: float = 10.0, *, progress: bool = False
    ) -> list[dict[str, Any]]:
        """Job events as a consumer subscribed to the job-events topic receives them (the terminal ones; with
        ``progress`` also job.image_ready and job.queued)."""
        events: list[dict[str, Any]] = []
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            messages = self.sqs.receive_message(
                QueueUrl=self.events_queue, MaxNumberOfMessages=10, WaitTimeSeconds=0
            ).get("Messages", [])
            for message in messages:
                envelope = json.loads(message["Body"])
                event = json.loads(envelope["Message"])
                event["_attributes"] = {k: v["Value"] for k, v in envelope.get("MessageAttributes", {}).items()}
                if progress or event.get("event_type") not in ("job.image_ready", "job.queued"):
                    events.append(event)
                self.sqs.delete_message(QueueUrl=self.events_queue, ReceiptHandle=message["ReceiptHandle"])
            if len(events) >= expect and not messages:
                break
            time.sleep(0.1)
        return events

    def stop_executions(self, timeout: float = 10.0) -> None:
        """Stop running executions and wait (bounded) until none runs, so no thread outlives the mock."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            running = [e for e in self.executions() if e["status"] == "RUNNING"]
            if not running:
                return
            for execution in running:
                # moto may not have started the execution's worker yet: try again on the next round.
                with contextlib.suppress(Exception):
                    self.sfn.stop_execution(executionArn=execution["executionArn"])
            time.sleep(0.2)

    def executions(self) -> list[dict[str, Any]]:
        return self.sfn.list_executions(stateMachineArn=self.state_machine)["executions"]

    def history_errors(self, job_id: str) -> list[str]:
        arn = self.execution_arn(job_id)
        history = self.sfn.get_execution_history(executionArn=arn, maxResults=1000)["events"]
        return [
            details.get("error", "")
            for event in history
            for key, details in event.items()
            if key.endswith("FailedEventDetails") or key.endswith("TimedOutEventDetails")
        ]


def api_event(
    method: str,
    path: str,
    body: str | None,
    headers: dict[str, str] | None = None,
    *,
    is_base64: bool = False,
    caller: str | None = "tester",
) -> dict[str, Any]:
    """An API Gateway HTTP API (payload 2.0) event; ``caller=None`` leaves out the IAM identity."""
    from urllib.parse import parse_qsl

    path, _, query = path.partition("?")
    context: dict[str, Any] = {
        "accountId": ACCOUNT,
        "apiId": "local",
        "domainName": "localhost",
        "http": {"method": method, "path": path, "protocol": "HTTP/1.1", "sourceIp": "127.0.0.1"},
        "requestId": str(uuid.uuid4()),
        "routeKey": f"{method} {path}",
        "stage": "$default",
    }
    if caller is not None:
        # As API Gateway reports an IAM user: its ARN and its unique id (the scope: omnireel.core.caller)
        user_id = "AIDA" + hashlib.sha256(caller.encode()).hexdigest()[:17].upper()
        arn = f"arn:aws:iam::{ACCOUNT}:user/{caller}"
        context["authorizer"] = {"iam": {"accountId": ACCOUNT, "userArn": arn, "userId": user_id, "callerId": user_id}}
    event: dict[str, Any] = {
        "version": "2.0",
        "routeKey": f"{method} {path}",
        "rawPath": path,
        "rawQueryString": query,
        "headers": {"content-type": "application/json", **{k.lower(): v for k, v in (headers or {}).items()}},
        "requestContext": context,
        "body": body,
        "isBase64Encoded": is_base64,
    }
    if query:
        event["queryStringParameters"] = dict(parse_qsl(query, keep_blank_values=True))
    return event


def s3_put_event(
    bucket: str, key: str, *, size: int, etag: str, sequencer: str, version_id: str | None = None
) -> dict[str, Any]:
    """An S3 ObjectCreated:Put notification for one object (``key`` as S3 sends it: URL-encoded; ``versionId`` only
    for a versioning-enabled bucket, as S3 sends it)."""
    obj: dict[str, Any] = {"key": key, "size": size, "eTag": etag, "sequencer": sequencer}
    if version_id and version_id != "null":
        obj["versionId"] = version_id
    return {
        "Records": [
            {
                "eventVersion": "2.1",
                "eventSource": "aws:s3",
                "awsRegion": REGION,
                "eventTime": "2026-11-29T12:00:00.000Z",
                "eventName": "ObjectCreated:Put",
                "s3": {
                    "s3SchemaVersion": "1.0",
                    "configurationId": "prompts",
                    "bucket": {"name": bucket, "arn": f"arn:aws:s3:::{bucket}"},
                    "object": obj,
                },
            }
        ]
    }


def _aws_shaped_sns(payload: Any) -> Any:
    """moto 5.2.5 fills SNS->Lambda records with placeholders ("EXAMPLE" URLs, a fake TopicArn) that
    fail Powertools' SnsModel; AWS sends real URLs. Give the records AWS's shape, keep the message."""
    if not isinstance(payload, dict) or not isinstance(payload.get("Records"), list):
        return payload
    for record in payload["Records"]:
        sns = record.get("Sns") if isinstance(record, dict) else None
        if isinstance(sns, dict):
            for key in ("UnsubscribeUrl", "SigningCertUrl"):
                if not str(sns.get(key, "")).startswith("https://"):
                    sns[key] = f"https://sns.{REGION}.amazonaws.com/example"
    return payload


def speed_patches(set_attribute: Callable[..., None]) -> None:
    """The local stack's speed patches that apply in process (omnireel_local.patches.speed), for the in-process
    harnesses: the same answers as moto's, less CPU per test. ``set_attribute``: monkeypatch's setattr. (Patch 21 is
    applied when this module is imported, below.)"""
    from omnireel_local.patches import speed

    speed.patch_sns_signing_key(set_attribute)  # patch 20: one SNS signing key, not one per subscription
    speed.patch_program_cache(set_attribute)  # patch 22: one parse per definition, shared by the executions
    speed.patch_update_expression_cache(set_attribute)  # patch 24: one parse per UpdateExpression
    speed.patch_update_traversal(set_attribute)  # patch 33: UpdateItem's validation finds each handler once
    speed.patch_json_path_cache(set_attribute)  # patch 34: one parse per JSONPath string
    speed.patch_condition_lex_cache(set_attribute)  # patch 35: one lexing per condition expression
    speed.patch_update_checks_once(set_attribute)  # patch 36: UpdateItem's shape checks once per expression and names
    speed.patch_update_tree_copy(set_attribute)  # patch 37: its tree copied node by node
    speed.patch_query_candidates(set_attribute)  # patch 38: a Query reads its partition, not the whole table sorted


def serialize_metrics(setattr_: Callable[..., None]) -> None:
    """Let the handlers share Powertools' metric set safely while moto runs them on its threads.

    On AWS a function's process runs one invocation at a time. Here the handlers run in-process, on the test's thread
    and on moto's Step Functions threads, and Powertools keeps one metric set per process (a class-level dict that every
    ``Metrics`` shares). With metrics disabled (tests/conftest.py) nothing flushes it, so values piled up across tests
    until a metric reached Powertools' 100 values; ``add_metric`` then serialised the set, iterating it while another
    thread's handler added a name: "RuntimeError: dictionary changed size during iteration" (CI, 2026-12-01). So the
    set is emptied when a test's (or a module's) pipeline fixture is set up, and one ``add_metric`` runs at a time.
    ``setattr_``: monkeypatch's setattr.
    """
    from omnireel.runtime.observability import metrics

    metrics.clear_metrics()
    lock = threading.Lock()
    add_metric = metrics.provider.add_metric

    def add_metric_one_at_a_time(*args: Any, **kwargs: Any) -> None:
        with lock:
            add_metric(*args, **kwargs)

    setattr_(metrics.provider, "add_metric", add_metric_one_at_a_time)


@functools.cache
def _client(service: str) -> Any:
    """The harness's own client of ``service``, one per process: a botocore client holds no state of a deployment,
    and moto's stubber (registered on every client once moto is imported) serves whichever mock is running. Creating
    the seven clients again for each test was about a third of a deployment's CPU."""
    return boto3.client(service, region_name=REGION)


def _product_clients_for_moto() -> None:
    """The handlers' clients (``omnireel.aws.clients``, one per service and process as in a Lambda environment) are
    kept from the previous deployment in this process when they still point at moto: AWS's own endpoints in REGION
    (moto's stubber answers them), no ``AWS_ENDPOINT_URL``. Anything else (a test that pointed them at a local stack
    and did not clear them) is dropped, so the next handler creates them again for this deployment."""
    from omnireel.aws import clients

    if clients.client.cache_info().currsize and not any(k.startswith("AWS_ENDPOINT_URL") for k in os.environ):
        metas = [clients.client(service).meta for service in _handler_services()]
        if all(meta.region_name == REGION and meta.endpoint_url.endswith(".amazonaws.com") for meta in metas):
            return
    clients.client.cache_clear()


@functools.cache
def _handler_services() -> tuple[str, ...]:
    """Every service the product's code makes a client of (``client("<service>")``, omnireel.aws.clients), read from
    its source, so a new one is checked without editing this file."""
    call = re.compile(r"""\bclient\("([a-z0-9-]+)"\)""")
    sources = [*(ROOT / "layers" / "omnireel" / "omnireel").rglob("*.py"), *(ROOT / "functions").rglob("*.py")]
    return tuple(sorted({service for path in sources for service in call.findall(path.read_text())}))


def _load_handler(name: str, suffix: str) -> Any:
    path = ROOT / "functions" / name / "handler.py"
    module_name = f"omnireel_fn_{name}_{suffix}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    return module


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()
