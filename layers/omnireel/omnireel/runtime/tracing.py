"""The functions' X-Ray tracer: Powertools' Tracer (the X-Ray SDK) only when the stack asks for it.

Every function has Lambda active tracing (template ``Globals``: ``Tracing: Active``): Lambda records each invocation's
segment (initialization, invocation, overhead) and passes the trace header on, so Step Functions' and the service
map's traces hold every function without any SDK in the function. The X-Ray SDK adds subsegments inside that segment
(one per AWS call through botocore, one per ``@tracer.capture_method``) and the ``ColdStart``/``Service``
annotations, at a cold-start cost: importing ``aws_xray_sdk`` and patching botocore (docs/benchmarks.md,
"Cold-start proxy"). So it is off unless ``XRAY_SDK_TRACING`` (template parameter ``XRaySdkTracing``) is ``true``:

* ``true``: Powertools' ``Tracer`` created at import, patching botocore (every AWS call traced).
* ``false`` (the default, also when unset): ``NoTracer``, the same decorators and methods doing nothing;
  ``aws_xray_sdk`` is never imported. Powertools' own ``Tracer(disabled=True)`` would not do: it still imports the
  SDK (``Tracer._patch_xray_provider``) and only switches it off.

This module is the one place that decides; the handlers use ``omnireel.runtime.observability.tracer`` either way.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar, overload

if TYPE_CHECKING:
    from aws_lambda_powertools import Tracer

ENV = "XRAY_SDK_TRACING"
F = TypeVar("F", bound=Callable[..., Any])


def xray_sdk_enabled(environ: Mapping[str, str] | None = None) -> bool:
    """``XRAY_SDK_TRACING``: "true" or "false" (case-insensitive; unset is "false"); anything else fails the cold
    start with the variable's name, like a malformed setting (omnireel.runtime.settings)."""
    value = (os.environ if environ is None else environ).get(ENV, "false").strip().lower()
    if value not in {"true", "false"}:
        raise RuntimeError(f"invalid environment variable {ENV}: {value!r} (expected true or false)")
    return value == "true"


class NoTracer:
    """Powertools ``Tracer``'s interface without the X-Ray SDK: decorators return the function itself (no wrapper,
    nothing per call), annotations and metadata are dropped. Lambda's own segment still records the invocation."""

    disabled = True
    provider = None

    def __init__(self, service: str) -> None:
        self.service = service

    def capture_lambda_handler(
        self,
        lambda_handler: F | None = None,
        capture_response: bool | None = None,
        capture_error: bool | None = None,
    ) -> Any:
        return lambda_handler if lambda_handler is not None else _identity

    @overload
    def capture_method(self, method: F) -> F: ...

    @overload
    def capture_method(
        self, method: None = None, capture_response: bool | None = None, capture_error: bool | None = None
    ) -> Callable[[F], F]: ...

    def capture_method(
        self,
        method: F | None = None,
        capture_response: bool | None = None,
        capture_error: bool | None = None,
    ) -> F | Callable[[F], F]:
        return method if method is not None else _identity

    def put_annotation(self, key: str, value: Any) -> None:
        return None

    def put_metadata(self, key: str, value: Any, namespace: str | None = None) -> None:
        return None

    def patch(self, modules: Sequence[str] | None = None) -> None:
        return None

    def ignore_endpoint(self, hostname: str | None = None, urls: list[str] | None = None) -> None:
        return None


def _identity[G: Callable[..., Any]](function: G) -> G:
    return function


def make_tracer(service: str, environ: Mapping[str, str] | None = None) -> Tracer | NoTracer:
    """The tracer for this process, created at import (cold start) by omnireel.runtime.observability."""
    if not xray_sdk_enabled(environ):
        return NoTracer(service)
    from aws_lambda_powertools import Tracer

    # Patch only botocore (every AWS call is traced); patching every supported library costs ~50 ms of cold start.
    return Tracer(service=service, patch_modules=["botocore"])
