from __future__ import annotations

import base64
import hashlib
import io
import json
import time

import av
import pytest
from emulator_testkit import assert_error_shape, pipeline_fields, post_multipart

from omnireel_local.emulator import EmulatorConfig
from omnireel_local.emulator.config import kinds_for_model

IMG = {"prompt": "p", "size": "32x32", "seed": 1}
SMALL_VIDEO = {"width": "64", "height": "48", "num_frames": "3"}
PCM = {"type": "session.config", "response_format": "pcm", "stream_audio": True}


def test_error_rate_gives_500(make_client):
    client = make_client(faults={"images": {"error_rate": 1}})
    assert_error_shape(client.post("/v1/images/generations", json=IMG), 500, "Image generation failed: injected fault")
    video = make_client(faults={"videos": {"error_rate": 1}})
    r = post_multipart(video, "/v1/videos/sync", pipeline_fields(**SMALL_VIDEO))
    assert_error_shape(r, 500, "Video generation failed: injected fault")


def test_throttle_gives_429(make_client):
    client = make_client(faults={"images": {"throttle_rate": 1}, "speech": {"throttle_rate": 1}})
    assert_error_shape(client.post("/v1/images/generations", json=IMG), 429, "throttle")
    assert_error_shape(client.post("/v1/audio/speech", json={"input": "hi"}), 429, "throttle")


def test_latency(make_client):
    client = make_client(faults={"images": {"latency_s": 0.3}})
    started = time.perf_counter()
    assert client.post("/v1/images/generations", json=IMG).status_code == 200
    assert time.perf_counter() - started >= 0.3


def test_hang_is_bounded(make_client):
    client = make_client(faults={"images": {"hang": True, "hang_max_s": 0.3}})
    started = time.perf_counter()
    r = client.post("/v1/images/generations", json=IMG)
    assert time.perf_counter() - started >= 0.3
    assert_error_shape(r, 500, "hang")


def test_hang_hits_the_video_sync_timeout(make_client):
    client = make_client(video_sync_timeout_s=0.2, faults={"videos": {"hang": True}})
    assert_error_shape(post_multipart(client, "/v1/videos/sync", pipeline_fields(**SMALL_VIDEO)), 504, "timed out")


def test_malformed_image_is_not_a_png(make_client):
    client = make_client(faults={"images": {"malformed": True}})
    r = client.post("/v1/images/generations", json=IMG)
    assert r.status_code == 200
    assert not base64.b64decode(r.json()["data"][0]["b64_json"]).startswith(b"\x89PNG")


def test_malformed_video_is_truncated(make_client):
    client = make_client(faults={"videos": {"malformed": True}})
    r = post_multipart(client, "/v1/videos/sync", pipeline_fields(**SMALL_VIDEO))
    assert r.status_code == 200 and r.content[4:8] == b"ftyp"
    try:
        with av.open(io.BytesIO(r.content)) as container:
            decoded = sum(1 for _ in container.decode(video=0))
    except (av.FFmpegError, ValueError, IndexError):
        decoded = -1
    assert decoded != 3, "a truncated MP4 must not decode to the full video"


def test_malformed_speech_stream(make_client):
    client = make_client(faults={"speech": {"malformed": True}})
    with client.websocket_connect("/v1/audio/speech/stream") as ws:
        ws.send_text(json.dumps(PCM))
        ws.send_text(json.dumps({"type": "input.text", "text": "hello world"}))
        ws.send_text(json.dumps({"type": "input.done"}))
        frames, done = [], None
        while done is None:
            message = ws.receive()
            if message.get("bytes") is not None:
                frames.append(message["bytes"])
            elif json.loads(message["text"])["type"] == "audio.done":
                done = json.loads(message["text"])
    received = sum(len(f) for f in frames)
    assert done["total_bytes"] != received or any(len(f) % 2 for f in frames)
    assert any(len(f) % 2 for f in frames)


def test_speech_error_fault_on_websocket(make_client):
    client = make_client(faults={"speech": {"error_rate": 1}})
    with client.websocket_connect("/v1/audio/speech/stream") as ws:
        ws.send_text(json.dumps(PCM))
        ws.send_text(json.dumps({"type": "input.text", "text": "hello"}))
        ws.send_text(json.dumps({"type": "input.done"}))
        types = []
        while not types or types[-1] != "session.done":
            event = json.loads(ws.receive_text())
            types.append(event["type"])
            if event["type"] == "audio.done":
                assert event["error"] is True and event["total_bytes"] == 0
            if event["type"] == "session.done":  # vLLM-Omni 0.26.0 counts the failed sentence
                assert event["total_sentences"] == 1
    assert types == ["audio.start", "error", "audio.done", "session.done"]


def test_speech_throttle_on_websocket_is_a_failed_sentence(make_client):
    client = make_client(faults={"speech": {"throttle_rate": 1}})
    with client.websocket_connect("/v1/audio/speech/stream") as ws:
        ws.send_text(json.dumps(PCM))
        ws.send_text(json.dumps({"type": "input.text", "text": "hello"}))
        ws.send_text(json.dumps({"type": "input.done"}))
        received = [json.loads(ws.receive_text()) for _ in range(4)]
    assert [e["type"] for e in received] == ["audio.start", "error", "audio.done", "session.done"]
    assert received[2]["error"] is True and received[3]["total_sentences"] == 1


def test_faults_are_deterministic_with_a_seed(make_client):
    def outcomes(seed: int) -> list[int]:
        client = make_client(seed=seed, faults={"images": {"error_rate": 0.5}})
        return [client.post("/v1/images/generations", json=IMG).status_code for _ in range(12)]

    first = outcomes(7)
    assert first == outcomes(7)
    assert set(first) == {200, 500}


def test_control_api_flips_faults_at_runtime(client):
    assert client.post("/v1/images/generations", json=IMG).status_code == 200
    r = client.put("/_emulator/config", json={"faults": {"images": {"error_rate": 1}}})
    assert r.status_code == 200 and r.json()["faults"]["images"]["error_rate"] == 1
    assert client.post("/v1/images/generations", json=IMG).status_code == 500
    client.put("/_emulator/config", json={"faults": {"images": {"latency_s": 0.01}}})  # merges, keeps error_rate
    assert client.get("/_emulator/config").json()["faults"]["images"]["error_rate"] == 1
    client.put("/_emulator/config", json={"faults": {"images": None}})
    assert client.post("/v1/images/generations", json=IMG).status_code == 200
    assert_error_shape(
        client.put("/_emulator/config", json={"faults": {"images": {"error_rate": 2}}}), 400, "error_rate"
    )
    assert_error_shape(client.put("/_emulator/config", json={"bogus": 1}), 400, "bogus")
    r = client.put("/_emulator/config", json={"model": "Wan-AI/Wan2.1-VACE-1.3B-diffusers"})
    assert r.json()["served_kinds"] == ["videos"]
    assert client.post("/v1/images/generations", json=IMG).status_code == 503

    stats = client.get("/_emulator/stats").json()
    assert stats["routes"]["images"]["requests"] == 3
    assert stats["routes"]["images"]["error"] == 1
    assert stats["paths"]["POST /v1/images/generations"] == {"200": 2, "500": 1, "503": 1}
    assert client.delete("/_emulator/stats").json()["routes"]["images"] == {}


def test_stats_count_routed_invocations(client):
    client.post(
        "/invocations", json=IMG, headers={"X-Amzn-SageMaker-Custom-Attributes": "route=/v1/images/generations"}
    )
    assert client.get("/_emulator/stats").json()["paths"]["POST /v1/images/generations"] == {"200": 1}


IMAGE_ROUTE, VIDEO_ROUTE = "route=/v1/images/generations", "route=/v1/videos/sync"


def test_stats_record_each_post_service_time_including_the_model_latency(client):
    """bench/orchestration_overhead.py takes each pair's model time from these (request received -> last byte)."""
    client.put("/_emulator/config", json={"faults": {"images": {"latency_s": 0.2}}})
    before = time.time()
    body = json.dumps(IMG).encode()
    client.post(
        "/invocations",
        content=body,
        headers={"Content-Type": "application/json", "X-Amzn-SageMaker-Custom-Attributes": IMAGE_ROUTE},
    )
    [[path, status, started, finished, digest]] = client.get("/_emulator/stats").json()["service_times"]
    assert (path, status) == ("/v1/images/generations", 200)
    assert before <= started and finished - started >= 0.2 and finished <= time.time()
    assert digest == hashlib.sha256(body).hexdigest()
    assert client.delete("/_emulator/stats").json()["service_times"] == []


def test_service_times_tell_requests_apart_by_the_body_as_sent_before_json_becomes_multipart(client):
    """Two video requests differing by one byte get different digests; a JSON body converted to multipart by the
    route middleware (fresh boundary per request) is digested as the client sent it, so the client can recompute it."""
    first = json.dumps({"prompt": "a cat", "num_frames": 5, "width": 64, "height": 64}).encode()
    second = first.replace(b"a cat", b"a bat")
    for body in (first, second):
        response = client.post(
            "/invocations",
            content=body,
            headers={"Content-Type": "application/json", "X-Amzn-SageMaker-Custom-Attributes": VIDEO_ROUTE},
        )
        assert response.status_code == 200, response.text
    served = client.get("/_emulator/stats").json()["service_times"]
    assert [entry[4] for entry in served] == [hashlib.sha256(first).hexdigest(), hashlib.sha256(second).hexdigest()]


def test_config_from_env():
    config = EmulatorConfig.from_env(
        {
            "SM_VLLM_MODEL": "Qwen/Qwen3-TTS-12Hz-1.7B-CustomVoice",
            "OMNIREEL_EMULATOR_SEED": "5",
            "OMNIREEL_EMULATOR_FAULTS": '{"images": {"error_rate": 0.5}, "speech": {"hang": true}}',
            "OMNIREEL_EMULATOR_LATENCY": '{"videos": 2}',
            "OMNIREEL_EMULATOR_SPEECH_REALTIME_FACTOR": "4",
            "VLLM_OMNI_VIDEO_SYNC_TIMEOUT": "30",
        }
    )
    assert config.served_kinds() == {"speech"} and config.seed == 5
    assert config.faults["images"].error_rate == 0.5 and config.faults["speech"].hang_rate == 1.0
    assert config.faults["videos"].latency_s == 2
    assert config.speech_realtime_factor == 4 and config.video_sync_timeout_s == 30
    assert EmulatorConfig.from_env({}).served_kinds() == {"images", "videos", "speech"}


@pytest.mark.parametrize(
    ("model", "kinds"),
    [
        ("black-forest-labs/FLUX.2-klein-4B", {"images"}),
        ("Wan-AI/Wan2.1-VACE-1.3B-diffusers", {"videos"}),
        ("Qwen/Qwen3-TTS-12Hz-1.7B-CustomVoice", {"speech"}),
        ("*", {"images", "videos", "speech"}),
        ("meta-llama/Llama-3.1-8B", set()),
    ],
)
def test_kinds_for_model(model, kinds):
    assert kinds_for_model(model) == kinds
