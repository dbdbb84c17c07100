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
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any
from urllib.parse import unquote, unquote_plus

import moto

from . import fault_injection, iam_decision, iam_policy, sigv4
from .identities import ServiceCredentials, session_expired
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


# SQS event source mappings created since the patches were applied: (uuid, spec); run by event_sources.SqsPollers.
SQS_EVENT_SOURCES: list[tuple[str, dict[str, Any]]] = []


class AsyncInvoker:
    """Event-driven (asynchronous) Lambda invocations, as the Lambda service runs them for S3 and SNS.

    The caller's request returns at once; the function runs on a background thread; a failed invocation is retried
    ``MaximumRetryAttempts`` times (EventInvokeConfig, default 2) and then sent to its ``OnFailure`` destination.
    """

    def __init__(self, run: Callable[[Any, str], InvokeResult], sqs_send: Callable[[str, str], None]):
        self._run = run
        self._sqs_send = sqs_send
        self._pool = ThreadPoolExecutor(max_workers=8, thread_name_prefix="lambda-async")

    def run(self, fn: Any, payload: str) -> InvokeResult:
        """A synchronous invocation (what an event source mapping's poller does)."""
        return self._run(fn, payload)

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


def apply(
    runner: LambdaRunner,
    hosting: SageMakerHosting,
    sqs_send: Callable[[str, str], None],
    service_credentials: ServiceCredentials,
) -> AsyncInvoker:
    """Install the patches into this process (the one that runs the moto server). Idempotent per process."""
    global _applied
    if moto.__version__ != MOTO_VERSION:
        raise MotoVersionMismatch(
            f"omnireel's local stack patches moto {MOTO_VERSION} internals, but moto {moto.__version__} is installed; "
            f"install moto=={MOTO_VERSION} (requirements/) or re-verify omnireel_local/moto_patches.py"
        )
    if _applied:
        raise RuntimeError("moto patches are already applied in this process")

    # 21. Before anything imports moto's Step Functions interpreter: ``moto.batch`` runs its ``__init__`` only when
    #    something it defines is used (``defer_batch_package``). Speed only: ~1 s of CPU off every stack start.
    defer_batch_package()

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
                role_arn=str(getattr(fn, "role", "") or ""),
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
            pools = variant.get("InstancePools")
            # AWS: instance pools *replace* InstanceType (SageMaker's heterogeneous-endpoint guide), 1 to 5 of them.
            if "InstanceType" in variant and pools:
                raise ValidationError(message="ProductionVariant: specify InstanceType or InstancePools, not both")
            if pools is not None and not 1 <= len(pools) <= 5:
                raise ValidationError(message=f"ProductionVariant: InstancePools has {len(pools)} entries (1 to 5)")
            types = [variant["InstanceType"]] if "InstanceType" in variant else []
            types += [pool.get("InstanceType", "") for pool in pools or []]
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

    # 13. EventBridge: moto treats a rule without an event pattern as matching EVERY event, so a schedule rule (the
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

    # 14. SageMaker CreateEndpoint: moto marks every endpoint InService at once, with nothing behind it, so an endpoint
    #    created outside the template (the AWS sample's deploy.py against the local stack) reported InService while
    #    every invocation failed. AWS keeps it Creating until the container passes its health check (or Failed). The
    #    hosting shim decides: Creating until a container serves the variant's model (the template's come from
    #    `local up`; a DLC-image model gets an emulator on demand), Failed with a FailureReason otherwise.
    from moto.core.utils import utcnow
    from moto.sagemaker.models import SageMakerModelBackend

    original_create_endpoint = SageMakerModelBackend.create_endpoint

    def create_endpoint(self: Any, endpoint_name: str, *args: Any, **kwargs: Any) -> Any:
        endpoint = original_create_endpoint(self, endpoint_name, *args, **kwargs)
        config = self.describe_endpoint_config(endpoint.endpoint_config_name)
        model_name = (config.get("ProductionVariants") or [{}])[0].get("ModelName", "")
        model = self._models.get(model_name)
        container = (getattr(model, "primary_container", None) or (getattr(model, "containers", None) or [{}])[0]) or {}

        def set_status(status: str, reason: str | None = None) -> None:
            endpoint.endpoint_status = status
            endpoint.failure_reason = reason
            endpoint.last_modified_time = utcnow()

        hosting.endpoint_created(
            endpoint_name,
            model_name,
            str(container.get("Image", "")),
            {k: str(v) for k, v in (container.get("Environment") or {}).items()},
            set_status,
        )
        return endpoint

    SageMakerModelBackend.create_endpoint = create_endpoint

    # 14b. SageMaker DeleteEndpoint: moto removes the endpoint at once, so a script's delete-wait never polls. AWS
    #    passes through ``Deleting`` (DescribeEndpoint answers it; the runtime no longer serves it) before
    #    DescribeEndpoint answers ValidationError. The hosting shim keeps it Deleting for a bounded time.
    original_delete_endpoint = SageMakerModelBackend.delete_endpoint

    def delete_endpoint(self: Any, endpoint_name: str) -> None:
        endpoint = self.endpoints.get(endpoint_name)
        if endpoint is None:
            return original_delete_endpoint(self, endpoint_name)  # ValidationError "Could not find endpoint"
        if endpoint.endpoint_status == "Deleting":
            return None  # already on its way out (AWS's answer to a second delete is not documented)

        def set_status(status: str, reason: str | None = None) -> None:
            endpoint.endpoint_status = status
            endpoint.failure_reason = reason
            endpoint.last_modified_time = utcnow()

        def finish() -> None:
            if self.endpoints.get(endpoint_name) is endpoint:
                original_delete_endpoint(self, endpoint_name)

        hosting.endpoint_deleting(endpoint_name, set_status, finish)
        return None

    SageMakerModelBackend.delete_endpoint = delete_endpoint

    # 15. Lambda SQS event source mappings: moto delivers inline, inside SendMessage (the sender blocks for the
    #    consumer's whole run, one message per invocation, no partial batch responses, no MaximumConcurrency). The
    #    mapping is created as moto stores it (Get/ListEventSourceMappings work) but detached from the queue, and the
    #    local poller fleet (event_sources.py) runs it as the Lambda service does.
    from moto.awslambda.models import LambdaBackend

    original_create_esm = LambdaBackend.create_event_source_mapping

    def create_event_source_mapping(self: Any, spec: dict[str, Any]) -> Any:
        from moto.sqs.models import sqs_backends

        esm = original_create_esm(self, spec)
        if ":sqs:" in str(spec.get("EventSourceArn")):
            for queue in sqs_backends[self.account_id][self.region_name].queues.values():
                if queue.queue_arn == spec["EventSourceArn"]:
                    queue.lambda_event_source_mappings.pop(esm.function_arn, None)
            SQS_EVENT_SOURCES.append((esm.uuid, dict(spec)))
        return esm

    LambdaBackend.create_event_source_mapping = create_event_source_mapping

    # 16. DynamoDB TransactWriteItems: moto deep-copies every table a transaction touches (O(table size) per call),
    #    and when a condition fails it puts those copies back - discarding the writes other requests made meanwhile.
    #    Under concurrent writers the copy itself fails ("dictionary changed size during iteration": a 500). AWS
    #    isolates a transaction at the item level. The patch serialises the backend's writes with one lock (which also
    #    makes a single conditional write's check-and-set atomic, as on AWS), checks every condition before writing,
    #    applies the items only if all hold, and restores just those items if an apply fails. (Batch counts, issue 14.)
    _patch_dynamodb_transactions()

    # 17. Step Functions StopExecution: moto marks the program stopped but a callback task (.waitForTaskToken) keeps
    #    waiting for its token or heartbeat (minutes), so the execution stayed RUNNING after DELETE /jobs/{id}
    #    stopped it. AWS ends a stopped execution at once (ABORTED): interrupt the execution's callback waits too
    #    (``patch_stop_execution``; the in-process pipeline harness applies it as well).
    patch_stop_execution()

    # 18. Step Functions callback tasks with HeartbeatSeconds: moto sets up the heartbeat wait only after the task's
    #    Lambda invocation returns. A SendTaskHeartbeat sent by that Lambda itself answered InvalidToken, and a
    #    SendTaskSuccess / SendTaskFailure that arrived while the Lambda was still running was recorded but never seen:
    #    the wait started afterwards, timed out after HeartbeatSeconds and the task failed States.HeartbeatTimeout.
    #    AWS accepts a task's token from the moment the task starts (InvokeVideo heartbeats and queues the
    #    render itself, and the render's notification can answer before its invocation returns).
    patch_early_callbacks()

    # 19. moto's server resolves every request's service afresh: ``get_backend_for_host`` lists moto's package
    #    directory (one stat per service folder, ~150) and then tries its URL patterns one by one. The answer depends
    #    only on the host, and folders and patterns are fixed for the process: it is cached per host. Speed only (the
    #    same backend is chosen); it was ~6 % of the stack process's CPU, every SDK call paying it.
    patch_server_dispatch()

    # 20. SNS message signing: moto generated a new 2048-bit RSA key for every subscription (~0.1-0.3 s of CPU at its
    #    first delivery). AWS signs every message of a region with that region's one signing certificate. One key per
    #    process here (``patch_sns_signing_key``; the in-process pipeline harness applies it too).
    patch_sns_signing_key()

    # 22. Step Functions parses the state machine's definition again for every execution (moto's ANTLR parser in pure
    #    Python: ~18 ms of CPU for pipeline.asl.json, holding the GIL while the front door answers the POST /jobs that
    #    started it). The parsed program is an evaluation tree whose per-execution state lives in the execution's
    #    Environment, so one parse per definition is shared (``patch_program_cache``). Speed only.
    patch_program_cache()

    # 23. moto serialises every response with a generic, model-driven serializer that tries several attribute aliases
    #    for every member of every AttributeValue: 4-8 ms of CPU for one job record returned by UpdateItem (ALL_NEW),
    #    on every transition of every job. DynamoDB's item operations return plain wire-format dicts, so they are
    #    written straight to JSON along the same output shape (``patch_dynamodb_responses``); anything the fast path
    #    does not recognise goes through moto's serializer. Speed only: a test compares both on many results.
    patch_dynamodb_responses()

    # 24. DynamoDB UpdateItem parses its UpdateExpression twice per call (the handler checks its names and values, the
    #    backend applies it), ~0.5-1.5 ms of CPU each for a job transition's expression, and the job store sends the
    #    same few expressions all day. moto never changes a parsed expression (its validator works on a deep copy), so
    #    one parse per expression string is kept (``patch_update_expression_cache``). Speed only.
    patch_update_expression_cache()

    # 25. SQS SendMessage reads one queue attribute (ContentBasedDeduplication) through ``Queue.attributes``, which
    #    also counts the queue's messages three times (every message's visibility and delay): each send cost
    #    O(messages in the queue). The durable queue `omnireel events` reads keeps every job event until someone
    #    consumes it, so every job.* publish slowed down as a local stack ran more jobs. During a send the attribute
    #    is read directly (``patch_sqs_send_attributes``). Speed only.
    patch_sqs_send_attributes()

    # 26. DynamoDB reads see the live item: moto's GetItem/Query/Scan return the stored item and serialise it after the
    #    backend call, while a concurrent UpdateItem may be adding an attribute to it ("dictionary changed size during
    #    iteration": a 500, seen in CI). DynamoDB answers from a consistent item. Every DynamoDB request is handled,
    #    answer included, under the lock patch 16's writes take (``patch_dynamodb_atomic_requests``; the in-process
    #    pipeline harness applies it too). Requests were serialised by the GIL anyway: no I/O happens inside.
    patch_dynamodb_atomic_requests()

    # 27. SQS ChangeMessageVisibility: AWS refuses a new timeout that would end more than 12 hours after the receive
    #    that produced the receipt handle (InvalidParameterValue, "Total VisibilityTimeout for the message is beyond
    #    the limit [43200 seconds]"); moto measures the 12 hours from the message's *send*, so it refused any change
    #    on a message older than 12 hours and accepted 43,200 s seconds after a late receive. Measured from the
    #    receive here (``patch_sqs_visibility_limit``); the batch call answers the refusal per entry, as AWS does.
    patch_sqs_visibility_limit()

    # 28. Fault hook (off by default; fault_injection.py ``dynamodb_throttle``): a DynamoDB request whose body matches
    #    answers ProvisionedThroughputExceededException, as a hot partition does on AWS, so a test can fail one
    #    record's bookkeeping (a webhook attempt's UpdateItem) and not the others (``patch_dynamodb_fault_hook``).
    patch_dynamodb_fault_hook()

    # 29. SQS sizes as AWS counts them (issue 25 item 9): a message is the UTF-8 bytes of its body plus each message
    #    attribute's name, type and value, at most the queue's MaximumMessageSize (262,144 bytes unless the queue sets
    #    it); a SendMessageBatch's messages together at most 1 MiB. moto counted characters (a body of 4-byte
    #    characters passed at 4x the limit) and defaulted MaximumMessageSize to 1 MiB (``patch_sqs_message_sizes``).
    patch_sqs_message_sizes()

    # 30. Fault hooks on SQS (off by default; fault_injection.py): ``sqs_delivery_drop`` loses SNS -> SQS deliveries
    #    (a batch job's terminal event that never reaches BatchEventsQueue), ``sqs_send_failure`` throttles sends to
    #    a queue (``patch_sqs_fault_hooks``). Nothing changes while the fault config is empty.
    patch_sqs_fault_hooks()

    _apply_iam(service_credentials)

    _applied = True
    log.info(
        "moto %s patched: lambda runner, sfn names/stop, sagemaker hosting, async sns/s3/sqs -> lambda, schedules, IAM",
        MOTO_VERSION,
    )
    return invoker


_DISPATCH_CACHE_MAX = 4096  # distinct hosts (virtual-hosted S3 buckets each have one): far more than a stack uses


def patch_server_dispatch(set_attribute: Callable[[Any, str, Any], None] = setattr) -> None:
    """Patch 19: cache ``DomainDispatcherApplication.get_backend_for_host`` per (dispatcher, host)."""
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication

    original = DomainDispatcherApplication.get_backend_for_host
    if getattr(original, "omnireel_cached", False):
        return
    cache: dict[tuple[int, str | None], Any] = {}

    def get_backend_for_host(self: Any, host: str | None) -> Any:
        key = (id(self), host)
        if key in cache:  # the caller (get_application) holds the dispatcher's lock
            return cache[key]
        backend = original(self, host)
        if len(cache) < _DISPATCH_CACHE_MAX:
            cache[key] = backend
        return backend

    get_backend_for_host.omnireel_cached = True  # type: ignore[attr-defined]
    set_attribute(DomainDispatcherApplication, "get_backend_for_host", get_backend_for_host)


def defer_batch_package() -> None:
    """Patch 21: register ``moto.batch`` without running its ``__init__`` until something it defines is used.

    moto's Step Functions interpreter imports ``moto.batch.utils`` at import time (one enum, for its Batch service
    task). Importing a submodule runs the package's ``__init__``, which imports Batch's models and with them all of
    moto's EC2 (AMI and instance-type catalogues): ~1 s of CPU at every stack start, for a service the stack never
    calls. The package module is created from its spec and registered; its ``__init__`` runs on the first lookup of a
    name it defines (``moto.batch.batch_backends``, which moto's server and ``mock_aws`` use to reach Batch), so Batch
    still works. No-op when ``moto.batch`` is already imported.
    """
    import importlib.util
    import sys

    if "moto.batch" in sys.modules:
        return
    spec = importlib.util.find_spec("moto.batch")
    if spec is None or spec.loader is None:
        return
    package = importlib.util.module_from_spec(spec)
    loader = spec.loader
    lock = threading.Lock()

    def __getattr__(name: str) -> Any:  # PEP 562: only for names the module does not have yet
        with lock:
            if package.__dict__.get("__getattr__") is __getattr__:  # not loaded yet (loading removes this hook)
                del package.__dict__["__getattr__"]
                loader.exec_module(package)
        try:
            return package.__dict__[name]
        except KeyError:
            raise AttributeError(f"module 'moto.batch' has no attribute {name!r}") from None

    package.__dict__["__getattr__"] = __getattr__
    sys.modules["moto.batch"] = package
    moto.batch = package  # type: ignore[attr-defined]  # as the import system binds a submodule on its parent


def patch_sns_signing_key(set_attribute: Callable[[Any, str, Any], None] = setattr) -> None:
    """Patch 20 (see ``apply``): every SNS subscription signs with one key per process, as a region does on AWS."""

    from cryptography.hazmat.primitives.asymmetric import rsa
    from moto.sns.models import Subscription

    if getattr(Subscription.private_key, "omnireel_shared", False):
        return
    keys: list[rsa.RSAPrivateKey] = []
    lock = threading.Lock()

    def private_key(self: Any) -> rsa.RSAPrivateKey:
        with lock:
            if not keys:
                keys.append(rsa.generate_private_key(public_exponent=65537, key_size=2048))
            return keys[0]

    private_key.omnireel_shared = True  # type: ignore[attr-defined]
    set_attribute(Subscription, "private_key", private_key)


# DynamoDB operations whose results are plain wire-format dicts (moto's DynamoResult): the fast path of patch 23.
# (Not DeleteItem: moto adds a legacy ConsumedCapacityUnits key its serializer drops; the fast path would decline.)
FAST_DYNAMODB_OPERATIONS = frozenset({"GetItem", "PutItem", "UpdateItem", "Query", "Scan"})


class _NotFast(Exception):
    """A value the fast DynamoDB response path does not handle: moto's own serializer answers instead."""


def _plain_json(value: Any, shape: Any) -> Any:
    """``value`` as moto's JSON serializer writes it for ``shape``, for plain dicts, lists and scalars only."""
    import base64

    kind = shape.type_name
    if kind == "structure":
        if not isinstance(value, dict) or shape.is_document_type:
            raise _NotFast
        members = shape.members
        if not members.keys() >= value.keys():  # a key moto's serializer would look up through an alias
            raise _NotFast
        out = {}
        for name, member in members.items():
            item = value.get(name)
            if item is not None:
                out[member.serialization.get("name", name)] = _plain_json(item, member)
        return out
    if kind == "map":
        if not isinstance(value, dict):
            raise _NotFast
        return {str(key): _plain_json(item, shape.value) for key, item in value.items()}
    if kind == "list":
        if not isinstance(value, list):
            raise _NotFast
        return [_plain_json(item, shape.member) for item in value]
    if kind == "string":
        if not isinstance(value, str):
            raise _NotFast
        return value
    if kind == "boolean":
        if not isinstance(value, bool):
            raise _NotFast
        return value
    if kind in ("integer", "long"):
        if isinstance(value, bool) or not isinstance(value, int):
            raise _NotFast
        return value
    if kind in ("float", "double"):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise _NotFast
        return float(value)
    if kind == "blob":
        if not isinstance(value, (bytes, str)):
            raise _NotFast
        raw = value.encode("utf-8") if isinstance(value, str) else value
        return base64.b64encode(raw).strip().decode("utf-8")
    raise _NotFast  # timestamps and anything else: moto's serializer


def fast_dynamodb_response(operation_model: Any, result: Any) -> tuple[int, dict[str, str], str] | None:
    """The (status, headers, body) moto's JSON serializer would give ``result`` of a DynamoDB item operation, or None
    when the result holds anything but plain dicts, lists, strings, numbers, booleans and bytes."""
    if operation_model.name not in FAST_DYNAMODB_OPERATIONS or operation_model.has_event_stream_output:
        return None
    shape = operation_model.output_shape
    try:
        body = _plain_json(result, shape) if shape is not None else {}
    except _NotFast:
        return None
    version = operation_model.service_model.metadata.get("jsonVersion", "1.0")
    status = operation_model.http.get("responseCode", 200)
    return status, {"Content-Type": f"application/x-amz-json-{version}"}, json.dumps(body)


def patch_dynamodb_responses(set_attribute: Callable[[Any, str, Any], None] = setattr) -> None:
    """Patch 23 (see ``apply``): DynamoDB item operations' results are written to JSON directly."""
    from moto import settings as moto_settings
    from moto.core.utils import get_service_model
    from moto.dynamodb.responses import DynamoHandler, DynamoResult

    original = DynamoHandler.serialized
    if getattr(original, "omnireel_fast", False):
        return

    def serialized(self: Any, action_result: Any) -> Any:
        if isinstance(action_result, DynamoResult) and not moto_settings.PRETTIFY_RESPONSES:
            operation = get_service_model(self.boto3_service_name).operation_model(self._get_action())
            fast = fast_dynamodb_response(operation, action_result.result)
            if fast is not None:
                status, headers, body = fast
                headers.update(self.response_headers)
                return status, headers, body
        return original(self, action_result)

    serialized.omnireel_fast = True  # type: ignore[attr-defined]
    set_attribute(DynamoHandler, "serialized", serialized)


_EXPRESSION_CACHE_MAX = 512  # distinct update expressions (the job and batch stores use a few dozen)


def patch_update_expression_cache(set_attribute: Callable[[Any, str, Any], None] = setattr) -> None:
    """Patch 24 (see ``apply``): ``UpdateExpressionParser.make`` returns one parsed tree per expression string.

    Safe to share because nothing in moto changes a tree ``make`` returned: the handler only reads its clauses and the
    backend's validator deep-copies it before resolving names and values into it. A string that does not parse raises
    as before and is not kept.
    """
    from moto.dynamodb.parsing.expressions import UpdateExpressionParser

    original = UpdateExpressionParser.make
    if getattr(original, "omnireel_cached", False):
        return
    parsed = lru_cache(maxsize=_EXPRESSION_CACHE_MAX)(original.__func__)

    def make(cls: Any, expression_str: str) -> Any:
        return parsed(cls, expression_str)

    make.omnireel_cached = True  # type: ignore[attr-defined]
    set_attribute(UpdateExpressionParser, "make", classmethod(make))


def patch_sqs_send_attributes(set_attribute: Callable[[Any, str, Any], None] = setattr) -> None:
    """Patch 25 (see ``apply``): inside ``SQSBackend.send_message``, ``Queue.attributes`` is only the attribute a send
    reads (``ContentBasedDeduplication``, as moto writes it: ``"true"``/``"false"``), not every attribute with three
    message counts. Everywhere else (GetQueueAttributes, ...) it is moto's, counts included."""

    from moto.sqs.models import Queue, SQSBackend

    original_send = SQSBackend.send_message
    if getattr(original_send, "omnireel_cheap_attributes", False):
        return
    full_attributes = Queue.attributes.fget
    sending = threading.local()

    def attributes(self: Any) -> dict[str, Any]:
        if not getattr(sending, "active", False):
            return full_attributes(self)
        value = self.content_based_deduplication
        return {"ContentBasedDeduplication": str(value).lower() if isinstance(value, bool) else value}

    def send_message(self: Any, *args: Any, **kwargs: Any) -> Any:
        outer = getattr(sending, "active", False)
        sending.active = True
        try:
            return original_send(self, *args, **kwargs)
        finally:
            sending.active = outer

    send_message.omnireel_cheap_attributes = True  # type: ignore[attr-defined]
    set_attribute(Queue, "attributes", property(attributes))
    set_attribute(SQSBackend, "send_message", send_message)


SQS_MAX_VISIBILITY_S = 43200  # a message's visibility ends at most 12 hours after the receive (AWS)


def patch_sqs_visibility_limit(set_attribute: Callable[[Any, str, Any], None] = setattr) -> None:
    """Patch 27 (see ``apply``): each receipt handle remembers when its receive happened, and ChangeMessageVisibility
    refuses a timeout ending more than ``SQS_MAX_VISIBILITY_S`` after it, with AWS's error."""

    from moto.core.utils import unix_time_millis
    from moto.sqs.exceptions import InvalidParameterValue, ReceiptHandleIsInvalid
    from moto.sqs.models import Message, SQSBackend

    original_received = Message.mark_received
    if getattr(original_received, "omnireel_receive_times", False):
        return

    def mark_received(self: Any, visibility_timeout: int | None = None) -> None:
        original_received(self, visibility_timeout)
        times = self.__dict__.setdefault("omnireel_received_ms", {})
        times[self.receipt_handle] = unix_time_millis()

    def change_message_visibility(self: Any, queue_name: str, receipt_handle: str, visibility_timeout: int) -> None:
        queue = self.get_queue(queue_name)
        for message in queue._messages:
            if not message.had_receipt_handle(receipt_handle):
                continue
            received_ms = message.__dict__.get("omnireel_received_ms", {}).get(receipt_handle)
            if received_ms is None:  # received before the patch (cannot happen in the stack): moto's send time
                received_ms = message.sent_timestamp
            if unix_time_millis() + int(visibility_timeout) * 1000 - received_ms > SQS_MAX_VISIBILITY_S * 1000:
                raise InvalidParameterValue(
                    f"Value {visibility_timeout} for parameter VisibilityTimeout is invalid. Reason: Total "
                    f"VisibilityTimeout for the message is beyond the limit [{SQS_MAX_VISIBILITY_S} seconds]"
                )
            message.change_visibility(visibility_timeout)
            if message.visible and message in queue.pending_messages:
                queue.pending_messages.remove(message)
            return
        raise ReceiptHandleIsInvalid

    def change_message_visibility_batch(self: Any, queue_name: str, entries: list[dict[str, Any]]) -> Any:
        success, failed = [], []
        for entry in entries:
            try:
                timeout = int(entry["VisibilityTimeout"])
                if not 0 <= timeout <= SQS_MAX_VISIBILITY_S:
                    raise ValueError(timeout)
            except (KeyError, TypeError, ValueError):
                failed.append({"Id": entry.get("Id"), "SenderFault": True, "Code": "InvalidParameterValue",
                               "Message": "Visibility timeout invalid"})  # fmt: skip
                continue
            try:
                self.change_message_visibility(queue_name, entry["ReceiptHandle"], timeout)
            except (InvalidParameterValue, ReceiptHandleIsInvalid) as exc:
                failed.append({"Id": entry["Id"], "SenderFault": True, "Code": exc.code, "Message": exc.message})
            else:
                success.append(entry["Id"])
        return success, failed

    mark_received.omnireel_receive_times = True  # type: ignore[attr-defined]
    set_attribute(Message, "mark_received", mark_received)
    set_attribute(SQSBackend, "change_message_visibility", change_message_visibility)
    set_attribute(SQSBackend, "change_message_visibility_batch", change_message_visibility_batch)


# SQS's documented limits (docs/decisions.md "Batch queue payloads"): a queue that does not set MaximumMessageSize
# takes 262,144 bytes (256 KiB; CreateQueue's attribute reference); a SendMessageBatch's messages together (the sum of
# their sizes) at most 1,048,576 bytes (1 MiB; the SendMessageBatch reference).
SQS_DEFAULT_MAXIMUM_MESSAGE_SIZE = 262_144
SQS_MAXIMUM_BATCH_BYTES = 1_048_576


def sqs_message_size(body: str, attributes: dict[str, Any] | None) -> int:
    """A message's size as SQS counts it: the body's UTF-8 bytes plus, per message attribute, its name, data type and
    value (string: UTF-8 bytes; binary: the bytes)."""

    def size(value: Any) -> int:
        if value is None:
            return 0
        return len(value.encode("utf-8", "surrogatepass") if isinstance(value, str) else bytes(value))

    total = size(body)
    for name, attribute in (attributes or {}).items():
        total += size(name) + size(attribute.get("DataType"))
        total += size(attribute.get("StringValue")) + size(attribute.get("BinaryValue"))
    return total


def patch_sqs_message_sizes(set_attribute: Callable[[Any, str, Any], None] = setattr) -> None:
    """Patch 29 (see ``apply``): SendMessage refuses a message over the queue's MaximumMessageSize
    (``InvalidParameterValue``, AWS's code and wording) counted in bytes; SendMessageBatch refuses a call whose
    messages together exceed 1 MiB (``BatchRequestTooLong``) and, like SendMessage, any entry over the queue's limit;
    a queue created without MaximumMessageSize gets AWS's default, 262,144 bytes."""

    from moto.sqs.exceptions import BatchRequestTooLong, InvalidParameterValue
    from moto.sqs.models import Queue, SQSBackend

    if getattr(SQSBackend.send_message_batch, "omnireel_sizes", False):
        return
    original_init = Queue.__init__
    original_send = SQSBackend.send_message
    original_batch = SQSBackend.send_message_batch

    def init(self: Any, name: str, region: str, account_id: str, **kwargs: Any) -> None:
        kwargs.setdefault("MaximumMessageSize", SQS_DEFAULT_MAXIMUM_MESSAGE_SIZE)
        original_init(self, name, region, account_id, **kwargs)

    def check(queue: Any, body: str, attributes: dict[str, Any] | None) -> None:
        limit = int(queue.maximum_message_size)
        if sqs_message_size(body, attributes) > limit:
            raise InvalidParameterValue(
                f"One or more parameters are invalid. Reason: Message must be shorter than {limit} bytes."
            )

    def send_message(self: Any, queue_name: str, message_body: str, *args: Any, **kwargs: Any) -> Any:
        attributes = kwargs.get("message_attributes", args[0] if args else None)
        check(self.get_queue(queue_name), message_body, attributes)
        return original_send(self, queue_name, message_body, *args, **kwargs)

    def send_message_batch(self: Any, queue_name: str, entries: dict[str, dict[str, Any]]) -> Any:
        sizes = [sqs_message_size(e["MessageBody"], e.get("MessageAttributes")) for e in entries.values()]
        if sum(sizes) > SQS_MAXIMUM_BATCH_BYTES:
            raise BatchRequestTooLong(sum(sizes))  # moto's wording names its 1 MiB constant, AWS's limit
        return original_batch(self, queue_name, entries)  # each entry goes through send_message (checked above)

    send_message_batch.omnireel_sizes = True  # type: ignore[attr-defined]
    set_attribute(Queue, "__init__", init)
    set_attribute(SQSBackend, "send_message", send_message)
    set_attribute(SQSBackend, "send_message_batch", send_message_batch)


def patch_sqs_fault_hooks(set_attribute: Callable[[Any, str, Any], None] = setattr) -> None:
    """Patch 30 (see ``apply``): SNS -> SQS deliveries may be dropped and sends refused, as fault_injection.py says."""
    from moto.core.exceptions import AWSError
    from moto.sns.models import Subscription
    from moto.sqs.models import SQSBackend

    if getattr(Subscription.publish, "omnireel_delivery_faults", False):
        return
    original_publish = Subscription.publish
    original_send = SQSBackend.send_message
    original_batch = SQSBackend.send_message_batch

    def publish(self: Any, message: str, message_id: str, subject: str | None = None, *args: Any, **kwargs: Any) -> Any:
        if self.protocol == "sqs":
            attributes = kwargs.get("message_attributes") or (args[0] if args else None) or {}
            matcher = self._filter_policy_matcher
            if (matcher is None or matcher.matches(attributes, message)) and fault_injection.drop_sqs_delivery(
                self.endpoint.split(":")[-1]
            ):
                return None
        return original_publish(self, message, message_id, subject, *args, **kwargs)

    def refuse(queue_name: str) -> None:
        if fault_injection.sqs_send_failure(queue_name):
            raise AWSError("Rate exceeded (injected)", exception_type="RequestThrottled", status=400)

    def send_message(self: Any, queue_name: str, *args: Any, **kwargs: Any) -> Any:
        refuse(queue_name)
        return original_send(self, queue_name, *args, **kwargs)

    def send_message_batch(self: Any, queue_name: str, *args: Any, **kwargs: Any) -> Any:
        refuse(queue_name)
        return original_batch(self, queue_name, *args, **kwargs)

    publish.omnireel_delivery_faults = True  # type: ignore[attr-defined]
    set_attribute(Subscription, "publish", publish)
    set_attribute(SQSBackend, "send_message", send_message)
    set_attribute(SQSBackend, "send_message_batch", send_message_batch)


_PROGRAM_CACHE_MAX = 32  # distinct definitions (a stack has one state machine; updates add a few)


def patch_program_cache(set_attribute: Callable[[Any, str, Any], None] = setattr) -> None:
    """Patch 22 (see ``apply``): each state machine definition is parsed once per process, not once per execution.

    Sharing is safe because moto's evaluation components keep an execution's state in its ``Environment`` (its
    heap, stack, callbacks, event history), never on themselves. The one value a component creates lazily, its
    ``heap_key`` (the name its Retry counters are stored under in the environment's heap), is created for every
    component before the program is shared, so two executions that reach a Retry at once agree on its name.
    """

    from moto.stepfunctions.parser.asl.parse.asl_parser import AmazonStateLanguageParser
    from moto.stepfunctions.parser.backend.execution_worker import ExecutionWorker

    original = ExecutionWorker._get_evaluation_entrypoint
    if getattr(original, "omnireel_cached", False):
        return
    lock = threading.Lock()  # executions started together wait for the one parse instead of each parsing

    @lru_cache(maxsize=_PROGRAM_CACHE_MAX)
    def program(definition: str) -> Any:  # what the original does per execution, plus the heap keys
        parsed = AmazonStateLanguageParser.parse(definition)[0]
        fix_heap_keys(parsed)
        return parsed

    def _get_evaluation_entrypoint(self: Any) -> Any:
        with lock:
            return program(self._evaluation_details.state_machine_details.definition)

    _get_evaluation_entrypoint.omnireel_cached = True  # type: ignore[attr-defined]
    set_attribute(ExecutionWorker, "_get_evaluation_entrypoint", _get_evaluation_entrypoint)


def fix_heap_keys(program: Any) -> int:
    """Create the lazy ``heap_key`` of every evaluation component reachable from ``program``; returns how many."""
    from moto.stepfunctions.parser.asl.component.component import Component
    from moto.stepfunctions.parser.asl.component.eval_component import EvalComponent

    seen: set[int] = set()
    pending: list[Any] = [program]
    fixed = 0
    while pending:
        node = pending.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, (list, tuple, set, frozenset)):
            pending.extend(node)
        elif isinstance(node, dict):
            pending.extend(node.values())
        elif isinstance(node, Component):
            if isinstance(node, EvalComponent):
                _ = node.heap_key
                fixed += 1
            pending.extend(vars(node).values())
    return fixed


def patch_stop_execution(set_attribute: Callable[[Any, str, Any], None] = setattr) -> None:
    """Patch 17 (see ``apply``): a stopped execution ends ABORTED at once, also while a callback task waits.
    ``set_attribute``: as in ``patch_early_callbacks`` (the in-process integration tests undo it after each test)."""
    from moto.stepfunctions.parser.backend.execution import Execution as ParserExecution

    original_stop = ParserExecution.stop

    def stop(self: Any, stop_date: Any, error: Any, cause: Any) -> Any:
        result = original_stop(self, stop_date=stop_date, error=error, cause=cause)
        env = getattr(self.exec_worker, "env", None)
        pool = getattr(getattr(env, "callback_pool_manager", None), "_pool", {}) or {}
        for endpoint in list(pool.values()):
            endpoint.interrupt_all()
        return result

    set_attribute(ParserExecution, "stop", stop)

    # The interrupted wait then ends in an error, and moto's set_error / set_timed_out overwrite the stopped state
    # (the execution would end FAILED and run its Catch): in AWS a stopped execution stays ABORTED.
    from moto.stepfunctions.parser.asl.eval.environment import Environment as AslEnvironment
    from moto.stepfunctions.parser.asl.eval.program_state import ProgramStopped

    for name in ("set_error", "set_timed_out"):
        original = getattr(AslEnvironment, name)

        def unless_stopped(self: Any, *args: Any, _original: Any = original, **kwargs: Any) -> Any:
            if isinstance(self._program_state, ProgramStopped):
                return None
            return _original(self, *args, **kwargs)

        set_attribute(AslEnvironment, name, unless_stopped)


def patch_early_callbacks(set_attribute: Callable[[Any, str, Any], None] = setattr) -> None:
    """Patch 18 (see ``apply``); ``set_attribute`` lets the in-process integration tests apply it with pytest's
    ``monkeypatch.setattr`` (undone after each test)."""
    from moto.stepfunctions.parser.asl.eval.callback.callback import CallbackEndpoint

    original_setup = CallbackEndpoint.setup_heartbeat_endpoint

    def setup_heartbeat_endpoint(self: Any, heartbeat_seconds: int) -> Any:
        endpoint = original_setup(self, heartbeat_seconds=heartbeat_seconds)
        if self.get_outcome() is not None or getattr(self, "_omnireel_early_heartbeat", False):
            endpoint.notify()  # the answer (or a heartbeat) came while the task's Lambda was still running
        return endpoint

    def notify_heartbeat(self: Any) -> bool:
        endpoint = self._heartbeat_endpoint
        if endpoint is None:
            self._omnireel_early_heartbeat = True
            return True
        endpoint.notify()
        return True

    set_attribute(CallbackEndpoint, "setup_heartbeat_endpoint", setup_heartbeat_endpoint)
    set_attribute(CallbackEndpoint, "notify_heartbeat", notify_heartbeat)


# DynamoDB's one lock (patches 16 and 26): the backend's writes, and every request's handling with its answer.
_DYNAMODB_LOCK = threading.RLock()


def patch_dynamodb_atomic_requests(set_attribute: Callable[[Any, str, Any], None] = setattr) -> None:
    """Patch 26 (see ``apply``): each DynamoDB request is handled, its answer serialised, under ``_DYNAMODB_LOCK``."""
    from moto.dynamodb.responses import DynamoHandler

    original = DynamoHandler.call_action
    if getattr(original, "omnireel_atomic", False):
        return

    def call_action(self: Any) -> Any:
        with _DYNAMODB_LOCK:
            return original(self)

    call_action.omnireel_atomic = True  # type: ignore[attr-defined]
    set_attribute(DynamoHandler, "call_action", call_action)


def patch_dynamodb_fault_hook(set_attribute: Callable[[Any, str, Any], None] = setattr) -> None:
    """Patch 28 (see ``apply``): DynamoDB item requests consult ``fault_injection.dynamodb_throttle`` first."""
    from moto.dynamodb.exceptions import DynamodbException
    from moto.dynamodb.responses import DynamoHandler

    for action in ("get_item", "put_item", "update_item", "delete_item", "query", "transact_write_items"):
        original = getattr(DynamoHandler, action)
        if getattr(original, "omnireel_fault_hook", False):
            continue

        def hooked(self: Any, _original: Any = original) -> Any:
            raw = self.body
            body = raw.decode(errors="replace") if isinstance(raw, bytes) else raw if isinstance(raw, str) else ""
            body = body or json.dumps(raw, default=str)
            if fault_injection.dynamodb_throttle(body):
                raise DynamodbException(
                    "ProvisionedThroughputExceededException",
                    "The level of configured provisioned throughput for the table was exceeded (injected)",
                )
            return _original(self)

        hooked.omnireel_fault_hook = True  # type: ignore[attr-defined]
        set_attribute(DynamoHandler, action, hooked)


def _patch_dynamodb_transactions() -> None:
    """Patch 16 (see ``apply``)."""
    import copy

    from moto.dynamodb.comparisons import get_filter_expression
    from moto.dynamodb.exceptions import (
        MultipleTransactionsException,
        TooManyTransactionsException,
        TransactionCanceledException,
        TransactWriteSingleOpException,
    )
    from moto.dynamodb.models import DynamoDBBackend

    lock = _DYNAMODB_LOCK

    def serialised(original: Callable[..., Any]) -> Callable[..., Any]:
        def locked(self: Any, *args: Any, **kwargs: Any) -> Any:
            with lock:
                return original(self, *args, **kwargs)

        return locked

    for name in ("put_item", "update_item", "delete_item"):
        setattr(DynamoDBBackend, name, serialised(getattr(DynamoDBBackend, name)))

    def transact_write_items(self: Any, transact_items: list[dict[str, Any]]) -> None:
        if len(transact_items) > 100:
            raise TooManyTransactionsException()
        with lock:
            seen: set[tuple[str, str]] = set()
            plan: list[tuple[str, dict[str, Any], dict[str, Any], Any]] = []
            errors: list[tuple[str | None, str | None, dict[str, Any] | None]] = []
            for entry in transact_items:
                if len(entry) > 1:
                    raise TransactWriteSingleOpException
                op_type, op = next(iter(entry.items()))
                if op_type not in {"ConditionCheck", "Put", "Delete", "Update"}:
                    raise ValueError("Unsupported transaction operation")
                table = self.get_table(op["TableName"])
                if op_type == "Put":
                    key = {table.hash_key_attr: op["Item"][table.hash_key_attr]}
                    if table.range_key_attr is not None:
                        key[table.range_key_attr] = op["Item"][table.range_key_attr]
                else:
                    key = op["Key"]
                identity = (op["TableName"], json.dumps(key, sort_keys=True))
                if identity in seen:
                    raise MultipleTransactionsException()
                seen.add(identity)
                current = self.get_item(op["TableName"], key)
                condition = op.get("ConditionExpression")
                names, values = op.get("ExpressionAttributeNames"), op.get("ExpressionAttributeValues")
                if condition is not None and not get_filter_expression(condition, names, values).expr(current):
                    old = current.to_json()["Attributes"] if current is not None and (
                        op.get("ReturnValuesOnConditionCheckFailure") == "ALL_OLD"
                    ) else None  # fmt: skip
                    errors.append(("ConditionalCheckFailed", "The conditional request failed", old))
                else:
                    errors.append((None, None, None))
                plan.append((op_type, op, key, copy.deepcopy(current)))
            if any(code is not None for code, _, _ in errors):
                raise TransactionCanceledException(errors)
            applied: list[tuple[str, dict[str, Any], Any]] = []
            try:
                for op_type, op, key, before in plan:
                    names, values = op.get("ExpressionAttributeNames"), op.get("ExpressionAttributeValues")
                    if op_type == "Put":
                        self.put_item(op["TableName"], op["Item"])
                    elif op_type == "Delete":
                        self.delete_item(op["TableName"], key)
                    elif op_type == "Update":
                        self.update_item(op["TableName"], key, op["UpdateExpression"], names, values)
                    applied.append((op["TableName"], key, before))
            except Exception:
                for table_name, key, before in reversed(applied):
                    if before is None:
                        self.delete_item(table_name, key)
                    else:
                        self.put_item(table_name, before.to_json()["Attributes"])
                raise

    DynamoDBBackend.transact_write_items = transact_write_items


def enforce_iam(moto_endpoint: str) -> None:
    """Switch moto's authentication on: from now on every request must be signed by a known key and is authorised."""
    import httpx

    httpx.post(f"{moto_endpoint}/moto-api/reset-auth", content=b"0", timeout=10).raise_for_status()


# Signing names whose IAM action prefix differs (the credential scope names the signing name).
_IAM_PREFIX = {"monitoring": "cloudwatch", "email": "ses"}
# API operations whose IAM action has another name (Service Authorization Reference).
_ACTION_ALIASES = {
    "lambda:Invoke": "lambda:InvokeFunction",
    "lambda:InvokeWithResponseStream": "lambda:InvokeFunction",
    # SQS batch calls are authorised as their single-message action (there is no sqs:SendMessageBatch permission).
    "sqs:SendMessageBatch": "sqs:SendMessage",
    "sqs:DeleteMessageBatch": "sqs:DeleteMessage",
    "sqs:ChangeMessageVisibilityBatch": "sqs:ChangeMessageVisibility",
}
# Query-protocol and REST-XML services answer errors in XML; the others in JSON.
_JSON_SERVICES = {"dynamodb", "lambda", "states", "sagemaker", "events", "secretsmanager", "logs", "sqs"}


def _apply_iam(service_credentials: ServiceCredentials) -> None:
    """Patches 9-13: IAM enforcement as AWS does it (off until ``enforce_iam``). See iam_policy.py for the evaluator."""
    from urllib.parse import parse_qs, urlencode, urlparse

    from moto import settings as moto_settings
    from moto.core.authorization import ActionAuthenticatorMixin
    from moto.core.exceptions import JsonRESTError
    from moto.core.exceptions import _RESTError as RESTError
    from moto.iam import access_control
    from moto.s3.exceptions import S3ClientError
    from moto.s3.models import FakeBucket, s3_backends
    from moto.s3.responses import S3Response
    from moto.stepfunctions.parser.asl.utils import boto_client as sfn_boto_client

    def error(service: str, code: str, message: str, status: int) -> Exception:
        if service == "s3":
            return S3ClientError(code, message)  # its HTTP status comes from moto's S3 error table
        if service in _JSON_SERVICES:
            exc = JsonRESTError(code if code.endswith("Exception") else f"{code}Exception", message)
        else:
            exc = RESTError(code, message)
        exc.code = status
        return exc

    decide = iam_decision.decide  # the caller's policies and the resource's, one evaluator (iam_decision.py)

    def presigned_key(self: Any, query: dict[str, list[str]], account: str) -> tuple[str, dict[str, str]]:
        """Verify a presigned S3 URL (SigV4 query authentication); returns (access key id, headers).

        SigV2 (``AWSAccessKeyId=...&Signature=...``) is refused as S3 refuses it on buckets created after June 2020.
        """

        def first(name: str) -> str:
            return (query.get(name) or [""])[0]

        if "X-Amz-Credential" not in query:
            raise error("s3", "InvalidRequest", "The authorization mechanism you have provided is not supported. "
                        "Please use AWS4-HMAC-SHA256.", 400)  # fmt: skip
        token = first("X-Amz-Security-Token") or first("x-amz-security-token")
        pseudo_headers = {"X-Amz-Security-Token": token} if token else {}
        access_key_id = first("X-Amz-Credential").split("/", 1)[0]
        signed_at = datetime.strptime(first("X-Amz-Date"), "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC)
        expires = signed_at.timestamp() + int(first("X-Amz-Expires") or 0)
        if time.time() > expires:
            raise error("s3", "AccessDenied", "Request has expired", 403)
        try:
            key = access_control.create_access_key(account, "aws", access_key_id, pseudo_headers)
        except access_control.CreateAccessKeyFailure as exc:
            raise error("s3", "InvalidAccessKeyId" if exc.reason == "InvalidId" else "InvalidToken",
                        "The AWS Access Key Id you provided does not exist in our records.", 403) from exc  # fmt: skip
        url = f"http://{self.headers.get('Host', 'localhost')}{self.raw_path}?{urlparse(self.uri).query}"
        scope_region = ([*first("X-Amz-Credential").split("/"), "", "", ""])[2]
        expected = sigv4.presigned_signature(method=self.method, url=url, headers=list(self.headers.items()),
                                             credentials=key.create_credentials(), region=scope_region)  # fmt: skip
        if not sigv4.matches(expected, first("X-Amz-Signature")):
            raise error("s3", "SignatureDoesNotMatch", "The request signature we calculated does not match the "
                        "signature you provided. Check your key and signing method.", 403)  # fmt: skip
        return access_key_id, pseudo_headers

    def signature_matches(request: Any) -> bool:
        """The request's SigV4 header signature, verified by ``sigv4`` (botocore's canonical request, the body as
        received). moto hands some requests over transformed, so each spelling it may have made is tried: REST paths
        without their trailing slash (Lambda ListFunctions), and a form POST whose body the form parser consumed
        (its parameters re-encoded as moto does)."""
        authorization = request._headers["Authorization"]
        signed = request._get_string_between("SignedHeaders=", ",", authorization).split(";")
        given = request._get_string_between("Signature=", ",", authorization)
        headers = list(request._create_headers_for_aws_request(signed, request._headers).items())
        date = next((v for k, v in headers if k.lower() == "x-amz-date"), "")
        declared = next((v for k, v in headers if k.lower() == "x-amz-content-sha256"), None)
        host = next((v for k, v in headers if k.lower() == "host"), "localhost")
        credentials = request._access_key.create_credentials()
        path, _, query = request._path.partition("?")
        paths = [request._path] if path.endswith("/") else [request._path, f"{path}/" + (f"?{query}" if query else "")]
        bodies: list[bytes] = [_as_bytes(request._body)]
        if not request._body and request._method == "POST" and request._data:
            bodies.append(urlencode(list(request._data.items()), doseq=True).encode())
        for candidate in paths:
            for body in bodies:
                s3 = request._service == "s3"
                payload = sigv4.s3_payload_hash(declared, body) if s3 else sigv4.received_body_hash(body)
                if payload is None:
                    continue
                expected = sigv4.header_signature(
                    method=request._method, url=f"http://{host}{candidate}", headers=headers, body=body,
                    signed=signed, credentials=credentials, service=request._service, region=request._region,
                    amz_date=date, payload=payload,
                )  # fmt: skip
                if sigv4.matches(expected, given):
                    return True
        return False

    def _as_bytes(body: Any) -> bytes:
        if body is None:
            return b""
        return body.encode() if isinstance(body, str) else bytes(body)

    # 9. Authentication and authorisation of every request (moto's own evaluator: see iam_policy.py's docstring).
    #    SigV4 header auth with a known IAM user key or STS session (expired sessions refused: moto never expires
    #    them), presigned S3 URLs, unsigned requests refused; then identity + resource policies with Conditions.
    def authenticate(self: Any, iam_request_cls: type, resource: str = "*") -> None:
        if ActionAuthenticatorMixin.request_count < moto_settings.INITIAL_NO_AUTH_ACTION_COUNT:
            ActionAuthenticatorMixin.request_count += 1
            return
        if self.headers.get("X-Amz-Target") in ActionAuthenticatorMixin.PUBLIC_OPERATIONS:
            return
        s3 = iam_request_cls is access_control.S3IAMRequest
        parsed = urlparse(self.uri)
        path = self.raw_path + (f"?{parsed.query}" if parsed.query else "")
        account = self.current_account
        raw_action = self._get_action()
        raw_action = raw_action[0] if isinstance(raw_action, list) else raw_action
        if "Authorization" not in self.headers:
            query = parse_qs(parsed.query, keep_blank_values=True)
            if not (s3 and ("X-Amz-Credential" in query or "AWSAccessKeyId" in query)):
                service = "s3" if s3 else (self.service_name or "")
                raise error(service, "AccessDenied" if s3 else "MissingAuthenticationToken",
                            "Request is missing Authentication Token", 403)  # fmt: skip
            access_key_id, pseudo_headers = presigned_key(self, query, account)
            if session_expired(access_key_id, account):  # a URL cannot outlive the credentials that signed it
                raise error("s3", "ExpiredToken", "The provided token has expired.", 400)
            key = access_control.create_access_key(account, "aws", access_key_id, pseudo_headers)
            service_prefix = "s3"
        else:
            iam_request = iam_request_cls(
                account_id=account, method=self.method, path=path, data=self.data, body=self.raw_body,
                headers=self.headers, action=raw_action,
            )  # fmt: skip
            key = iam_request._access_key
            service_prefix = iam_request._service
            if session_expired(iam_request._access_key._access_key_id, account):
                raise error(service_prefix, "ExpiredToken", "The security token included in the request is expired",
                            400 if s3 else 403)  # fmt: skip
            if not signature_matches(iam_request):
                iam_request._raise_signature_does_not_match()
        prefix = _IAM_PREFIX.get(service_prefix, service_prefix)
        action = _ACTION_ALIASES.get(f"{prefix}:{raw_action}", f"{prefix}:{raw_action}")
        if action == "sts:GetCallerIdentity":
            return
        if resource == "*" and not s3:
            resource = iam_policy.resource_arn(prefix, action, path, self.data, self.raw_body, self.region, account)
        principal = iam_policy.Principal(key.arn, account)
        context = iam_policy.request_context(prefix, action, path, self.data, self.raw_body, principal)
        decision, why = decide(key, action, resource, context, account)
        items = iam_policy.transaction_items(action, self.raw_body, self.region, account)
        if items:  # a DynamoDB transaction: every item's own action on its own table must be allowed
            decision, why = iam_policy.ALLOW, ""
            for item_action, item_resource in items:
                decision, why = decide(key, item_action, item_resource, context, account)
                if decision != iam_policy.ALLOW:
                    action, resource = item_action, item_resource
                    break
        if decision == iam_policy.ALLOW and action == "sts:AssumeRole":
            from moto.iam.models import iam_backends

            try:
                role = iam_backends[account]["aws"].get_role_by_arn(resource)
                trust = iam_policy.document(role.assume_role_policy_document)
            except Exception:  # noqa: BLE001 - an unknown role: moto answers it
                trust = None
            if (
                trust is not None
                and iam_policy.evaluate([trust], action, resource, context, principal, resource_policy=True)
                != iam_policy.ALLOW
            ):
                decision, why = iam_policy.NEUTRAL, "the role's trust policy does not allow the caller"
        missing_bucket = s3 and action != "s3:CreateBucket" and not _bucket_exists(resource, account)
        if decision != iam_policy.ALLOW and missing_bucket:
            # S3 answers a bucket that does not exist with 404 NoSuchBucket whoever asks (the well-known existence
            # oracle: 403 means "exists, not yours"); moto's handler answers it. The AWS sample's deploy.py reads
            # HeadBucket's 404 as "create it" (issue 27 item 8). CreateBucket itself is still authorised.
            self._omnireel_caller = (key, principal)
            return
        if decision != iam_policy.ALLOW:
            message = f"User: {key.arn} is not authorized to perform: {action} on resource: {resource} because {why}"
            log.info("IAM: denied %s", message)
            raise error("s3" if s3 else prefix, "AccessDenied", message, 403)
        self._omnireel_caller = (key, principal)

    def _bucket_exists(resource: str, account: str) -> bool:

        bucket = resource.removeprefix("arn:aws:s3:::").split("/", 1)[0]
        if not bucket or bucket == "*":
            return True  # ListBuckets and the like: not about one bucket
        return bucket in s3_backends[account]["aws"].buckets

    ActionAuthenticatorMixin._authenticate_and_authorize_action = authenticate

    # 10. S3 answers a GET/HEAD of a missing key with 403 AccessDenied unless the caller may s3:ListBucket the bucket
    #     (a 404 would tell a caller without list rights which keys do not exist). The ListBucket check sees the key
    #     as s3:prefix, so a prefix-scoped ListBucket grant is honoured (as AWS does; ceph/ceph#68577 documents it).
    original_key_response = S3Response.key_response

    def key_response(self: Any, request: Any, full_url: str, headers: Any) -> Any:
        status, response_headers, body = original_key_response(self, request, full_url, headers)
        caller = getattr(self, "_omnireel_caller", None)
        if status != 404 or request.method not in ("GET", "HEAD") or caller is None:
            return status, response_headers, body
        if b"NoSuchBucket" in (body if isinstance(body, bytes) else str(body).encode()):
            return status, response_headers, body
        key, principal = caller
        bucket, object_key = self.parse_bucket_name_from_url(request, full_url), self.parse_key_name()
        resource = f"arn:aws:s3:::{bucket}"
        context = {**iam_policy.request_context("s3", "s3:GetObject", "/", {}, b"", principal), "s3:prefix": object_key}
        if decide(key, "s3:ListBucket", resource, context, self.current_account)[0] == iam_policy.ALLOW:
            return status, response_headers, body
        if request.method == "HEAD":
            return 403, {"status": 403}, b""
        return self.serialized(access_denied_result())

    def access_denied_result() -> Any:
        from moto.core.responses import ActionResult
        from moto.s3.exceptions import S3AccessDeniedError

        return ActionResult(S3AccessDeniedError())

    S3Response.key_response = key_response

    # 11. Bucket policies: moto's S3 handler evaluates them itself with its Condition-blind evaluator (the template's
    #     DenyInsecureTransport would deny every call). Patch 9 evaluates them with the identity policies instead.
    FakeBucket.get_permission = lambda self, action, resource: access_control.PermissionResult.NEUTRAL

    # 12. Step Functions calls Lambda (and any other service) with the hard-coded key "ak"/"sk". AWS calls it as the
    #     state machine's role: the role's LambdaInvokePolicy is what authorises the task. One client per (service,
    #     region, role session), not one per task (a boto3 client costs ~5 ms of CPU): a renewed session gets new ones.
    def boto_client_for(region: str, service: str, state_credentials: Any = None) -> Any:
        role_arn = getattr(state_credentials, "role_arn", None)
        if not role_arn:
            raise PermissionError("a Step Functions task has no role to call AWS with")
        return new_client(region, service, service_credentials.get(role_arn, "states.amazonaws.com",
                                                                   "omnireel-local-states"))  # fmt: skip

    @lru_cache(maxsize=64)
    def new_client(region: str, service: str, credentials: Any) -> Any:
        import boto3
        from botocore.config import Config
        from moto.stepfunctions.parser.asl.component.common.timeouts.timeout import TimeoutSeconds

        return boto3.client(
            service,
            region_name=region,
            endpoint_url=f"http://localhost:{moto_settings.moto_server_port()}",
            config=Config(parameter_validation=False, retries={"max_attempts": 0, "total_max_attempts": 1},
                          max_pool_connections=64, connect_timeout=TimeoutSeconds.DEFAULT_TIMEOUT_SECONDS,
                          read_timeout=TimeoutSeconds.DEFAULT_TIMEOUT_SECONDS),
            **credentials.boto(),
        )  # fmt: skip

    rebind_everywhere("boto_client_for", sfn_boto_client.boto_client_for, boto_client_for)


def rebind_everywhere(name: str, original: Any, replacement: Any) -> None:
    """Every imported module whose global ``name`` is ``original`` (``from x import name`` copies) gets ``replacement``.
    Reads each module's own namespace, not getattr: a lazy module's ``__getattr__`` would load it (patch 21)."""
    import sys

    for module in list(sys.modules.values()):
        if getattr(module, "__dict__", {}).get(name) is original:
            setattr(module, name, replacement)


__all__ = ["MOTO_VERSION", "AsyncInvoker", "MotoVersionMismatch", "apply", "enforce_iam"]
