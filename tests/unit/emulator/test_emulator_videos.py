from __future__ import annotations

import io
import json
import re
import time

import av
import numpy as np
import pytest
from emulator_testkit import assert_error_shape, pipeline_fields, post_multipart, reference_jpeg

SYNC = "/v1/videos/sync"


class Info:
    def __init__(self, stream) -> None:
        self.width, self.height = stream.width, stream.height
        self.average_rate = stream.average_rate
        self.pix_fmt = stream.codec_context.pix_fmt
        self.declared_frames = stream.frames


def decode(mp4: bytes) -> tuple[list[np.ndarray], Info, str]:
    """Really decode the MP4 with PyAV: (RGB frames, stream info, codec name)."""
    with av.open(io.BytesIO(mp4)) as container:
        stream = container.streams.video[0]
        frames = [frame.to_ndarray(format="rgb24") for frame in container.decode(video=0)]
        return frames, Info(stream), stream.codec_context.name


def test_pipeline_request_returns_real_h264_mp4(client):
    r = post_multipart(client, SYNC, pipeline_fields())
    assert r.status_code == 200, r.text
    assert r.headers["content-type"] == "video/mp4"
    assert r.content[4:8] == b"ftyp"
    assert re.fullmatch(r"video_sync-[0-9a-f-]{36}", r.headers["x-request-id"])
    assert r.headers["x-model"] == "Wan-AI/Wan2.1-VACE-1.3B-diffusers"
    assert float(r.headers["x-inference-time-s"]) >= 0
    assert isinstance(json.loads(r.headers["x-stage-durations"]), dict)
    assert float(r.headers["x-peak-memory-mb"]) >= 0
    assert r.headers["x-omnireel-emulator"] == "vllm-omni-emulator"
    frames, stream, codec = decode(r.content)
    assert codec == "h264"
    assert len(frames) == 17
    assert (stream.width, stream.height) == (480, 320)
    assert all(f.shape == (320, 480, 3) for f in frames)
    assert stream.average_rate == 8
    assert stream.pix_fmt == "yuv420p"
    assert stream.declared_frames == 17


def test_video_is_animated_from_the_reference_image(client):
    r = post_multipart(client, SYNC, pipeline_fields(width="96", height="64", num_frames="9", fps="8"))
    frames, _, _ = decode(r.content)
    first = frames[0].astype(np.int16)
    # Reference: red left half, blue right half.
    left, right = first[:, :30].mean(axis=(0, 1)), first[:, -30:].mean(axis=(0, 1))
    assert left[0] > left[2] + 80, left
    assert right[2] > right[0] + 80, right
    assert np.abs(frames[-1].astype(np.int16) - first).mean() > 3  # it moves


def test_without_reference_animates_a_prompt_image_and_is_deterministic(client):
    fields = pipeline_fields(image_reference=None, width="64", height="48", num_frames="5")
    a = post_multipart(client, SYNC, fields).content
    b = post_multipart(client, SYNC, fields).content
    other = post_multipart(client, SYNC, {**fields, "prompt": "something else"}).content
    fa, fo = decode(a)[0], decode(other)[0]
    assert len(fa) == 5
    assert np.array_equal(fa[0], decode(b)[0][0])
    assert np.abs(fa[0].astype(np.int16) - fo[0]).mean() > 5


def test_input_reference_file_part(client):
    fields = pipeline_fields(image_reference=None, width="64", height="48", num_frames="5")
    fields["input_reference"] = ("ref.jpg", reference_jpeg(64, 48), "image/jpeg")
    r = post_multipart(client, SYNC, fields)
    assert r.status_code == 200, r.text
    assert len(decode(r.content)[0]) == 5


def test_param_resolution(client):
    r = post_multipart(client, SYNC, pipeline_fields(size="64x48", num_frames="5"))
    frames, stream, _ = decode(r.content)
    assert (stream.width, stream.height) == (64, 48)  # size overrides width/height
    r = post_multipart(client, SYNC, pipeline_fields(width="64", height="48", num_frames=None, seconds="2", fps="3"))
    frames, stream, _ = decode(r.content)
    assert len(frames) == 5 and stream.average_rate == 3  # num_frames = seconds * fps = 6, then 4 * (6 // 4) + 1 = 5
    r = post_multipart(client, SYNC, pipeline_fields(width="64", height="48", num_frames="5", fps=None))
    assert decode(r.content)[1].average_rate == 24  # fps defaults to 24


@pytest.mark.parametrize(
    ("asked", "frames", "rendered"),
    [
        (("100", "70"), "16", (96, 64, 17)),  # 16 is not 4k+1: 4 * (16 // 4) + 1
        (("480", "320"), "17", (480, 320, 17)),  # the pipeline's own request: unchanged
        (("481", "335"), "18", (480, 320, 17)),
        (("31", "47"), "1", (16, 32, 1)),
        (("64", "48"), "4", (64, 48, 5)),
        (("64", "48"), "2", (64, 48, 1)),
    ],
)
def test_geometry_is_rounded_as_the_wan_pipeline_rounds_it(client, asked, frames, rendered):
    """vLLM-Omni 0.26.0's Wan pipelines round width/height down to a multiple of 16 and the frame count down to 4k+1
    (4 * (n // 4) + 1; issue 27 item 11): the emulator rendered exactly what was asked."""
    width, height = asked
    r = post_multipart(client, SYNC, pipeline_fields(width=width, height=height, num_frames=frames))
    assert r.status_code == 200, r.text
    decoded, stream, _ = decode(r.content)
    assert (stream.width, stream.height, len(decoded)) == rendered


def test_part_over_one_mib_is_starlettes_400(client):
    big = '{"image_url":"data:image/jpeg;base64,' + "A" * (1024 * 1024 + 10) + '"}'
    r = post_multipart(client, SYNC, pipeline_fields(image_reference=big))
    assert r.status_code == 400
    assert r.json() == {"detail": "Part exceeded maximum size of 1024KB."}


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"prompt": None}, "prompt"),
        ({"image_reference": "{not json"}, "Invalid JSON in form field."),
        ({"image_reference": '{"file_id": "file-123"}'}, "not supported yet"),
        ({"image_reference": '{"image_url": "https://example.com/a.jpg"}'}, "no network"),
        ({"image_reference": '{"image_url": "data:image/jpeg;base64,!!!"}'}, "base64"),
        ({"image_reference": '{"image_url": "data:image/jpeg;base64,AAAA"}'}, "could not decode"),
        ({"video_reference": '{"video_url": "data:video/mp4;base64,AAAA"}'}, "Only one of"),
        ({"width": "8"}, "at least 16"),
        ({"width": "abc"}, "width"),
        ({"num_inference_steps": "201"}, "num_inference_steps"),
        ({"guidance_scale": "25"}, "guidance_scale"),
        ({"seconds": "0", "num_frames": None}, "seconds"),
        ({"size": "480*320"}, "size"),
        ({"lora": "[1]"}, "lora"),
    ],
)
def test_bad_requests_are_400(client, overrides, message):
    assert_error_shape(post_multipart(client, SYNC, pipeline_fields(**overrides)), 400, message)


def test_json_body_without_middleware_is_400(client):
    r = client.post(SYNC, json={"prompt": "p"})
    assert_error_shape(r, 400, "multipart/form-data")


def test_image_model_does_not_serve_video(make_client):
    client = make_client(model="black-forest-labs/FLUX.2-klein-4B")
    r = post_multipart(client, SYNC, pipeline_fields())
    assert_error_shape(r, 503, "Video generation handler not initialized.")


def test_server_side_timeout_is_504(make_client):
    client = make_client(video_sync_timeout_s=0.2, faults={"videos": {"latency_s": 5}})
    started = time.perf_counter()
    r = post_multipart(client, SYNC, pipeline_fields(width="64", height="48"))
    assert time.perf_counter() - started < 3
    assert_error_shape(r, 504, "Video generation timed out after 0.2s")


def test_async_job_api(client):
    r = post_multipart(client, "/v1/videos", pipeline_fields(size="70x48", num_frames="5"))
    assert r.status_code == 200, r.text
    job = r.json()
    assert job["object"] == "video" and job["status"] == "queued" and job["id"].startswith("video_gen_")
    # VideoResponse.size is the requested size as sent (0.26.0 video_response_from_request), not the rendered 64x48
    assert job["size"] == "70x48" and job["media_type"] == "video/mp4" and job["progress"] == 0
    deadline = time.monotonic() + 15
    while True:
        status = client.get(f"/v1/videos/{job['id']}").json()
        if status["status"] == "completed" or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert status["status"] == "completed" and status["progress"] == 100
    content = client.get(f"/v1/videos/{job['id']}/content")
    assert content.headers["content-type"] == "video/mp4"
    assert len(decode(content.content)[0]) == 5
    listing = client.get("/v1/videos", params={"limit": 10}).json()
    assert listing["object"] == "list" and listing["data"][0]["id"] == job["id"] and listing["has_more"] is False
    deleted = client.delete(f"/v1/videos/{job['id']}").json()
    assert deleted == {"id": job["id"], "deleted": True, "object": "video.deleted"}
    assert_error_shape(client.get(f"/v1/videos/{job['id']}"), 404, "Video not found")


def test_async_job_content_before_completion_is_404(make_client):
    client = make_client(faults={"videos": {"latency_s": 5}})
    job = post_multipart(client, "/v1/videos", pipeline_fields(width="64", height="48")).json()
    assert_error_shape(client.get(f"/v1/videos/{job['id']}/content"), 404, "still in-progress")
    assert client.get(f"/v1/videos/{job['id']}").json()["status"] == "in_progress"
    client.delete(f"/v1/videos/{job['id']}")


def test_the_same_request_renders_the_same_bytes_whatever_thread_encodes_it():
    """The emulator renders on worker threads (asyncio.to_thread): libx264's macroblock tree gave different bytes for
    the same frames from one thread to another at small sizes (a CI run's determinism failure); now every encode of
    the same request is identical."""
    from concurrent.futures import ThreadPoolExecutor

    from omnireel_local.emulator.videos import VideoParams, render_video

    params = VideoParams(width=64, height=48, num_frames=5, fps=24, seed=7)
    with ThreadPoolExecutor(8) as pool:
        outputs = set(pool.map(lambda _: render_video("a kite", None, params), range(64)))
    assert len(outputs) == 1
