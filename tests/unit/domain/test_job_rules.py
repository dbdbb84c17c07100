from omnireel.job import Job, JobStatus, allowed_sources, fingerprint, job_id_for
from omnireel.request import parse_job_request


def test_a_stage_can_be_reentered_but_never_left_backwards():
    assert allowed_sources(JobStatus.GENERATING_IMAGE) == [JobStatus.ACCEPTED, JobStatus.GENERATING_IMAGE]
    assert allowed_sources(JobStatus.RENDERING_VIDEO) == [JobStatus.STAGING_VIDEO, JobStatus.RENDERING_VIDEO]
    assert JobStatus.RENDERING_VIDEO not in allowed_sources(JobStatus.STAGING_VIDEO)
    assert allowed_sources(JobStatus.SUCCEEDED) == [JobStatus.RENDERING_VIDEO]


def test_failed_is_reachable_from_every_live_state_and_terminal_states_are_final():
    sources = allowed_sources(JobStatus.FAILED)
    assert JobStatus.SUCCEEDED not in sources and JobStatus.FAILED not in sources
    assert set(sources) == {s for s in JobStatus if not s.terminal}


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
