from __future__ import annotations

import base64
import io

import numpy as np
from emulator_testkit import assert_error_shape
from PIL import Image

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _png(response) -> bytes:
    return base64.b64decode(response.json()["data"][0]["b64_json"])


def test_returns_real_png_of_requested_size_with_documented_shape(client):
    r = client.post("/v1/images/generations", json={"prompt": "a lighthouse at dawn", "size": "320x200", "seed": 3})
    assert r.status_code == 200
    assert r.headers["x-omnireel-emulator"] == "vllm-omni-emulator"
    body = r.json()
    assert set(body) == {"created", "data", "output_format", "size", "cot_output", "metrics"}
    assert isinstance(body["created"], int)
    assert body["output_format"] == "png" and body["size"] == "320x200" and body["cot_output"] is None
    assert set(body["metrics"]) == {"stage_durations", "peak_memory_mb"}
    assert body["data"][0]["url"] is None and body["data"][0]["revised_prompt"] is None
    data = _png(r)
    assert data.startswith(PNG_SIGNATURE)
    img = Image.open(io.BytesIO(data))
    img.load()
    assert img.format == "PNG" and img.size == (320, 200)


def test_deterministic_from_prompt_seed_and_size(client):
    req = {"prompt": "a lighthouse at dawn", "size": "128x96", "seed": 11}
    first = _png(client.post("/v1/images/generations", json=req))
    again = _png(client.post("/v1/images/generations", json=req))
    other_prompt = _png(client.post("/v1/images/generations", json={**req, "prompt": "a castle at night"}))
    other_seed = _png(client.post("/v1/images/generations", json={**req, "seed": 12}))
    assert first == again
    assert first != other_prompt
    assert first != other_seed


def test_image_is_visibly_derived_from_prompt(client):
    def pixels(prompt: str) -> np.ndarray:
        data = _png(client.post("/v1/images/generations", json={"prompt": prompt, "size": "64x64", "seed": 1}))
        return np.asarray(Image.open(io.BytesIO(data)).convert("RGB"), dtype=np.int16)

    a, b = pixels("sunflowers"), pixels("deep ocean")
    differing = np.any(a != b, axis=2).mean()
    assert differing > 0.5
    assert np.abs(a - b).mean() > 10


def test_sagemaker_request_shape_and_unknown_keys_ignored(client):
    r = client.post(
        "/invocations",
        json={
            "model": "black-forest-labs/FLUX.2-klein-4B",
            "prompt": "p",
            "size": "64x64",
            "num_inference_steps": 4,
            "seed": 42,
            "guidance": 3.5,
        },
        headers={"X-Amzn-SageMaker-Custom-Attributes": "route=/v1/images/generations", "Accept": "application/json"},
    )
    assert r.status_code == 200
    assert Image.open(io.BytesIO(_png(r))).size == (64, 64)


def test_default_size_is_1024(client):
    # (Its speed is not asserted here: a wall-time bound failed in the unit lane, at the lowest CPU priority beside a
    # loaded run, 2.6 s against 2.0. The emulators' CPU a job is measured in docs/benchmarks.md.)
    r = client.post("/v1/images/generations", json={"prompt": "a long prompt " * 10, "seed": 5})
    assert r.status_code == 200 and r.json()["size"] is None
    assert Image.open(io.BytesIO(_png(r))).size == (1024, 1024)


def test_null_seed_picks_a_random_seed(make_client):
    client = make_client(seed=None)
    req = {"prompt": "same", "size": "64x64"}
    images = {_png(client.post("/v1/images/generations", json=req)) for _ in range(3)}
    assert len(images) == 3


def test_n_images_and_file_response(client):
    r = client.post("/v1/images/generations", json={"prompt": "p", "size": "32x32", "n": 2, "seed": 1})
    assert len(r.json()["data"]) == 2
    assert r.json()["data"][0]["b64_json"] != r.json()["data"][1]["b64_json"]
    r = client.post("/v1/images/generations", json={"prompt": "p", "size": "32x32", "response_format": "file"})
    assert r.headers["content-type"] == "image/png" and "attachment" in r.headers["content-disposition"]
    assert r.content.startswith(PNG_SIGNATURE)
    r = client.post("/v1/images/generations", json={"prompt": "p", "size": "32x32", "output_format": "jpeg"})
    assert base64.b64decode(r.json()["data"][0]["b64_json"])[:3] == b"\xff\xd8\xff"


def test_non_json_is_400(client):
    r = client.post("/v1/images/generations", content=b"prompt=x", headers={"Content-Type": "text/plain"})
    assert_error_shape(r, 400, "application/json")
    r = client.post("/v1/images/generations", content=b"{not json", headers={"Content-Type": "application/json"})
    assert_error_shape(r, 400, "JSON")


def test_model_mismatch_is_400(make_client):
    client = make_client(model="black-forest-labs/FLUX.2-klein-4B")
    r = client.post("/v1/images/generations", json={"prompt": "p", "model": "other/model", "size": "32x32"})
    assert_error_shape(r, 400, "Model mismatch")
    ok = client.post(
        "/v1/images/generations", json={"prompt": "p", "model": "black-forest-labs/FLUX.2-klein-4B", "size": "32x32"}
    )
    assert ok.status_code == 200


def test_validation_limits(make_client):
    client = make_client(max_generated_image_size=256 * 256)
    assert_error_shape(client.post("/v1/images/generations", json={"size": "32x32"}), 400, "prompt")
    assert_error_shape(client.post("/v1/images/generations", json={"prompt": "p", "n": 11}), 400, "n")
    assert_error_shape(client.post("/v1/images/generations", json={"prompt": "p", "size": "big"}), 400, "size")
    assert_error_shape(client.post("/v1/images/generations", json={"prompt": "p", "size": "axb"}), 400, "size")
    r = client.post("/v1/images/generations", json={"prompt": "p", "response_format": "url"})
    assert_error_shape(r, 400, "response_format")
    assert_error_shape(client.post("/v1/images/generations", json={"prompt": "p", "size": "512x512"}), 400, "maximum")


def test_video_model_does_not_serve_images(make_client):
    client = make_client(model="Wan-AI/Wan2.1-VACE-1.3B-diffusers")
    r = client.post("/v1/images/generations", json={"prompt": "p", "size": "32x32"})
    assert_error_shape(r, 503, "Image generation handler not initialized.")


def test_ping_and_health(client):
    assert client.get("/ping").status_code == 200
    assert client.post("/ping").status_code == 200
    r = client.get("/health")
    assert r.json() == {"status": "healthy"} and r.headers["x-omnireel-emulator"] == "vllm-omni-emulator"
