from __future__ import annotations

import base64
import io
import json
import re

import av
import pytest
from emulator_testkit import multipart, pipeline_fields
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.testclient import TestClient
from starlette.websockets import WebSocketDisconnect

from omnireel_local.emulator.middleware import SageMakerRouteMiddleware, json_to_multipart, route_from_headers

ATTR = "X-Amzn-SageMaker-Custom-Attributes"


def _h(*values: str) -> list[tuple[bytes, bytes]]:
    return [(b"x-amzn-sagemaker-custom-attributes", v.encode()) for v in values]


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        (("route=/v1/images/generations",), "/v1/images/generations"),
        (("adapter=x,route=/v1/audio/speech",), "/v1/audio/speech"),
        (("route=/v1/videos/sync,trace=abc",), "/v1/videos/sync"),
        (("trace=1 route=/v1/videos/sync",), "/v1/videos/sync"),
        (("route=/v1/audio/speech;adapter=x",), "/v1/audio/speech;adapter=x"),  # ';' is not a separator
        (("route=v1/no-leading-slash",), None),
        (("adapter=x",), None),
        (("adapter=x", "route=/v1/videos/sync"), None),  # only the FIRST header counts
        (("route=/v1/videos/sync", "route=/v1/images/generations"), "/v1/videos/sync"),
    ],
)
def test_route_from_headers(values, expected):
    assert route_from_headers(_h(*values)) == expected


@pytest.fixture
def echo() -> TestClient:
    """The middleware in front of an app that reports what it received."""

    async def report(request: Request) -> JSONResponse:
        body = await request.body()
        form = None
        if request.headers.get("content-type", "").startswith("multipart/form-data"):
            async with request.form() as parsed:
                form = {k: v for k, v in parsed.multi_items() if isinstance(v, str)}
        return JSONResponse(
            {
                "path": request.scope["path"],
                "raw_path": request.scope["raw_path"].decode(),
                "content_type": request.headers.get("content-type"),
                "content_length": request.headers.get("content-length"),
                "body_b64": base64.b64encode(body).decode(),
                "form": form,
            }
        )

    app = Starlette(routes=[Route("/{path:path}", report, methods=["POST", "GET"])])
    return TestClient(SageMakerRouteMiddleware(app))


def test_rewrites_path_and_raw_path(echo):
    r = echo.post("/invocations", json={"a": 1}, headers={ATTR: "adapter=x,route=/v1/images/generations"})
    assert r.json()["path"] == "/v1/images/generations"
    assert r.json()["raw_path"] == "/v1/images/generations"
    assert base64.b64decode(r.json()["body_b64"]) == b'{"a":1}'


def test_only_invocations_is_routed(echo):
    r = echo.post("/other", json={}, headers={ATTR: "route=/v1/images/generations"})
    assert r.json()["path"] == "/other"
    r = echo.post("/invocations", json={}, headers={ATTR: "adapter=x"})
    assert r.json()["path"] == "/invocations"


def test_json_object_becomes_multipart_on_video_routes(echo):
    payload = {
        "prompt": "a fox",
        "width": 480,
        "guidance_scale": 5.0,
        "generate_sound": True,
        "enable_frame_interpolation": False,
        "image_reference": {"image_url": "data:image/jpeg;base64,AAAA"},
        "lora": ["a", 1],
        "negative_prompt": None,
    }
    for route in ("/v1/videos/sync", "/v1/videos"):
        r = echo.post(
            "/invocations",
            content=json.dumps(payload),
            headers={ATTR: f"route={route}", "Content-Type": "application/json"},
        )
        body = r.json()
        assert body["path"] == route
        match = re.fullmatch(r"multipart/form-data; boundary=([0-9a-f]{32})", body["content_type"])
        assert match, body["content_type"]
        raw = base64.b64decode(body["body_b64"])
        assert int(body["content_length"]) == len(raw)
        assert raw.endswith(f"--{match.group(1)}--\r\n".encode())
        assert body["form"] == {
            "prompt": "a fox",
            "width": "480",
            "guidance_scale": "5.0",
            "generate_sound": "true",
            "enable_frame_interpolation": "false",
            "image_reference": json.dumps({"image_url": "data:image/jpeg;base64,AAAA"}),
            "lora": json.dumps(["a", 1]),
        }


def test_boundary_is_fresh_each_time():
    first, second = json_to_multipart(b'{"a": "b"}'), json_to_multipart(b'{"a": "b"}')
    assert first is not None and second is not None
    assert first[1] != second[1]


@pytest.mark.parametrize("body", [b"{not json", b"[1, 2]", b'"text"', b"42"])
def test_invalid_json_or_non_object_is_replayed_unchanged(echo, body):
    r = echo.post(
        "/invocations", content=body, headers={ATTR: "route=/v1/videos/sync", "Content-Type": "application/json"}
    )
    assert base64.b64decode(r.json()["body_b64"]) == body
    assert r.json()["content_type"] == "application/json"


def test_json_is_not_converted_on_other_routes(echo):
    r = echo.post("/invocations", json={"prompt": "p"}, headers={ATTR: "route=/v1/images/generations"})
    assert r.json()["content_type"] == "application/json"


def test_multipart_passes_through_byte_for_byte(echo):
    body, content_type = multipart({"prompt": "p", "width": "480"})
    r = echo.post("/invocations", content=body, headers={ATTR: "route=/v1/videos/sync", "Content-Type": content_type})
    assert base64.b64decode(r.json()["body_b64"]) == body
    assert r.json()["content_type"] == content_type
    assert r.json()["form"] == {"prompt": "p", "width": "480"}


@pytest.mark.parametrize("path", ["/invocations-bidirectional-stream", "/invocations", "/v1/unknown/stream"])
def test_websocket_paths_outside_allow_list_are_refused_with_1008(client, path):
    with pytest.raises(WebSocketDisconnect) as info, client.websocket_connect(path):
        pass
    assert info.value.code == 1008


def test_websocket_allow_listed_path_is_accepted(client):
    with client.websocket_connect("/v1/audio/speech/stream") as ws:
        ws.send_text(json.dumps({"type": "session.config", "response_format": "pcm"}))
        ws.send_text(json.dumps({"type": "session.close"}))
        with pytest.raises(WebSocketDisconnect):
            ws.receive_text()


def test_invocations_without_route_is_a_json_only_400(client):
    r = client.post("/invocations", json={"messages": []})
    assert r.status_code == 400 and "not serve chat/completions" in r.json()["error"]["message"]
    r = client.post("/invocations", content=b"x", headers={"Content-Type": "text/plain"})
    assert r.status_code == 400 and r.headers["x-omnireel-emulator"] == "vllm-omni-emulator"


def test_json_to_video_sync_through_the_full_app(client):
    fields = pipeline_fields(num_frames="5", width="64", height="48")
    payload = {
        "prompt": fields["prompt"],
        "image_reference": json.loads(fields["image_reference"]),
        "width": 64,
        "height": 48,
        "num_frames": 5,
        "fps": 8,
        "guidance_scale": 5.0,
        "seed": 42,
        "negative_prompt": None,
    }
    r = client.post("/invocations", json=payload, headers={ATTR: "route=/v1/videos/sync"})
    assert r.status_code == 200, r.text
    assert r.headers["content-type"] == "video/mp4"
    with av.open(io.BytesIO(r.content)) as container:
        frames = list(container.decode(video=0))
    assert len(frames) == 5 and (frames[0].width, frames[0].height) == (64, 48)
