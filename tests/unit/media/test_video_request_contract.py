"""Contract test: the staged multipart parsed with the container's own parser.

vLLM-Omni 0.26.0 parses /v1/videos/sync with FastAPI's Form(), i.e. Starlette's ``request.form()``
with default limits (1 MiB per non-file part). We run exactly that parser on our bytes.
"""

import asyncio
import json

import pytest
from starlette.requests import Request

from omnireel.jobs.request import parse_job_request
from omnireel.media.reference_image import prepare_video_reference
from omnireel.media.video_request import build_video_request
from tests.support.media import png_bytes


def parse_like_the_container(body: bytes, content_type: str):
    async def run():
        sent = False

        async def receive():
            nonlocal sent
            if sent:
                return {"type": "http.disconnect"}
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}

        scope = {
            "type": "http",
            "method": "POST",
            "path": "/v1/videos/sync",
            "headers": [(b"content-type", content_type.encode()), (b"content-length", str(len(body)).encode())],
        }
        form = await Request(scope, receive).form()
        return {key: form.getlist(key) for key in form}

    return asyncio.run(run())


@pytest.fixture(scope="module")
def reference():
    return prepare_video_reference(png_bytes(1024, 1024), 480, 320)


def test_every_field_reaches_the_container_as_a_text_part(reference):
    request = parse_job_request({"prompt": "a lighthouse at dusk, waves", "seed": 42, "negative_prompt": "blurry"})
    staged = build_video_request(request, reference, model_id="Wan-AI/Wan2.1-VACE-1.3B-diffusers")
    assert staged.content_type.startswith("multipart/form-data; boundary=")
    form = parse_like_the_container(staged.body, staged.content_type)
    assert {k: v[0] for k, v in form.items() if k != "image_reference"} == {
        "model": "Wan-AI/Wan2.1-VACE-1.3B-diffusers",
        "prompt": "a lighthouse at dusk, waves",
        "width": "480",
        "height": "320",
        "num_frames": "17",
        "fps": "8",
        "num_inference_steps": "30",
        "guidance_scale": "5.0",
        "seed": "42",
        "negative_prompt": "blurry",
    }
    assert all(len(v) == 1 and isinstance(v[0], str) for v in form.values())  # text parts, no files
    image_reference = json.loads(form["image_reference"][0])
    assert list(image_reference) == ["image_url"]
    assert image_reference["image_url"].startswith("data:image/jpeg;base64,")


def test_optional_fields_are_omitted_when_unset(reference):
    staged = build_video_request(parse_job_request({"prompt": "p"}), reference)
    form = parse_like_the_container(staged.body, staged.content_type)
    assert "seed" not in form and "negative_prompt" not in form and "model" not in form


def test_unicode_prompt_survives_the_round_trip(reference):
    prompt = "夜の東京、ネオン 🌃 — «rain»"
    staged = build_video_request(parse_job_request({"prompt": prompt}), reference)
    assert parse_like_the_container(staged.body, staged.content_type)["prompt"] == [prompt]


def test_the_container_parser_rejects_an_oversize_text_part(reference):
    """Proof that the limit we guard against is real: a >1 MiB text part fails in Starlette."""
    from starlette.formparsers import MultiPartException

    huge = type(reference)(
        part_text=json.dumps({"image_url": "data:image/jpeg;base64," + "A" * (1024 * 1024)}), jpeg_bytes=0, quality=90
    )
    staged = build_video_request(parse_job_request({"prompt": "p"}), huge)
    # Inside the app Starlette turns this into HTTP 400 "Part exceeded maximum size of 1024KB.".
    with pytest.raises(MultiPartException) as caught:
        parse_like_the_container(staged.body, staged.content_type)
    assert "Part exceeded maximum size of 1024KB" in caught.value.message


def test_the_motion_prompt_replaces_the_prompt_in_the_video_call_only(reference):
    from omnireel.media.image_request import image_request_body

    request = parse_job_request(
        {
            "prompt": "a lighthouse at dusk",
            "negative_prompt": "text",
            "video": {"prompt": "the camera pans slowly left, waves roll in", "negative_prompt": "jitter"},
        }
    )
    staged = build_video_request(request, reference)
    form = parse_like_the_container(staged.body, staged.content_type)
    assert form["prompt"] == ["the camera pans slowly left, waves roll in"]
    assert form["negative_prompt"] == ["jitter"]
    image = image_request_body(request, None)
    assert (image["prompt"], image["negative_prompt"]) == ("a lighthouse at dusk", "text")


def test_without_a_motion_prompt_the_video_call_uses_the_prompts(reference):
    request = parse_job_request({"prompt": "a lighthouse", "negative_prompt": "text", "video": {"prompt": None}})
    form = parse_like_the_container(*_staged(request, reference))
    assert (form["prompt"], form["negative_prompt"]) == (["a lighthouse"], ["text"])


def _staged(request, reference):
    staged = build_video_request(request, reference)
    return staged.body, staged.content_type


@pytest.mark.parametrize(
    "body",
    [
        {"prompt": "a fox"},
        {"prompt": '猫 é "quoted"\r\nsecond line', "negative_prompt": "blur", "seed": 7, "guidance_scale": 3},
        {"prompt": "p", "video": {"prompt": "pan --omnireel-x", "negative_prompt": "n", "num_frames": 33}},
    ],
)
def test_the_bytes_are_the_ones_requests_toolbelt_made(reference, body):
    """The encoder moved from requests-toolbelt (which imported all of requests at cold start) to urllib3's; the
    staged bytes did not change (requests-toolbelt stays a test-only dependency for this comparison)."""
    from requests_toolbelt.multipart.encoder import MultipartEncoder

    from omnireel.media.video_request import video_form_fields

    request = parse_job_request(body)
    staged = build_video_request(request, reference, model_id="Wan-AI/x", boundary="omnireel-0123")
    before = MultipartEncoder(fields=video_form_fields(request, reference, "Wan-AI/x"), boundary="omnireel-0123")
    assert (staged.body, staged.content_type) == (before.to_string(), before.content_type)
