"""Helpers shared by the emulator unit tests (imported by name: the test dirs are not packages)."""

from __future__ import annotations

import base64
import io
import uuid
from typing import Any

from PIL import Image
from starlette.testclient import TestClient
from urllib3 import encode_multipart_formdata


def reference_jpeg(width: int = 480, height: int = 320) -> bytes:
    """A reference image with distinct halves (red left, blue right), as JPEG q90 like the pipeline sends."""
    img = Image.new("RGB", (width, height), (220, 30, 30))
    img.paste((30, 40, 220), (width // 2, 0, width, height))
    buf = io.BytesIO()
    img.save(buf, format="JPEG", quality=90, optimize=True)
    return buf.getvalue()


def pipeline_fields(**overrides: Any) -> dict[str, Any]:
    """The text parts the omnireel pipeline (and the AWS sample) sends to /v1/videos/sync."""
    data_url = "data:image/jpeg;base64," + base64.b64encode(reference_jpeg()).decode()
    fields: dict[str, Any] = {
        "model": "Wan-AI/Wan2.1-VACE-1.3B-diffusers",
        "prompt": "a red fox walks through fresh snow",
        "image_reference": '{"image_url":"' + data_url + '"}',
        "width": "480",
        "height": "320",
        "num_frames": "17",
        "fps": "8",
        "num_inference_steps": "30",
        "guidance_scale": "5.0",
        "seed": "42",
    }
    fields.update(overrides)
    return {k: v for k, v in fields.items() if v is not None}


def multipart(fields: dict[str, Any]) -> tuple[bytes, str]:
    """urllib3 multipart with a ``vllm-omni-<uuid hex>`` boundary, exactly like the sample's build_video_multipart."""
    return encode_multipart_formdata(fields, boundary=f"vllm-omni-{uuid.uuid4().hex}")


def post_multipart(client: TestClient, path: str, fields: dict[str, Any], headers: dict[str, str] | None = None):
    body, content_type = multipart(fields)
    return client.post(path, content=body, headers={"Content-Type": content_type, **(headers or {})})


def assert_error_shape(response, status: int, contains: str) -> None:
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"error"}
    error = body["error"]
    assert error["code"] == status
    assert error["param"] is None
    assert isinstance(error["type"], str) and error["type"]
    assert contains in error["message"], error["message"]
