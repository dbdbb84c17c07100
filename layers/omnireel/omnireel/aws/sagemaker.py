"""SageMaker runtime calls to the vLLM-Omni endpoints, with failures mapped to typed errors.

Routing inside the container is chosen by ``CustomAttributes="route=/v1/..."`` (the DLC's
SageMakerRouteMiddleware rewrites /invocations to that path).
"""

from __future__ import annotations

import base64
import json
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError, ConnectionError, ReadTimeoutError

from omnireel.aws.clients import client
from omnireel.errors import (
    EndpointError,
    EndpointRejected,
    EndpointThrottled,
    EndpointUnavailable,
    MalformedModelOutput,
)
from omnireel.job import AsyncInvocation
from omnireel.media import check_png

IMAGE_ROUTE = "route=/v1/images/generations"
VIDEO_ROUTE = "route=/v1/videos/sync"
_THROTTLING = {"ThrottlingException", "TooManyRequestsException", "ServiceQuotaExceededException"}
_UNAVAILABLE = {"ServiceUnavailable", "InternalFailure", "InternalDependencyException", "ModelNotReadyException"}


def _container_message(body: str | None) -> str:
    """Pull ``error.message`` (vLLM shape) or ``detail`` (Starlette shape) out of a container reply."""
    if not body:
        return ""
    try:
        data = json.loads(body)
    except ValueError:
        return body[:500]
    if isinstance(data, dict):
        error = data.get("error")
        if isinstance(error, dict) and error.get("message"):
            return str(error["message"])
        if data.get("detail"):
            return str(data["detail"])
    return body[:500]


def map_client_error(exc: ClientError, endpoint: str) -> EndpointError:
    error = exc.response.get("Error", {})
    code = error.get("Code", "")
    message = error.get("Message", "") or str(exc)
    if code == "ModelError":
        status = int(exc.response.get("OriginalStatusCode") or 500)
        detail = _container_message(exc.response.get("OriginalMessage")) or message
        text = f"endpoint {endpoint}: model returned HTTP {status}: {detail}"
        if status == 429:
            return EndpointThrottled(text)
        if status in (408, 409) or status >= 500:
            return EndpointUnavailable(text)
        return EndpointRejected(text)
    if code in _THROTTLING:
        return EndpointThrottled(f"endpoint {endpoint} is throttling: {message}")
    if code in _UNAVAILABLE or exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) >= 500:
        return EndpointUnavailable(f"endpoint {endpoint} is unavailable ({code}): {message}")
    return EndpointRejected(f"endpoint {endpoint} rejected the request ({code}): {message}")


def _invoke_failure(exc: Exception, endpoint: str) -> EndpointError:
    if isinstance(exc, ClientError):
        return map_client_error(exc, endpoint)
    if isinstance(exc, (ReadTimeoutError, ConnectionError)):
        return EndpointUnavailable(f"endpoint {endpoint} did not answer: {exc}")
    return EndpointUnavailable(f"endpoint {endpoint} call failed: {exc}")


class ImageEndpoint:
    def __init__(self, name: str):
        self.name = name
        self._runtime = client("sagemaker-runtime")

    def generate(self, body: dict[str, Any]) -> bytes:
        """POST /v1/images/generations through /invocations; return the PNG bytes."""
        try:
            response = self._runtime.invoke_endpoint(
                EndpointName=self.name,
                Body=json.dumps(body).encode(),
                ContentType="application/json",
                Accept="application/json",
                CustomAttributes=IMAGE_ROUTE,
            )
            raw = response["Body"].read()
        except (ClientError, BotoCoreError) as exc:
            raise _invoke_failure(exc, self.name) from exc
        return decode_image_response(raw)


def decode_image_response(raw: bytes) -> bytes:
    """``data[0].b64_json`` of an ImageGenerationResponse, checked to be a PNG."""
    try:
        payload = json.loads(raw)
        encoded = payload["data"][0]["b64_json"]
        png = base64.b64decode(encoded, validate=True)
    except (ValueError, KeyError, IndexError, TypeError) as exc:
        raise MalformedModelOutput(f"the image endpoint's response has no usable data[0].b64_json: {exc}") from exc
    check_png(png)
    return png


class VideoEndpoint:
    def __init__(self, name: str):
        self.name = name
        self._runtime = client("sagemaker-runtime")

    def invoke_async(
        self,
        *,
        input_location: str,
        content_type: str,
        inference_id: str,
        invocation_timeout_seconds: int,
        request_ttl_seconds: int,
    ) -> AsyncInvocation:
        try:
            response = self._runtime.invoke_endpoint_async(
                EndpointName=self.name,
                InputLocation=input_location,
                ContentType=content_type,
                Accept="video/mp4",
                CustomAttributes=VIDEO_ROUTE,
                InferenceId=inference_id,
                InvocationTimeoutSeconds=invocation_timeout_seconds,
                RequestTTLSeconds=request_ttl_seconds,
            )
        except (ClientError, BotoCoreError) as exc:
            raise _invoke_failure(exc, self.name) from exc
        return AsyncInvocation(
            inference_id=response.get("InferenceId") or inference_id,
            output_location=response["OutputLocation"],
            failure_location=response.get("FailureLocation"),
        )
