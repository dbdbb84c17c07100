"""Every change the local stack makes to moto, in one place, pinned to the moto version it was written for.

moto gives us the AWS wire protocol and state for every service, and (with ``execute_state_machine``) a real ASL
interpreter. Where it stops short of what the pipeline relies on in AWS, a patch below fills the gap. Each patch says
why it exists. ``apply()`` refuses to run on any other moto version: the patched methods are internals, and a silent
mismatch would make the local stack lie. To move to a new moto, re-verify each patch and bump ``MOTO_VERSION``.
"""

from __future__ import annotations

import inspect
import json
import logging
import re
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Any
from urllib.parse import unquote, unquote_plus

import moto

from . import fault_injection
from .lambda_runner import Invocation, InvokeResult, LambdaRunner
from .sagemaker_hosting import SageMakerHosting

log = logging.getLogger("omnireel_local.moto")

MOTO_VERSION = "5.2.5"
# Lambda retries failed asynchronous invocations twice, after about 1 and 2 minutes; locally 1 s and 2 s.
ASYNC_RETRY_DELAYS_S = (1.0, 2.0)

_applied = False
# Characters AWS refuses in a Step Functions execution name (patch 2).
_INVALID_EXECUTION_NAME = re.compile(r"[\s<>{}\[\]?*\"#%\\^|~`$&,;:/\x00-\x1f\x7f-\x9f]")


class MotoVersionMismatch(RuntimeError):
    pass


# The IAM action AWS checks for a key request that names a version (the Service Authorization Reference for S3).
VERSIONED_S3_ACTIONS = {
    "GetObject": "GetObjectVersion",
    "GetObjectAcl": "GetObjectVersionAcl",
    "PutObjectAcl": "PutObjectVersionAcl",
    "GetObjectTagging": "GetObjectVersionTagging",
    "PutObjectTagging": "PutObjectVersionTagging",
    "DeleteObjectTagging": "DeleteObjectVersionTagging",
    "DeleteObject": "DeleteObjectVersion",
}


def _is_version_id(text: str) -> bool:
    if text == "null":
        return True
    try:
        uuid.UUID(text)
    except ValueError:
        return False
    return True


def _iso_now() -> str:
    now = datetime.now(UTC)
    return now.strftime("%Y-%m-%dT%H:%M:%S.") + f"{now.microsecond // 1000:03d}Z"


class AsyncInvoker:
    """Event-driven (asynchronous) Lambda invocations, as the Lambda service runs them for S3 and SNS.

    The caller's request returns at once; the function runs on a background thread; a failed invocation is retried
    ``MaximumRetryAttempts`` times (EventInvokeConfig, default 2) and then sent to its ``OnFailure`` destination.
    """

    def __init__(self, run: Callable[[Any, str], InvokeResult], sqs_send: Callable[[str, str], None]):
        self._run = run
        self._sqs_send = sqs_send
        self._pool = ThreadPoolExecutor(max_workers=8, thread_name_prefix="lambda-async")

    def submit(self, fn: Any, payload: str, source: str) -> None:
        self._pool.submit(self._invoke, fn, payload, source)

    def submit_held(self, fn: Any, payload: str, source: str, released: Callable[[], bool], max_s: float) -> None:
        """Deliver once ``released()`` (or after ``max_s`` at the latest): a late event, as S3 may deliver one."""

        def hold_then_invoke() -> None:
            deadline = time.monotonic() + max_s
            while not released() and time.monotonic() < deadline:
                time.sleep(0.05)
            self._invoke(fn, payload, source)

        self._pool.submit(hold_then_invoke)

    def _invoke(self, fn: Any, payload: str, source: str) -> None:
        config = fn.event_invoke_config[0].config if getattr(fn, "event_invoke_config", None) else {}
        retries = int(config.get("MaximumRetryAttempts", 2))
        result: InvokeResult | None = None
        attempt = 0
        for attempt in range(1, retries + 2):
            try:
                result = self._run(fn, payload)
            except Exception:
                log.exception("async invocation of %s crashed", fn.function_name)
                result = None
            if result is not None and not result.errored:
                return
            log.warning(
                "async invocation of %s from %s failed (attempt %d of %d): %s",
                fn.function_name,
                source,
                attempt,
                retries + 1,
                (result.payload if result else "crash")[:300],
            )
            if attempt <= retries:
                time.sleep(ASYNC_RETRY_DELAYS_S[min(attempt - 1, len(ASYNC_RETRY_DELAYS_S) - 1)])
        destination = (config.get("DestinationConfig") or {}).get("OnFailure", {}).get("Destination")
        if not destination:
            return
        record = {
            "version": "1.0",
            "timestamp": _iso_now(),
            "requestContext": {
                "requestId": str(uuid.uuid4()),
                "functionArn": f"{fn.function_arn}:$LATEST",
                "condition": "RetriesExhausted",
                "approximateInvokeCount": attempt,
            },
            "requestPayload": json.loads(payload),
            "responseContext": {"statusCode": 200, "executedVersion": "$LATEST", "functionError": "Unhandled"},
            "responsePayload": json.loads(result.payload) if result else None,
        }
        if destination.split(":")[2] == "sqs":
            self._sqs_send(destination, json.dumps(record))
            log.warning("async invocation of %s: retries exhausted, sent to %s", fn.function_name, destination)

    def shutdown(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)


def apply(runner: LambdaRunner, hosting: SageMakerHosting, sqs_send: Callable[[str, str], None]) -> AsyncInvoker:
    """Install the patches into this process (the one that runs the moto server). Idempotent per process."""
    global _applied
    if moto.__version__ != MOTO_VERSION:
        raise MotoVersionMismatch(
            f"omnireel's local stack patches moto {MOTO_VERSION} internals, but moto {moto.__version__} is installed; "
            f"install moto=={MOTO_VERSION} (requirements/) or re-verify omnireel_local/moto_patches.py"
        )
    if _applied:
        raise RuntimeError("moto patches are already applied in this process")

    from moto.awslambda.models import LambdaFunction
    from moto.s3 import notifications as s3_notifications
    from moto.sagemaker.models import FakeEndpointConfig
    from moto.sagemakerruntime.responses import SageMakerRuntimeResponse
    from moto.sns.models import Subscription
    from moto.stepfunctions.parser.models import StepFunctionsParserBackend

    def run(fn: Any, payload: str) -> InvokeResult:
        env = dict((fn.environment_vars or {}) if hasattr(fn, "environment_vars") else {})
        logging_config = getattr(fn, "logging_config", None) or {}
        return runner.invoke(
            Invocation(
                function_name=fn.function_name,
                function_arn=fn.function_arn,
                handler=fn.handler,
                runtime=fn.run_time or "python3.13",
                timeout_s=float(fn.timeout or 3),
                memory_mb=int(fn.memory_size or 128),
                environment=env,
                payload=payload,
                log_group=logging_config.get("LogGroup") if isinstance(logging_config, dict) else None,
            )
        )

    invoker = AsyncInvoker(run, sqs_send)

    # 1. Lambda: moto runs function code only in Docker (lambci images). We have no Docker, and we want the real
    #    handler code with warm execution environments, so every invocation path (Invoke API, Step Functions task,
    #    SNS, S3, SQS event sources) is routed through LambdaRunner. Returns moto's (payload, errored, logs) triple;
    #    `errored` sets the function-error header, which is what Step Functions turns into Retry/Catch errors.
    def _invoke_lambda(self: Any, event: Any = None) -> tuple[str, bool, str]:
        payload = event if isinstance(event, str) else json.dumps(event if event is not None else {})
        result = run(self, payload)
        return result.payload, result.errored, ""

    LambdaFunction._invoke_lambda = _invoke_lambda

    # 2. Step Functions (execute mode): StartExecution without `name` creates an execution literally named "None",
    #    and a second unnamed start then fails. AWS generates a UUID name; so do we.
    #    Named starts need no change (verified for moto 5.2.5; tests/e2e/test_executions.py pins it, so an upgrade
    #    that loosens it fails): as on AWS, a name stays taken after its execution closes (AWS: 90 days; locally for
    #    the stack's life), and a repeat is idempotent only for the same name and input while the execution runs -
    #    a closed name or another input answers ExecutionAlreadyExists (StateMachine._handle_name_input_idempotency).
    #    moto does not validate the name at all ("TODO: validate name format"); AWS answers InvalidName for more than
    #    80 characters, whitespace, brackets, wildcards, control characters and " # % \ ^ | ~ ` $ & , ; : /.
    #    (Fault injection, off by default: `sfn_start_failure_rate` throttles starts; fault_injection.py.)
    original_start = StepFunctionsParserBackend.start_execution

    def start_execution(self: Any, state_machine_arn: str, name: Any = None, *args: Any, **kwargs: Any) -> Any:
        from moto.core.exceptions import AWSError

        name = name or str(uuid.uuid4())
        if len(name) > 80 or _INVALID_EXECUTION_NAME.search(name):
            raise AWSError(f"Invalid Name: '{name}'", exception_type="InvalidName", status=400)
        if fault_injection.start_execution_failure(name):
            raise AWSError("Rate exceeded (injected)", exception_type="ThrottlingException", status=400)
        return original_start(self, state_machine_arn, name, *args, **kwargs)

    StepFunctionsParserBackend.start_execution = start_execution

    # 3. SageMaker runtime: moto's InvokeEndpoint returns canned results (and never checks the endpoint), and its
    #    InvokeEndpointAsync writes canned data to a random bucket with no SNS notification. Route both to the local
    #    hosting shim, which calls the container emulator and implements the async queue/S3/SNS contract.
    #    (moto takes a handler's HTTP status from headers["status"], not from the returned tuple.)
    def _with_status(response: tuple[int, dict[str, str], Any]) -> tuple[int, dict[str, Any], Any]:
        status, headers, body = response
        return status, {**headers, "status": status}, body

    def invoke_endpoint(self: Any) -> Any:
        name = unquote(self.path.split("/")[2])
        body = self.raw_body if isinstance(self.raw_body, bytes) else (self.raw_body or "").encode()
        return _with_status(hosting.invoke(name, body, dict(self.headers.items())))

    def invoke_endpoint_async(self: Any) -> Any:
        name = unquote(self.path.split("/")[2])
        return _with_status(hosting.invoke_async(name, dict(self.headers.items())))

    SageMakerRuntimeResponse.invoke_endpoint = invoke_endpoint
    SageMakerRuntimeResponse.invoke_endpoint_async = invoke_endpoint_async

    # 4. SageMaker control plane: moto validates InstanceType against a stale allow-list (no ml.g5/g6/g6e/p5) and
    #    rejects variants that use InstancePools instead of InstanceType (a newer API field). The template uses both;
    #    accept any ml.* type and instance pools so the endpoint config round-trips exactly as declared.
    def validate_production_variants(self: Any, production_variants: list[dict[str, Any]]) -> None:
        from moto.sagemaker.exceptions import ValidationError

        for variant in production_variants:
            types = [variant["InstanceType"]] if "InstanceType" in variant else []
            types += [pool.get("InstanceType", "") for pool in variant.get("InstancePools") or []]
            if not types and "ServerlessConfig" not in variant:
                raise ValidationError(message="ProductionVariant needs InstanceType, InstancePools or ServerlessConfig")
            for instance_type in types:
                if not str(instance_type).startswith("ml."):
                    raise ValidationError(message=f"Value '{instance_type}' at 'instanceType' is not an ml.* type")

    FakeEndpointConfig.validate_production_variants = validate_production_variants

    # 5. SNS -> Lambda: moto invokes the function synchronously inside Publish, with a fake event (TopicArn
    #    "arn:aws:sns:EXAMPLE", a fixed MessageId, made-up MessageAttributes). AWS invokes asynchronously (retries, then
    #    the on-failure destination) with the real topic, message id and attributes. Synchronous delivery also risks
    #    deadlocks when the function calls back into the server that is still handling the Publish.
    original_publish = Subscription.publish

    def publish(self: Any, message: str, message_id: str, subject: str | None = None, *args: Any, **kwargs: Any) -> Any:
        if self.protocol != "lambda":
            return original_publish(self, message, message_id, subject, *args, **kwargs)
        attributes = kwargs.get("message_attributes") or (args[0] if args else None) or {}
        if self._filter_policy_matcher is not None and not self._filter_policy_matcher.matches(attributes, message):
            return None
        from moto.awslambda.utils import get_backend

        parts = self.endpoint.split(":")
        qualifier = parts[7] if len(parts) == 8 else None
        fn = get_backend(self.account_id, parts[3]).get_function(parts[6], qualifier)
        event = {
            "Records": [
                {
                    "EventSource": "aws:sns",
                    "EventVersion": "1.0",
                    "EventSubscriptionArn": self.arn,
                    "Sns": {
                        "Type": "Notification",
                        "MessageId": message_id,
                        "TopicArn": self.topic.arn,
                        "Subject": subject,
                        "Message": message,
                        "Timestamp": _iso_now(),
                        "SignatureVersion": "1",
                        "Signature": "LOCAL",
                        "SigningCertUrl": "http://localhost/local.pem",
                        "UnsubscribeUrl": f"http://localhost/?Action=Unsubscribe&SubscriptionArn={self.arn}",
                        # moto has already turned DataType/StringValue into SNS's delivered Type/Value.
                        "MessageAttributes": attributes,
                    },
                }
            ]
        }
        invoker.submit(fn, json.dumps(event), f"sns:{self.topic.arn}")
        return None

    Subscription.publish = publish

    # 6. S3 -> Lambda: same as SNS: moto runs the notification synchronously inside PutObject and swallows errors;
    #    AWS invokes asynchronously with retries and the on-failure destination. moto's event also lacks fields AWS
    #    always sends (object.sequencer - Powertools' S3 event class requires it -, userIdentity, requestParameters,
    #    responseElements, bucket.ownerIdentity); add them. It also lacks object.versionId, which AWS sends for a
    #    versioning-enabled bucket (only there) and which names the exact version the event is about; the inbox
    #    reads that version, so an overwrite before the read cannot swap the prompt. Object fields are added where
    #    moto builds the event, which still holds the stored key (its version).
    original_s3_event = s3_notifications._get_s3_event

    def _get_s3_event(event_name: str, bucket: Any, key: Any, notification_id: str) -> dict[str, Any]:
        event = original_s3_event(event_name, bucket, key, notification_id)
        for record in event["Records"]:
            obj = record["s3"]["object"]
            if bucket.is_versioned and key.version_id not in (None, "null"):
                obj["versionId"] = key.version_id
            obj.setdefault("sequencer", f"{time.time_ns():018X}")
        return event

    s3_notifications._get_s3_event = _get_s3_event

    def _invoke_awslambda(account_id: str, event_body: Any, fn_arn: str, region_name: str) -> None:
        from moto.awslambda.utils import get_backend

        for record in event_body.get("Records", []):
            record.setdefault("userIdentity", {"principalId": f"AWS:{account_id}"})
            record.setdefault("requestParameters", {"sourceIPAddress": "127.0.0.1"})
            record.setdefault(
                "responseElements", {"x-amz-request-id": uuid.uuid4().hex[:16].upper(), "x-amz-id-2": "local"}
            )
            s3 = record.get("s3", {})
            s3.get("bucket", {}).setdefault("ownerIdentity", {"principalId": account_id})
            s3.get("object", {}).setdefault("sequencer", f"{time.time_ns():018X}")

        try:
            fn = get_backend(account_id, region_name).get_function(fn_arn)
        except Exception:  # noqa: BLE001 - a missing function is silently skipped, as moto (and S3) do
            log.warning("S3 notification for a missing function %s", fn_arn)
            return
        s3 = (event_body.get("Records") or [{}])[0].get("s3", {})
        s3_key = f"{s3.get('bucket', {}).get('name')}/{s3.get('object', {}).get('key')}"
        object_key = unquote_plus(s3.get("object", {}).get("key", ""))
        held_s = fault_injection.s3_event_hold(object_key)  # off by default (fault_injection.py), as is:
        deliveries = 2 if fault_injection.duplicate_s3_event(s3_key) else 1
        for _ in range(deliveries):
            if held_s is None:
                invoker.submit(fn, json.dumps(event_body), "s3")
                continue
            fault_injection.record("s3_event_hold", object_key, max_s=held_s)
            released = lambda: fault_injection.s3_event_hold(object_key) is None  # noqa: E731
            invoker.submit_held(fn, json.dumps(event_body), "s3", released, held_s)

    s3_notifications._invoke_awslambda = _invoke_awslambda

    # 6b. S3 authorization of versioned requests: moto names the IAM action of a key request from the first matching
    #     query parameter, so GET ?tagging&versionId is checked as s3:GetObjectVersion, PUT ?tagging&versionId as
    #     s3:PutObjectTagging and HEAD ?versionId as s3:GetObject. AWS authorizes a request that names a version as
    #     the version's action (s3:GetObjectVersion, s3:GetObjectVersionTagging, s3:PutObjectVersionTagging, ...)
    #     and does not require the current-version action; with IAM enforced, the local stack must ask the same.
    from moto.s3.responses import S3Response

    set_action = S3Response._set_action

    def _set_action(self: Any, action_resource_type: str, method: str, querystring: dict[str, Any]) -> None:
        if action_resource_type != "KEY" or "versionId" not in querystring:
            return set_action(self, action_resource_type, method, querystring)
        set_action(self, action_resource_type, method, {k: v for k, v in querystring.items() if k != "versionId"})
        self.data["Action"] = VERSIONED_S3_ACTIONS.get(self.data["Action"], self.data["Action"])
        return None

    S3Response._set_action = _set_action

    # 6c. A malformed version id: AWS answers 400 InvalidArgument ("Invalid version id specified"); moto looks the
    #     string up and answers 404 NoSuchVersion. moto's version ids are UUIDs (or "null" for an unversioned
    #     object), so anything else is malformed here.
    from moto.s3.exceptions import InvalidVersion
    from moto.s3.models import S3Backend

    get_object = S3Backend.get_object

    def _get_object(self: Any, bucket: str, key: str, version_id: Any = None, *args: Any, **kwargs: Any) -> Any:
        if version_id is not None and not _is_version_id(str(version_id)):
            raise InvalidVersion(str(version_id))
        return get_object(self, bucket, key, version_id, *args, **kwargs)

    S3Backend.get_object = _get_object

    # 7. Request bodies: werkzeug parses any request whose Content-Type is multipart/form-data as an HTML form, so
    #    an S3 PutObject of a multipart document (the staged video request, ContentType carries its boundary) is
    #    stored EMPTY (and its checksum no longer matches). Only S3's browser-upload POST is a form; parse forms for
    #    POST requests only and keep every other body byte-for-byte.
    from moto.core.request import Request as MotoRequest

    form_parsing = MotoRequest.want_form_data_parsed

    def want_form_data_parsed(self: Any) -> bool:
        return self.method == "POST" and bool(form_parsing.fget(self))

    MotoRequest.want_form_data_parsed = property(want_form_data_parsed)

    # 8. Step Functions SendTaskFailure: moto's response handler drops the `cause` parameter, so a callback task's
    #    failure reaches Catch/ResultPath as {"Error": ..., "Cause": null}; the job's failure reason is in the cause.
    from moto.core.responses import EmptyResult
    from moto.stepfunctions.responses import StepFunctionResponse

    def send_task_failure(self: Any) -> Any:
        backend = self.stepfunction_backend
        kwargs = {"error": self._get_param("error")}
        if "cause" in inspect.signature(backend.send_task_failure).parameters:  # the executing backend takes it
            kwargs["cause"] = self._get_param("cause")
        backend.send_task_failure(self._get_param("taskToken"), **kwargs)
        return EmptyResult()

    StepFunctionResponse.send_task_failure = send_task_failure

    # 9. EventBridge: moto treats a rule without an event pattern as matching EVERY event, so a schedule rule (the
    #    job deadline's FailOverdueJobs, run locally by schedules.py) received each PutEvents of a job event and moto
    #    failed the whole PutEvents with a 500 ("Expr not defined" for its Lambda target); the publisher then retried
    #    and SNS delivered the job event twice. In AWS a schedule rule is triggered by its schedule only.
    from moto.events.models import Rule

    original_send_to_targets = Rule.send_to_targets

    def send_to_targets(self: Any, event: Any, *args: Any, **kwargs: Any) -> Any:
        if getattr(self, "scheduled_expression", None) and not self.event_pattern.get_pattern():
            return None
        return original_send_to_targets(self, event, *args, **kwargs)

    Rule.send_to_targets = send_to_targets

    _applied = True
    log.info(
        "moto %s patched: lambda runner, sfn names, sagemaker hosting, async sns/s3 -> lambda, schedule rules",
        MOTO_VERSION,
    )
    return invoker


__all__ = ["MOTO_VERSION", "AsyncInvoker", "MotoVersionMismatch", "apply"]
