import pytest

from omnireel.core.ids import job_id_for
from omnireel.jobs.job import Job, JobStatus, allowed_sources, fingerprint
from omnireel.jobs.request import parse_job_request


def test_a_stage_can_be_reentered_but_never_left_backwards():
    # queued is optional: entered only by a job that waits for its first slot (issue 34)
    assert allowed_sources(JobStatus.GENERATING_IMAGE) == [
        JobStatus.ACCEPTED,
        JobStatus.QUEUED,
        JobStatus.GENERATING_IMAGE,
    ]
    assert allowed_sources(JobStatus.QUEUED) == [JobStatus.ACCEPTED, JobStatus.QUEUED]
    assert allowed_sources(JobStatus.RENDERING_VIDEO) == [JobStatus.STAGING_VIDEO, JobStatus.RENDERING_VIDEO]
    assert JobStatus.RENDERING_VIDEO not in allowed_sources(JobStatus.STAGING_VIDEO)
    assert allowed_sources(JobStatus.SUCCEEDED) == [JobStatus.RENDERING_VIDEO]


def test_failed_is_reachable_from_every_live_state_and_terminal_states_are_final():
    sources = allowed_sources(JobStatus.FAILED)
    assert JobStatus.SUCCEEDED not in sources and JobStatus.FAILED not in sources
    assert set(sources) == {s for s in JobStatus if not s.terminal}


def test_only_a_job_never_admitted_can_expire():
    assert allowed_sources(JobStatus.EXPIRED) == [JobStatus.ACCEPTED, JobStatus.QUEUED]
    assert JobStatus.EXPIRED.terminal


def test_job_ids_are_stable_per_natural_key_and_fit_sagemaker_and_step_functions():
    a, b = job_id_for("api:arn:user/x:key-1"), job_id_for("api:arn:user/x:key-1")
    assert a == b != job_id_for("api:arn:user/y:key-1")
    assert len(a) <= 64 and all(c.isalnum() or c == "-" for c in a)


def test_fingerprint_ignores_how_defaults_were_spelled():
    explicit = parse_job_request({"prompt": "p", "video": {"num_frames": 17}})
    assert fingerprint(explicit) == fingerprint(parse_job_request({"prompt": "p"}))
    assert fingerprint(explicit) != fingerprint(parse_job_request({"prompt": "q"}))


def test_timings_per_stage():
    job = Job(
        job_id="j",
        status=JobStatus.SUCCEEDED,
        request=parse_job_request({"prompt": "p"}),
        source="api",
        created_at="2026-11-29T12:00:00.000Z",
        updated_at="2026-11-29T12:00:20.000Z",
        stage_times={
            "accepted": "2026-11-29T12:00:00.000Z",
            "generating_image": "2026-11-29T12:00:00.500Z",
            "staging_video": "2026-11-29T12:00:05.500Z",
            "rendering_video": "2026-11-29T12:00:06.000Z",
            "succeeded": "2026-11-29T12:00:20.000Z",
        },
    )
    assert job.timings() == {"image_s": 5.0, "staging_s": 0.5, "video_queue_and_render_s": 14.0, "total_s": 20.0}


# Computed with the pydantic models (commit 4c3e524) before they were replaced: the idempotency check compares a
# retried submission's fingerprint with the one stored on its record, so these must never change.
PINNED_FINGERPRINTS = [
    ({"prompt": "a red fox in snow"}, None, "b7c2f5fc265a1504b1db395119684ba71d4c2c2d97bcc336a54e1b0406875326"),
    (
        {"prompt": "p", "guidance_scale": 7, "seed": 42},
        None,
        "1f3ddc6a86f6cf04931ef347a9234a6740761bba7a287c58dd4fd74679227450",
    ),
    (
        {
            "prompt": "山の上の猫 🐈 — café",
            "negative_prompt": "blur",
            "guidance_scale": 3.25,
            "image": {"size": "512x768", "num_inference_steps": 8},
            "video": {"width": 640, "height": 384, "num_frames": 33, "fps": 16, "num_inference_steps": 12},
        },
        None,
        "a0cdac995bd2542314ba63f087d2ac0ca7a7129b51cc2c6b3eb41dd712f854de",
    ),
    (
        {"prompt": "p", "video": {"prompt": "slow pan", "negative_prompt": ""}},
        None,
        "5b269aba303c3816012a28aa2be58157cf85cba5e2bf18ed6b330f340fc52121",
    ),
    (
        {"prompt": "p", "webhook": "https://example.com/hook", "webhook_events": ["job.failed", "job.image_ready"]},
        None,
        "6962587ed0074aa5249ad9efd546a7cfe329593dd9d1160a472205db7488a512",
    ),
    (
        {"prompt": "p", "seed": 0, "guidance_scale": 0},
        None,
        "832cd998819f59a3e3ad723672cd20762a6cec25862482bb86c84c43e21073eb",
    ),
    ({"prompt": "p"}, 4, "21e64163a561941acf94620b88a71f7ce65789223a61ecef14c791c26c9d54dd"),
]


@pytest.mark.parametrize(("body", "default_video_steps", "expected"), PINNED_FINGERPRINTS)
def test_fingerprints_of_existing_records_never_change(body, default_video_steps, expected):
    assert fingerprint(parse_job_request(body, default_video_steps=default_video_steps)) == expected
