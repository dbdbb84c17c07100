"""``POST /v1/chat/completions`` as vLLM-Omni 0.26.0 answers it for a diffusion model (issue 27 item 11).

The request shape is the one vLLM-Omni's own example clients send (``examples/online_serving/text_to_video/
openai_chat_client.py``: ``{"messages": [...], "extra_body": {...}}`` posted as JSON); the answers are read from the
0.26.0 wheel (see ``omnireel_local/emulator/chat.py``)."""

from __future__ import annotations

import base64
import io

import pytest
from emulator_testkit import assert_error_shape
from PIL import Image

from omnireel_local.emulator.chat import NOT_SUPPORTED, VIDEO_MODEL_CHAT_FAILURE, prompt_of

CHAT = "/v1/chat/completions"
IMAGE_MODEL = "black-forest-labs/FLUX.2-klein-4B"
VIDEO_MODEL = "Wan-AI/Wan2.1-VACE-1.3B-diffusers"
TTS_MODEL = "Qwen/Qwen3-TTS-12Hz-1.7B-CustomVoice"


def _example_payload(prompt: str = "A cinematic shot of a flying kite over the ocean.", **extra_body: object) -> dict:
    return {"messages": [{"role": "user", "content": prompt}], "extra_body": extra_body}


def test_an_image_model_answers_png_parts(make_client):
    client = make_client(model=IMAGE_MODEL)
    r = client.post(CHAT, json=_example_payload(height=48, width=64, seed=7, num_outputs_per_prompt=2))
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["object"] == "chat.completion" and body["id"].startswith("chatcmpl-") and body["model"] == IMAGE_MODEL
    choice = body["choices"][0]
    assert choice["finish_reason"] == "stop" and choice["message"]["role"] == "assistant"
    parts = choice["message"]["content"]
    assert [p["type"] for p in parts] == ["image_url", "image_url"]
    header, data = parts[0]["image_url"]["url"].split(",", 1)
    assert header == "data:image/png;base64"
    image = Image.open(io.BytesIO(base64.b64decode(data)))
    assert (image.format, image.size) == ("PNG", (64, 48))
    again = client.post(CHAT, json=_example_payload(height=48, width=64, seed=7)).json()
    assert again["choices"][0]["message"]["content"][0]["image_url"] == parts[0]["image_url"]  # seeded


def test_parameters_may_sit_at_the_root_and_size_is_read(make_client):
    client = make_client(model=IMAGE_MODEL)
    r = client.post(CHAT, json={"messages": [{"role": "user", "content": "p"}], "size": "32x16"})
    url = r.json()["choices"][0]["message"]["content"][0]["image_url"]["url"]
    assert Image.open(io.BytesIO(base64.b64decode(url.split(",", 1)[1]))).size == (32, 16)


def test_a_video_model_fails_as_the_pinned_container_does(make_client):
    """0.26.0 hands the Wan pipeline's NumPy video to PIL's save: a 500, not a video (use /v1/videos/sync)."""
    client = make_client(model=VIDEO_MODEL)
    r = client.post(CHAT, json=_example_payload(height=320, width=480, num_frames=17, fps=16))
    assert_error_shape(r, 500, VIDEO_MODEL_CHAT_FAILURE)


def test_a_video_model_still_validates_the_request_first(make_client):
    client = make_client(model=VIDEO_MODEL)
    assert_error_shape(client.post(CHAT, json=_example_payload(height=8, width=480)), 400, "at least 16")
    assert_error_shape(client.post(CHAT, json={"prompt": "no messages"}), 400, "messages")


def test_json_only(make_client):
    client = make_client(model=IMAGE_MODEL)
    r = client.post(CHAT, content=b"messages=x", headers={"Content-Type": "application/x-www-form-urlencoded"})
    assert_error_shape(r, 400, "Only 'application/json' is allowed")


def test_a_speech_model_is_not_a_diffusion_chat_model(make_client):
    assert_error_shape(make_client(model=TTS_MODEL).post(CHAT, json=_example_payload()), 404, NOT_SUPPORTED)


@pytest.mark.parametrize(
    ("messages", "prompt"),
    [
        ([{"role": "user", "content": "a kite"}], "a kite"),
        ([{"role": "system", "content": "ignored"}, {"role": "user", "content": "a kite"}], "a kite"),
        ([{"role": "user", "content": [{"type": "text", "text": "a"}, {"text": "kite"}, "over the sea"]}],
         "a kite over the sea"),
        ([{"role": "user", "content": "a"}, {"role": "assistant", "content": "x"}, {"role": "user", "content": "b"}],
         "a b"),
    ],
)  # fmt: skip
def test_the_prompt_is_every_user_text_joined(messages, prompt):
    assert prompt_of(messages) == prompt
