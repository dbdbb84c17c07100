"""SageMaker: the runtime routed to the hosting shim (container emulators), instance types and pools as the API takes
them, and an endpoint lifecycle that passes through Creating and Deleting."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from urllib.parse import unquote

from .cards import LOCAL_DESIGN, MOTO_BUG, Context, Patch


def status_setter(endpoint: Any) -> Callable[..., None]:
    """What DescribeEndpoint answers from now on: the status, the failure reason, the time it changed."""
    from moto.core.utils import utcnow

    def set_status(status: str, reason: str | None = None) -> None:
        endpoint.endpoint_status = status
        endpoint.failure_reason = reason
        endpoint.last_modified_time = utcnow()

    return set_status


def install_runtime(ctx: Context) -> None:
    from moto.sagemakerruntime.responses import SageMakerRuntimeResponse

    hosting = ctx.hosting

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


def install_instance_types(ctx: Context) -> None:
    from moto.sagemaker.models import FakeEndpointConfig

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


def install_create_endpoint(ctx: Context) -> None:
    from moto.sagemaker.models import SageMakerModelBackend

    hosting = ctx.hosting
    original_create_endpoint = SageMakerModelBackend.create_endpoint

    def create_endpoint(self: Any, endpoint_name: str, *args: Any, **kwargs: Any) -> Any:
        endpoint = original_create_endpoint(self, endpoint_name, *args, **kwargs)
        config = self.describe_endpoint_config(endpoint.endpoint_config_name)
        model_name = (config.get("ProductionVariants") or [{}])[0].get("ModelName", "")
        model = self._models.get(model_name)
        container = (getattr(model, "primary_container", None) or (getattr(model, "containers", None) or [{}])[0]) or {}

        hosting.endpoint_created(
            endpoint_name,
            model_name,
            str(container.get("Image", "")),
            {k: str(v) for k, v in (container.get("Environment") or {}).items()},
            status_setter(endpoint),
        )
        return endpoint

    SageMakerModelBackend.create_endpoint = create_endpoint


def install_delete_endpoint(ctx: Context) -> None:
    from moto.sagemaker.models import SageMakerModelBackend

    hosting = ctx.hosting
    original_delete_endpoint = SageMakerModelBackend.delete_endpoint

    def delete_endpoint(self: Any, endpoint_name: str) -> None:
        endpoint = self.endpoints.get(endpoint_name)
        if endpoint is None:
            return original_delete_endpoint(self, endpoint_name)  # ValidationError "Could not find endpoint"
        if endpoint.endpoint_status == "Deleting":
            return None  # already on its way out (AWS's answer to a second delete is not documented)

        def finish() -> None:
            if self.endpoints.get(endpoint_name) is endpoint:
                original_delete_endpoint(self, endpoint_name)

        hosting.endpoint_deleting(endpoint_name, status_setter(endpoint), finish)
        return None

    SageMakerModelBackend.delete_endpoint = delete_endpoint


CARDS = [
    Patch(
        "3",
        "SageMaker runtime served by the container emulators",
        aws="InvokeEndpoint calls the model container; InvokeEndpointAsync queues, writes the output or failure to "
        "S3 and notifies the success or error topic.",
        moto="Canned results, written to a random bucket, no notification, the endpoint never checked.",
        test="tests/e2e/test_adhoc_endpoints.py::test_a_dlc_model_created_outside_the_template_is_creating_then_served",
        upstream=LOCAL_DESIGN,
        installs=install_runtime,
    ),
    Patch(
        "4",
        "Current instance types and instance pools",
        aws="Any current ml.* type (g5, g6, g6e, p5, ...); InstancePools (1 to 5) instead of InstanceType.",
        moto="A stale allow-list without ml.g5/g6/g6e/p5; InstancePools refused.",
        test="tests/e2e/test_endpoint_instance_types.py::test_the_default_image_types_are_pools_in_priority_order",
        upstream=MOTO_BUG,
        installs=install_instance_types,
    ),
    Patch(
        "14",
        "CreateEndpoint is Creating until a container serves the model",
        aws="An endpoint is Creating until its container passes the health check, then InService (or Failed).",
        moto="InService at once, with nothing behind it.",
        test="tests/e2e/test_adhoc_endpoints.py::test_a_model_with_another_image_fails_with_a_reason_instead_of_in_service",
        upstream=LOCAL_DESIGN,
        installs=install_create_endpoint,
    ),
    Patch(
        "14b",
        "DeleteEndpoint passes through Deleting",
        aws="The endpoint is Deleting (the runtime no longer serves it) before DescribeEndpoint answers "
        "ValidationException.",
        moto="The endpoint is removed at once: a delete-wait never polls.",
        test="tests/e2e/test_adhoc_endpoints.py::test_a_dlc_model_created_outside_the_template_is_creating_then_served",
        upstream=MOTO_BUG,
        installs=install_delete_endpoint,
    ),
]
