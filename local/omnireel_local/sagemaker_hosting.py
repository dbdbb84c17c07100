"""SageMaker hosting, locally: endpoints served by container emulators, with real-time and async semantics.

- ``invoke`` (InvokeEndpoint): forwards the request to the container's ``/invocations`` with the SageMaker headers
  (Content-Type, Accept, X-Amzn-SageMaker-Custom-Attributes, ...) and returns its body and content type. A container
  error becomes SageMaker's ``ModelError`` (HTTP 424 with ``OriginalStatusCode``, ``OriginalMessage``,
  ``LogStreamArn``); botocore raises it as ``ClientError`` code ``ModelError``.
- ``invoke_async`` (InvokeEndpointAsync): answers at once (202) with ``InferenceId``, ``OutputLocation`` and
  ``FailureLocation`` under the endpoint config's ``S3OutputPath`` / ``S3FailurePath``, then queues the request. Per
  endpoint, at most ``MaxConcurrentInvocationsPerInstance`` x the variant's current instance count requests run at
  once (re-read whenever one could start, so ``UpdateEndpointWeightsAndCapacities`` changes it; 0 instances run
  none: requests wait, as on a scaled-to-zero endpoint, until their TTL). A running request reads ``InputLocation``
  from S3, calls the container (bounded by ``InvocationTimeoutSeconds``), writes ``<S3OutputPath>/<uuid>.out`` or
  ``<S3FailurePath>/<uuid>-error.out``, and publishes the AWS-shaped notification to the config's SuccessTopic or
  ErrorTopic. A request still queued after ``RequestTTLSeconds`` is dropped with an ``Expired`` notification.

Capacity (issue 34 item 9): every request to a container carries the variant's current instance count
(``INSTANCE_COUNT_HEADER``); the container emulator runs at most its ``concurrency_per_instance`` x that many generation
requests at once and queues the rest inside the "container" (``emulator/capacity.py``). InvokeEndpoint's 60 s
(``REALTIME_TIMEOUT_S``, read on every call) covers that wait and the work: past it the caller gets ModelError 424
with OriginalStatusCode 408, as from SageMaker.

Which container serves an endpoint: endpoint -> endpoint config -> production variant ``ModelName`` -> the emulator
started for that SageMaker Model (``attach``).

InService is never a lie (``endpoint_created``): CreateEndpoint leaves the endpoint ``Creating`` until a container
serves its model. A model of the template gets its emulator from ``omnireel local up``; a model created outside the
template (the AWS sample's ``deploy.py`` against the local stack) gets one started on demand when its image is the
vLLM-Omni DLC the emulator implements (``vllm:omni-sagemaker-cuda-v1.5`` / ``-v1.6``); any other image makes the
endpoint ``Failed`` with a FailureReason that says why, as SageMaker does for an image it cannot run.

Everything else goes through the local AWS APIs (boto3), exactly as
the real service's own S3 reads/writes and SNS publishes would: reading ``InputLocation``, writing outputs and failures
and publishing notifications happen with a session of the model's ``ExecutionRoleArn`` (so that role's policy is what
authorises them, as on AWS). Which model and role serve an endpoint is read from the control plane's own state, in
process (moto's SageMaker backend), on every invocation, as the service's data plane knows its configuration: no
API round trips on the request path, and an updated or deleted endpoint takes effect on the next call (it used to be
three Describe* calls through the local API, cached for 10 s: each invocation after an idle spell paid ~15 ms).
"""

from __future__ import annotations

import json
import logging
import re
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import boto3
import httpx
from botocore.config import Config

from . import fault_injection
from .emulator.config import INSTANCE_COUNT_HEADER
from .iam.identities import Credentials

log = logging.getLogger("omnireel_local.sagemaker")

REALTIME_TIMEOUT_S = 60.0  # InvokeEndpoint's fixed 60 s limit for a container response (read per call: tests lower it)
# A queued async request waits for a free slot; the capacity (instances x per instance) is re-read at least this often
# while requests wait, so a scale-out through UpdateEndpointWeightsAndCapacities starts them without a new request.
ASYNC_CAPACITY_POLL_S = 1.0
DEFAULT_INVOCATION_TIMEOUT_S = 900
DEFAULT_REQUEST_TTL_S = 21600
_FORWARDED = ("content-type", "accept")
# The container images the emulator implements (docs: /work references, vllm-omni DLC contracts v1.5 and v1.6).
DLC_IMAGE = re.compile(
    r"^[0-9]{12}\.dkr\.ecr\.[a-z0-9-]+\.amazonaws\.com(\.cn)?/vllm:omni-sagemaker-cuda-v1\.[56](@sha256:[0-9a-f]{64})?$"
)
BRING_UP_TIMEOUT_S = 120.0  # a local emulator starts in seconds; AWS's own limit is ContainerStartupHealthCheckTimeout
# DeleteEndpoint: the endpoint stays ``Deleting`` (DescribeEndpoint answers it, the data plane no longer serves it)
# for this long, then DescribeEndpoint answers ValidationError "Could not find endpoint" - so a script's delete-wait
# (botocore's ``endpoint_deleted`` waiter) really polls. AWS takes minutes; a bound, not a duration to reproduce.
DELETING_S = 2.0
# The statuses in which SageMaker's runtime serves an endpoint (DescribeEndpoint's EndpointStatus documentation):
# InService; Updating / SystemUpdating / RollingBack keep serving on the current fleet ("there is no availability
# loss", UpdateEndpoint); UpdateRollbackFailed is "in service with a mix of the old and new endpoint configurations".
# Creating (not yet), Deleting (going), Failed ("DeleteEndpoint is the only operation that can be performed on a
# failed endpoint") and OutOfService ("not available to take incoming requests") are not served: the runtime answers
# them as it answers an endpoint it does not know, ValidationError "Endpoint <name> of account <id> not found.".
SERVING_STATUSES = frozenset({"InService", "Updating", "SystemUpdating", "RollingBack", "UpdateRollbackFailed"})
_TYPE = "x-amzn-ErrorType"


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{datetime.now(UTC).microsecond // 1000:03d}Z"


def _json_error(status: int, code: str, message: str, **extra: Any) -> tuple[int, dict[str, str], str]:
    return status, {_TYPE: code, "Content-Type": "application/json"}, json.dumps({"Message": message, **extra})


def _current_instances(endpoint: Any, variant_name: str, config_variant: dict[str, Any]) -> int:
    """The variant's CurrentInstanceCount on the endpoint (UpdateEndpointWeightsAndCapacities changes it), else the
    config's InitialInstanceCount."""
    for variant in getattr(endpoint, "production_variants", None) or []:
        if variant.get("VariantName") == variant_name and variant.get("CurrentInstanceCount") is not None:
            return int(variant["CurrentInstanceCount"])
    return int(config_variant.get("InitialInstanceCount") or 1)


def _split_s3(uri: str) -> tuple[str, str]:
    if not uri.startswith("s3://"):
        raise ValueError(f"not an s3:// URI: {uri}")
    bucket, _, key = uri[5:].partition("/")
    return bucket, key


def _join_s3(prefix: str, name: str) -> str:
    return prefix.rstrip("/") + "/" + name


@dataclass
class _Endpoint:
    name: str
    model_name: str
    variant: str
    instances: int  # the variant's current instance count (0: an async endpoint scaled to zero)
    async_config: dict[str, Any] | None
    role_arn: str = ""

    @property
    def per_instance(self) -> int:
        """Async: ClientConfig.MaxConcurrentInvocationsPerInstance (SageMaker's default: 1 here, as the DLC's)."""
        client = (self.async_config or {}).get("ClientConfig", {})
        return int(client.get("MaxConcurrentInvocationsPerInstance") or 1)


@dataclass
class _AsyncPool:
    """One async endpoint's queue: requests in arrival order, how many run now, the condition a start waits on."""

    name: str
    pending: deque[_AsyncRequest] = field(default_factory=deque)
    running: int = 0
    peak_running: int = 0
    changed: threading.Condition = field(default_factory=threading.Condition)


@dataclass
class _AsyncRequest:
    endpoint: _Endpoint
    inference_id: str
    input_location: str
    content_type: str
    accept: str
    custom_attributes: str | None
    output_location: str
    failure_location: str
    invocation_timeout_s: float
    request_ttl_s: float
    received_at: str
    received_monotonic: float = field(default_factory=time.monotonic)
    state: str = "queued"  # queued -> running | expired (guarded by lock)
    instances: int = 1  # the variant's instance count when the request was dispatched (if the endpoint is gone at send)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def claim(self, state: str) -> bool:
        """Move a queued request to ``state``; False if a worker or the TTL timer got there first."""
        with self.lock:
            if self.state != "queued":
                return False
            self.state = state
            return True


class SageMakerHosting:
    def __init__(
        self,
        moto_endpoint: str,
        region: str,
        account_id: str,
        role_credentials: Callable[[str], Credentials],
        start_container: Callable[[str, dict[str, str]], str] | None = None,
    ):
        """``role_credentials(role_arn)``: a session of a model role;
        ``start_container(model_name, environment)``: start an emulator for a model created outside the template and
        return its URL once it answers /ping (None: such endpoints fail)."""
        self.region = region
        self.account_id = account_id
        self._moto_endpoint = moto_endpoint
        self._config = Config(retries={"mode": "standard", "max_attempts": 3}, read_timeout=120)
        self._role_credentials = role_credentials
        self._role_clients: dict[tuple[str, str], Any] = {}
        self._containers: dict[str, str] = {}
        self._pools: dict[str, _AsyncPool] = {}
        self._lock = threading.Lock()
        self._closed = threading.Event()
        self._http = httpx.Client(timeout=httpx.Timeout(REALTIME_TIMEOUT_S, connect=5.0))
        self._start_container = start_container
        self._attached = threading.Condition()
        self._template_attached = False  # `local up` has attached the template's emulators

    # ---------------------------------------------------------------- wiring
    def attach(self, model_name: str, container_url: str) -> None:
        """Serve SageMaker Model ``model_name`` with the container listening at ``container_url``."""
        with self._attached:
            self._containers[model_name] = container_url.rstrip("/")
            self._attached.notify_all()

    def template_containers_attached(self) -> None:
        """Every model of the template has its container: a model still without one was created outside it."""
        with self._attached:
            self._template_attached = True
            self._attached.notify_all()

    def endpoint_created(
        self, name: str, model_name: str, image: str, environment: dict[str, str], set_status: Callable[..., None]
    ) -> None:
        """CreateEndpoint (patches.sagemaker): ``Creating`` until a container serves ``model_name``; then
        ``set_status("InService")``, or ``set_status("Failed", reason)`` when no container can serve it."""
        set_status("Creating")
        threading.Thread(
            target=self._bring_up, args=(name, model_name, image, environment, set_status), name=f"bring-up-{name}",
            daemon=True,
        ).start()  # fmt: skip

    def _bring_up(
        self, name: str, model_name: str, image: str, environment: dict[str, str], set_status: Callable[..., None]
    ) -> None:
        with self._attached:
            self._attached.wait_for(
                lambda: model_name in self._containers or self._template_attached or self._closed.is_set(),
                timeout=BRING_UP_TIMEOUT_S,
            )
            served = model_name in self._containers
        if self._closed.is_set():
            return
        if served:
            set_status("InService")
            log.info("endpoint %s: InService (model %s)", name, model_name)
            return
        if not self._template_attached:
            set_status("Failed", f"no container for model {model_name} within {BRING_UP_TIMEOUT_S:.0f} s")
            return
        if not DLC_IMAGE.match(image or ""):
            reason = (
                f"The local stack cannot run image {image!r} of model {model_name}: it emulates only the vLLM-Omni DLC "
                "(<account>.dkr.ecr.<region>.amazonaws.com/vllm:omni-sagemaker-cuda-v1.5 or -v1.6)."
            )
            log.warning("endpoint %s: Failed: %s", name, reason)
            set_status("Failed", reason)
            return
        if self._start_container is None:
            set_status(
                "Failed", f"this local stack starts no containers for models outside the template ({model_name})"
            )
            return
        try:
            url = self._start_container(model_name, environment)
        except Exception as exc:  # noqa: BLE001 - any start failure is the endpoint's FailureReason
            log.warning("endpoint %s: the emulator for %s did not start: %s", name, model_name, exc)
            set_status("Failed", f"The container for model {model_name} did not pass its health check: {exc}")
            return
        self.attach(model_name, url)
        set_status("InService")
        log.info("endpoint %s: InService (model %s created outside the template, emulator %s)", name, model_name, url)

    def endpoint_deleting(self, name: str, set_status: Callable[..., None], finish: Callable[[], None]) -> None:
        """DeleteEndpoint (patches.sagemaker): ``Deleting`` now, gone (``finish``) after ``DELETING_S``."""
        set_status("Deleting")

        def later() -> None:
            if not self._closed.wait(DELETING_S):
                finish()
                log.info("endpoint %s: deleted", name)

        threading.Thread(target=later, name=f"delete-{name}", daemon=True).start()

    def _endpoint(self, name: str) -> _Endpoint | None:
        """Endpoint -> endpoint config -> first production variant's model and its execution role, as they stand now
        (None: no such endpoint, one the runtime does not serve in its status, or its config or model is gone)."""
        from moto.sagemaker.exceptions import ValidationError
        from moto.sagemaker.models import sagemaker_backends

        backend = sagemaker_backends[self.account_id][self.region]
        endpoint = backend.endpoints.get(name)
        if endpoint is not None and endpoint.endpoint_status not in SERVING_STATUSES:
            return None
        config = endpoint and backend.endpoint_configs.get(endpoint.endpoint_config_name)
        if not config or not config.production_variants:
            return None
        variant = config.production_variants[0]
        try:
            model = backend.describe_model(variant["ModelName"])
        except ValidationError:
            return None
        variant_name = variant.get("VariantName", "AllTraffic")
        return _Endpoint(
            name=name,
            model_name=variant["ModelName"],
            variant=variant_name,
            instances=_current_instances(endpoint, variant_name, variant),
            async_config=config.async_inference_config or None,
            role_arn=model.execution_role_arn or "",
        )

    def _as_role(self, endpoint: _Endpoint, service: str) -> Any:
        """A client acting as SageMaker with the model's execution role (a fresh session before the old one expires)."""
        credentials = self._role_credentials(endpoint.role_arn)
        key = (service, credentials.access_key_id)
        with self._lock:
            if key not in self._role_clients:
                self._role_clients = {k: v for k, v in self._role_clients.items() if k[0] != service or k[1] == key[1]}
                self._role_clients[key] = boto3.client(
                    service,
                    region_name=self.region,
                    endpoint_url=self._moto_endpoint,
                    config=self._config,
                    **credentials.boto(),
                )
            return self._role_clients[key]

    def _container(self, endpoint: _Endpoint) -> str:
        url = self._containers.get(endpoint.model_name)
        if url is None:
            raise LookupError(f"no local container serves model {endpoint.model_name} (endpoint {endpoint.name})")
        return url

    def _log_stream_arn(self, endpoint: str) -> str:
        return (
            f"arn:aws:logs:{self.region}:{self.account_id}:log-group:/aws/sagemaker/Endpoints/{endpoint}"
            f":log-stream:AllTraffic/local"
        )

    def _resolve(self, name: str) -> _Endpoint | tuple[int, dict[str, str], str]:
        endpoint = self._endpoint(name)
        if endpoint is None:
            return _json_error(400, "ValidationError", f"Endpoint {name} of account {self.account_id} not found.")
        return endpoint

    # ---------------------------------------------------------------- InvokeEndpoint
    def invoke(self, name: str, body: bytes, headers: dict[str, str]) -> tuple[int, dict[str, str], bytes | str]:
        endpoint = self._resolve(name)
        if isinstance(endpoint, tuple):
            return endpoint
        lowered = {k.lower(): v for k, v in headers.items()}
        forward = {k: v for k, v in lowered.items() if k in _FORWARDED or k.startswith("x-amzn-sagemaker-")}
        # A real-time variant has at least one instance; the container serves that many at once (emulator/capacity.py).
        forward[INSTANCE_COUNT_HEADER] = str(max(endpoint.instances, 1))
        try:
            url = self._container(endpoint)
            # Wait for a slot + work, as InvokeEndpoint counts it: the container answers nothing before it is done.
            timeout = httpx.Timeout(REALTIME_TIMEOUT_S, connect=5.0)
            response = self._http.post(f"{url}/invocations", content=body, headers=forward, timeout=timeout)
        except LookupError as exc:
            return _json_error(503, "ServiceUnavailable", str(exc))
        except httpx.TimeoutException:
            return _json_error(
                424,
                "ModelError",
                "Your invocation timed out while waiting for a response from container primary. Review the latency "
                "metrics for each container in Amazon CloudWatch, resolve the issue, and try again.",
                OriginalStatusCode=408,
                LogStreamArn=self._log_stream_arn(name),
            )
        except httpx.HTTPError as exc:
            return _json_error(503, "ServiceUnavailable", f"the container for endpoint {name} is unreachable: {exc}")
        if response.status_code >= 300:
            kind = "client" if response.status_code < 500 else "server"
            text = response.text
            log.info("InvokeEndpoint %s: container answered %d", name, response.status_code)
            return _json_error(
                424,
                "ModelError",
                f'Received {kind} error ({response.status_code}) from primary with message "{text[:1000]}". See '
                f"https://{self.region}.console.aws.amazon.com/cloudwatch/home?region={self.region}#logEventViewer:"
                f"group=/aws/sagemaker/Endpoints/{name} in account {self.account_id} for more information.",
                OriginalStatusCode=response.status_code,
                OriginalMessage=text,
                LogStreamArn=self._log_stream_arn(name),
            )
        out = {
            "Content-Type": response.headers.get("content-type", "application/octet-stream"),
            "x-Amzn-Invoked-Production-Variant": endpoint.variant,
        }
        if attrs := response.headers.get("x-amzn-sagemaker-custom-attributes"):
            out["X-Amzn-SageMaker-Custom-Attributes"] = attrs
        return 200, out, response.content

    # ---------------------------------------------------------------- InvokeEndpointAsync
    def invoke_async(self, name: str, headers: dict[str, str]) -> tuple[int, dict[str, str], str]:
        endpoint = self._resolve(name)
        if isinstance(endpoint, tuple):
            return endpoint
        h = {k.lower(): v for k, v in headers.items()}
        config = endpoint.async_config
        if not config:
            return _json_error(400, "ValidationError", f"Endpoint {name} is not configured for asynchronous inference.")
        input_location = h.get("x-amzn-sagemaker-inputlocation")
        if not input_location:
            return _json_error(400, "ValidationError", "InputLocation is required.")
        output = config.get("OutputConfig", {})
        output_path = output.get("S3OutputPath")
        failure_path = output.get("S3FailurePath") or output_path
        if extension := h.get("x-amzn-sagemaker-s3outputpathextension"):
            output_path = _join_s3(output_path, extension)
        object_id = str(uuid.uuid4())
        inference_id = h.get("x-amzn-sagemaker-inference-id") or str(uuid.uuid4())
        request = _AsyncRequest(
            endpoint=endpoint,
            inference_id=inference_id,
            input_location=input_location,
            content_type=h.get("x-amzn-sagemaker-content-type", "application/octet-stream"),
            accept=h.get("x-amzn-sagemaker-accept", "*/*"),
            custom_attributes=h.get("x-amzn-sagemaker-custom-attributes"),
            output_location=_join_s3(output_path, h.get("x-amzn-sagemaker-filename") or f"{object_id}.out"),
            failure_location=_join_s3(failure_path, f"{object_id}-error.out"),
            invocation_timeout_s=float(
                h.get("x-amzn-sagemaker-invocationtimeoutseconds") or DEFAULT_INVOCATION_TIMEOUT_S
            ),
            request_ttl_s=fault_injection.request_ttl(
                float(h.get("x-amzn-sagemaker-requestttlseconds") or DEFAULT_REQUEST_TTL_S)
            ),
            received_at=_now(),
        )
        pool = self._pool_for(endpoint.name)
        with pool.changed:
            pool.pending.append(request)
            pool.changed.notify_all()
        # Expire at the TTL, not when a worker frees up: the Expired notification is timely even behind a long render.
        expiry = threading.Timer(request.request_ttl_s, self._expire, args=(request,))
        expiry.daemon = True
        expiry.start()
        log.info("InvokeEndpointAsync %s: queued %s (input %s)", name, inference_id, input_location)
        return (
            202,
            {
                "Content-Type": "application/json",
                "X-Amzn-SageMaker-OutputLocation": request.output_location,
                "X-Amzn-SageMaker-FailureLocation": request.failure_location,
            },
            json.dumps({"InferenceId": inference_id}),
        )

    def _pool_for(self, name: str) -> _AsyncPool:
        with self._lock:
            pool = self._pools.get(name)
            if pool is None:
                pool = self._pools[name] = _AsyncPool(name)
                threading.Thread(target=self._dispatch, args=(pool,), name=f"async-{name}", daemon=True).start()
            return pool

    def _async_capacity(self, pool: _AsyncPool, queued: _AsyncRequest) -> tuple[int, int]:
        """(MaxConcurrentInvocationsPerInstance x the variant's current instance count, that count), as the endpoint
        stands now (the endpoint the request was queued for, if it no longer resolves)."""
        endpoint = self._endpoint(pool.name) or queued.endpoint
        return endpoint.per_instance * endpoint.instances, endpoint.instances

    def _dispatch(self, pool: _AsyncPool) -> None:
        """Start queued requests in arrival order while fewer than the capacity run (one thread per running one)."""
        while not self._closed.is_set():
            with pool.changed:
                while pool.pending and pool.pending[0].state != "queued":
                    pool.pending.popleft()  # expired while queued (already notified): it takes no slot
                capacity, instances = self._async_capacity(pool, pool.pending[0]) if pool.pending else (0, 0)
                if pool.running >= capacity:
                    pool.changed.wait(ASYNC_CAPACITY_POLL_S)
                    continue
                request = pool.pending.popleft()
                request.instances = instances
                pool.running += 1
                pool.peak_running = max(pool.peak_running, pool.running)
            threading.Thread(target=self._run, args=(pool, request), name=f"async-{pool.name}-run", daemon=True).start()

    def _run(self, pool: _AsyncPool, request: _AsyncRequest) -> None:
        try:
            self._process(request)
        except Exception:
            log.exception("async request %s crashed the local shim", request.inference_id)
        finally:
            with pool.changed:
                pool.running -= 1
                pool.changed.notify_all()

    def async_stats(self, name: str) -> dict[str, int]:
        """An async endpoint's queue now: requests waiting, running, and the most that ran at once."""
        pool = self._pools.get(name)
        if pool is None:
            return {"waiting": 0, "running": 0, "peak_running": 0}
        with pool.changed:
            waiting = sum(1 for r in pool.pending if r.state == "queued")
            return {"waiting": waiting, "running": pool.running, "peak_running": pool.peak_running}

    def _expire(self, request: _AsyncRequest) -> None:
        if self._closed.is_set() or not request.claim("expired"):
            return
        waited = time.monotonic() - request.received_monotonic
        log.warning("async %s: expired after %.1f s in the queue", request.inference_id, waited)
        self._notify(request, "Expired", failure_reason="Request expired: RequestTTLSeconds exceeded in queue")

    def _process(self, request: _AsyncRequest) -> None:
        if not request.claim("running"):
            return  # expired while queued (already notified)
        try:
            bucket, key = _split_s3(request.input_location)
            body = self._as_role(request.endpoint, "s3").get_object(Bucket=bucket, Key=key)["Body"].read()
        except Exception as exc:  # noqa: BLE001 - any read failure is a ClientError notification on AWS
            self._fail(request, f"ClientError: Unable to read input from {request.input_location}: {exc}", str(exc))
            return
        # The count as it stands when the request is sent, not when it was dispatched: a request dispatched before a
        # scale-out and sent after another started with the new count would otherwise tell the container the old,
        # smaller capacity, and the container would hold it back (one make test run: peak_waiting 1, scale-out test).
        current = self._endpoint(request.endpoint.name)
        instances = current.instances if current is not None else request.instances
        headers = {
            "Content-Type": request.content_type,
            "Accept": request.accept,
            INSTANCE_COUNT_HEADER: str(max(instances, 1)),
        }
        if request.custom_attributes:
            headers["X-Amzn-SageMaker-Custom-Attributes"] = request.custom_attributes
        try:
            url = self._container(request.endpoint)
            started = time.monotonic()
            # The shared client: a new one per call sets up an SSL context each time (~21 ms of CPU).
            response = self._http.post(
                f"{url}/invocations",
                content=body,
                headers=headers,
                timeout=httpx.Timeout(request.invocation_timeout_s, connect=5.0),
            )
        except httpx.TimeoutException:
            self._fail(
                request,
                f"InvocationTimeout: the model did not respond within {request.invocation_timeout_s:.0f} s "
                "(InvocationTimeoutSeconds)",
                "Inference request timed out",
            )
            return
        except (httpx.HTTPError, LookupError) as exc:
            self._fail(request, f"ServerError: the model container is unreachable: {exc}", str(exc))
            return
        if response.status_code >= 300:
            kind = "client" if response.status_code < 500 else "server"
            self._fail(
                request,
                f"ClientError: Received {kind} error ({response.status_code}) from model with message "
                f'"{response.text[:1000]}". See the SageMaker Endpoint logs in your account for more information.',
                response.text,
                content_type=response.headers.get("content-type", "application/json"),
            )
            return
        bucket, key = _split_s3(request.output_location)
        content_type = response.headers.get("content-type", "application/octet-stream")
        try:
            self._as_role(request.endpoint, "s3").put_object(
                Bucket=bucket, Key=key, Body=response.content, ContentType=content_type
            )
        except Exception as exc:  # noqa: BLE001 - on AWS a failed output write is a failed invocation
            self._fail(request, f"ClientError: Unable to write output to {request.output_location}: {exc}", str(exc))
            return
        log.info(
            "async %s: completed in %.1f s, %d bytes -> %s",
            request.inference_id,
            time.monotonic() - started,
            len(response.content),
            request.output_location,
        )
        self._notify(request, "Completed", response_content_type=content_type)

    def _fail(self, request: _AsyncRequest, reason: str, body: str, content_type: str = "text/plain") -> None:
        log.warning("async %s: failed: %s", request.inference_id, reason[:300])
        try:
            bucket, key = _split_s3(request.failure_location)
            self._as_role(request.endpoint, "s3").put_object(
                Bucket=bucket, Key=key, Body=body.encode(), ContentType=content_type
            )
        except Exception:
            log.exception("async %s: could not write the failure object", request.inference_id)
        self._notify(request, "Failed", failure_reason=reason, response_content_type=content_type)

    def _notify(
        self,
        request: _AsyncRequest,
        status: str,
        *,
        failure_reason: str | None = None,
        response_content_type: str | None = None,
    ) -> None:
        notification = (request.endpoint.async_config or {}).get("OutputConfig", {}).get("NotificationConfig") or {}
        message: dict[str, Any] = {
            "awsRegion": self.region,
            "eventTime": _now(),
            "receivedTime": request.received_at,
            "invocationStatus": status,
            "requestParameters": {
                "accept": request.accept,
                "contentType": request.content_type,
                "endpointName": request.endpoint.name,
                "inputLocation": request.input_location,
            },
            "responseParameters": {"contentType": response_content_type or "application/json"},
            "inferenceId": request.inference_id,
            "eventVersion": "1.0",
            "eventSource": "aws:sagemaker",
            "eventName": "InferenceResult",
        }
        if status == "Completed":
            message["responseParameters"]["outputLocation"] = request.output_location
            topic = notification.get("SuccessTopic")
        else:
            message["failureReason"] = failure_reason or status
            message["responseParameters"]["failureLocation"] = request.failure_location
            topic = notification.get("ErrorTopic")
        if not topic:
            log.info("async %s: %s (no notification topic configured)", request.inference_id, status)
            return
        fault = fault_injection.notification(request.inference_id, status)  # off by default (fault_injection.py)
        if fault == "drop":
            return
        for _ in range(2 if fault == "duplicate" else 1):
            self._as_role(request.endpoint, "sns").publish(TopicArn=topic, Message=json.dumps(message))
        log.info("async %s: %s notification published to %s", request.inference_id, status, topic.rsplit(":", 1)[-1])

    def shutdown(self) -> None:
        self._closed.set()
        with self._attached:
            self._attached.notify_all()
        for pool in list(self._pools.values()):
            with pool.changed:
                pool.changed.notify_all()
        self._http.close()
