"""The SageMaker runtime calls' request shape and error mapping, checked with botocore's Stubber."""

import base64
import io
import json

import pytest
from botocore.stub import Stubber

from omnireel.aws import clients
from omnireel.aws.image_endpoint import ImageEndpoint
from omnireel.aws.video_endpoint import VideoEndpoint
from omnireel.core.errors import EndpointRejected, EndpointThrottled, EndpointUnavailable, MalformedModelOutput
from tests.support.media import png_bytes


@pytest.fixture
def runtime():
    clients.client.cache_clear()
    client = clients.client("sagemaker-runtime")
    with Stubber(client) as stubber:
        yield stubber
    clients.client.cache_clear()


def body(data: dict) -> io.BytesIO:
    return io.BytesIO(json.dumps(data).encode())


def test_image_call_shape_and_decoding(runtime):
    png = png_bytes(64, 64)
    runtime.add_response(
        "invoke_endpoint",
        {
            "Body": body({"created": 1, "data": [{"b64_json": base64.b64encode(png).decode()}]}),
            "ContentType": "application/json",
        },
        {
            "EndpointName": "img",
            "Body": json.dumps({"prompt": "p"}).encode(),
            "ContentType": "application/json",
            "Accept": "application/json",
            "CustomAttributes": "route=/v1/images/generations",
        },
    )
    assert ImageEndpoint("img").generate({"prompt": "p"}) == png


@pytest.mark.parametrize(
    ("payload", "message"),
    [({"data": []}, "no usable data"), ({"data": [{"b64_json": base64.b64encode(b"GIF89a").decode()}]}, "not a PNG")],
)
def test_image_response_without_a_png_is_malformed(runtime, payload, message):
    runtime.add_response("invoke_endpoint", {"Body": body(payload)})
    with pytest.raises(MalformedModelOutput, match=message):
        ImageEndpoint("img").generate({"prompt": "p"})


@pytest.mark.parametrize(
    ("code", "status", "extra", "expected"),
    [
        (
            "ModelError",
            424,
            {"OriginalStatusCode": 503, "OriginalMessage": '{"error": {"message": "loading"}}'},
            EndpointUnavailable,
        ),
        (
            "ModelError",
            424,
            {"OriginalStatusCode": 400, "OriginalMessage": '{"error": {"message": "bad size"}}'},
            EndpointRejected,
        ),
        ("ModelError", 424, {"OriginalStatusCode": 429, "OriginalMessage": "busy"}, EndpointThrottled),
        ("ThrottlingException", 400, {}, EndpointThrottled),
        ("ModelNotReadyException", 429, {}, EndpointUnavailable),
        ("ServiceUnavailable", 503, {}, EndpointUnavailable),
        ("ValidationException", 400, {}, EndpointRejected),
    ],
)
def test_error_mapping(runtime, code, status, extra, expected):
    runtime.add_client_error(
        "invoke_endpoint", service_error_code=code, http_status_code=status, response_meta={}, modeled_fields=extra
    )
    with pytest.raises(expected) as caught:
        ImageEndpoint("img").generate({"prompt": "p"})
    if "OriginalMessage" in extra and "error" in extra["OriginalMessage"]:
        assert json.loads(extra["OriginalMessage"])["error"]["message"] in caught.value.message
    assert caught.value.retryable == (expected is not EndpointRejected)


def test_async_call_shape(runtime):
    runtime.add_response(
        "invoke_endpoint_async",
        {
            "InferenceId": "job-1",
            "OutputLocation": "s3://b/async/outputs/u.out",
            "FailureLocation": "s3://b/async/failures/u-error.out",
        },
        {
            "EndpointName": "vid",
            "InputLocation": "s3://b/jobs/job-1/video-request.multipart",
            "ContentType": "multipart/form-data; boundary=abc",
            "Accept": "video/mp4",
            "CustomAttributes": "route=/v1/videos/sync",
            "InferenceId": "job-1",
            "InvocationTimeoutSeconds": 900,
            "RequestTTLSeconds": 3600,
        },
    )
    invocation = VideoEndpoint("vid").invoke_async(
        input_location="s3://b/jobs/job-1/video-request.multipart",
        content_type="multipart/form-data; boundary=abc",
        inference_id="job-1",
        invocation_timeout_seconds=900,
        request_ttl_seconds=3600,
    )
    assert invocation.output_location.endswith("u.out") and invocation.failure_location.endswith("u-error.out")
