import pytest

from omnireel.core.errors import InvalidRequest
from omnireel.jobs.request import MAX_PROMPT_CHARS, parse_job_request, parse_job_request_json


def test_defaults_match_the_pipeline_contract():
    request = parse_job_request({"prompt": "a red fox in snow"})
    assert request.image.size == "1024x1024"
    assert request.image.num_inference_steps == 4
    assert (request.video.width, request.video.height) == (480, 320)
    assert request.video.num_frames == 17
    assert request.video.fps == 8
    assert request.video.num_inference_steps == 30
    assert request.guidance_scale == 5.0
    assert request.seed is None and request.negative_prompt is None


def test_any_unicode_prompt_is_accepted():
    prompt = "山の上の猫 🐈 — café, naïve, Ünïcödé"
    assert parse_job_request({"prompt": prompt}).prompt == prompt


@pytest.mark.parametrize(
    ("payload", "fragment"),
    [
        ({}, "prompt: Field required"),
        ({"prompt": ""}, "prompt: String should have at least 1 character"),
        ({"prompt": "   \n\t"}, "prompt: must not be blank"),
        ({"prompt": "x" * (MAX_PROMPT_CHARS + 1)}, "at most 2000 characters"),
        ({"prompt": "ok", "colour": "red"}, "colour: unknown field"),
        ({"prompt": "ok", "video": {"num_frames": 16}}, "video.num_frames: must be 4k+1"),
        ({"prompt": "ok", "video": {"width": 481}}, "video.width"),
        ({"prompt": "ok", "image": {"size": "big"}}, "image.size: must look like 1024x1024"),
        ({"prompt": "ok", "image": {"size": "100x100"}}, "image.size: each side must be 256..2048"),
        ({"prompt": "ok", "seed": -1}, "seed"),
        ({"prompt": "ok", "guidance_scale": 21}, "guidance_scale"),
        ({"prompt": "ok", "video": {"fps": "fast"}}, "video.fps"),
        (["prompt"], "must be a JSON object"),
    ],
)
def test_invalid_requests_name_the_problem(payload, fragment):
    with pytest.raises(InvalidRequest) as caught:
        parse_job_request(payload)
    assert fragment in caught.value.message
    assert caught.value.code == "InvalidRequest"


def test_prompt_limit_is_in_characters_not_bytes():
    prompt = "é" * MAX_PROMPT_CHARS  # 4000 bytes in UTF-8
    assert parse_job_request({"prompt": prompt}).prompt == prompt


def test_all_problems_are_reported_together():
    with pytest.raises(InvalidRequest) as caught:
        parse_job_request({"prompt": "", "extra": 1})
    assert "prompt" in caught.value.message and "extra: unknown field" in caught.value.message


@pytest.mark.parametrize(
    ("raw", "fragment"),
    [
        (b"{not json", "not valid JSON"),
        (b"\xff\xfe{}", "not valid UTF-8"),
        (b'"just a string"', "must be a JSON object"),
    ],
)
def test_json_documents(raw, fragment):
    with pytest.raises(InvalidRequest) as caught:
        parse_job_request_json(raw)
    assert fragment in caught.value.message


def test_json_document_with_nested_options():
    request = parse_job_request_json(
        '{"prompt": "p", "seed": 7, "negative_prompt": "blur", "video": {"num_frames": 33, "fps": 16}}'
    )
    assert request.seed == 7 and request.video.num_frames == 33 and request.video.fps == 16


def test_profile_default_for_video_steps_applies_only_when_unset():
    assert parse_job_request({"prompt": "p"}, default_video_steps=4).video.num_inference_steps == 4
    explicit = parse_job_request({"prompt": "p", "video": {"num_inference_steps": 12}}, default_video_steps=4)
    assert explicit.video.num_inference_steps == 12
    assert parse_job_request_json('{"prompt": "p"}', default_video_steps=4).video.num_inference_steps == 4
    assert parse_job_request({"prompt": "p"}).video.num_inference_steps == 30


@pytest.mark.parametrize("prompt", ["\u200b", "\ufeff \u200b\u2060", "\x00", "\t\r\n"])
def test_invisible_only_prompts_are_blank(prompt):
    with pytest.raises(InvalidRequest, match="prompt: must not be blank"):
        parse_job_request({"prompt": prompt})


def test_nul_characters_are_rejected_in_both_prompts():
    with pytest.raises(InvalidRequest, match="prompt: must not contain NUL"):
        parse_job_request({"prompt": "a\x00b"})
    with pytest.raises(InvalidRequest, match="negative_prompt: must not contain NUL"):
        parse_job_request({"prompt": "ok", "negative_prompt": "x\x00"})


@pytest.mark.parametrize(
    ("video", "fragment"),
    [
        ({"prompt": ""}, "video.prompt: String should have at least 1 character"),
        ({"prompt": " \u200b"}, "video.prompt: must not be blank"),
        ({"prompt": "a\x00"}, "video.prompt: must not contain NUL"),
        ({"prompt": "x" * (MAX_PROMPT_CHARS + 1)}, "video.prompt: String should have at most 2000 characters"),
        ({"prompt": 7}, "video.prompt: Input should be a valid string"),
        ({"negative_prompt": "x\x00"}, "video.negative_prompt: must not contain NUL"),
        ({"negative_prompt": "x" * (MAX_PROMPT_CHARS + 1)}, "video.negative_prompt: String should have at most"),
    ],
)
def test_the_motion_prompts_are_checked_like_the_prompts(video, fragment):
    with pytest.raises(InvalidRequest) as caught:
        parse_job_request({"prompt": "ok", "video": video})
    assert fragment in caught.value.message


def test_a_fingerprint_made_before_the_motion_prompt_existed_still_matches():
    from omnireel.jobs.job import fingerprint

    # The fingerprint of {"prompt": "p"} as records written before video.prompt existed hold it.
    before = "431dce9ba02625a19c7227de16c8cf3992508c8c95aec78fcc19c2def0ea1144"
    request = parse_job_request({"prompt": "p"})
    assert fingerprint(request) != fingerprint(parse_job_request({"prompt": "p", "video": {"prompt": "q"}}))
    assert fingerprint(request) == before
