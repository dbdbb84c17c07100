"""The real-time image endpoint: POST /v1/images/generations through /invocations, answered with a checked PNG."""

from __future__ import annotations

import base64
import json
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from omnireel.aws.clients import client
from omnireel.aws.sagemaker import invoke_failure
from omnireel.core.errors import MalformedModelOutput
from omnireel.media.png import check_png

IMAGE_ROUTE = "route=/v1/images/generations"


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
            raise invoke_failure(exc, self.name) from exc
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
