"""The asynchronous video endpoint: InvokeEndpointAsync with the request staged in S3 (/v1/videos/sync)."""

from __future__ import annotations

from botocore.exceptions import BotoCoreError, ClientError

from omnireel.aws.clients import client
from omnireel.aws.sagemaker import invoke_failure
from omnireel.jobs.job import AsyncInvocation

VIDEO_ROUTE = "route=/v1/videos/sync"


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
            raise invoke_failure(exc, self.name) from exc
        return AsyncInvocation(
            inference_id=response.get("InferenceId") or inference_id,
            output_location=response["OutputLocation"],
            failure_location=response.get("FailureLocation"),
        )
