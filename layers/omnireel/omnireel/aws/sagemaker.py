"""SageMaker runtime failures mapped to typed errors, shared by the two endpoint adapters (``image_endpoint``,
``video_endpoint``).

Routing inside the container is chosen by ``CustomAttributes="route=/v1/..."`` (the DLC's
SageMakerRouteMiddleware rewrites /invocations to that path).
"""

from __future__ import annotations

import json

from botocore.exceptions import ClientError, ConnectionError, ReadTimeoutError

from omnireel.core.errors import EndpointError, EndpointRejected, EndpointThrottled, EndpointUnavailable

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


def invoke_failure(exc: Exception, endpoint: str) -> EndpointError:
    if isinstance(exc, ClientError):
        return map_client_error(exc, endpoint)
    if isinstance(exc, (ReadTimeoutError, ConnectionError)):
        return EndpointUnavailable(f"endpoint {endpoint} did not answer: {exc}")
    return EndpointUnavailable(f"endpoint {endpoint} call failed: {exc}")
