import json

import jsonschema
import msgspec

from omnireel.core.clock import now
from omnireel.core.records import to_json
from omnireel.events.job_events import EventArtifacts, build_job_event
from omnireel.jobs.job import Job, JobError, JobStatus
from omnireel.jobs.request import parse_job_request
from scripts.event_schemas import EVENTS, all_mismatches, schema, shape_mismatches


def test_the_event_structs_have_the_published_schemas_shape():
    """Properties, required fields, defaults and closed objects, through every nested object
    (``scripts/event_schemas.py``)."""
    assert all_mismatches() == []
    assert len(EVENTS) == 4


def test_the_queued_and_expired_events_validate_against_their_schemas():
    """Issue 34: job.queued (progress, only when a job waits) and job.expired (terminal: never admitted)."""
    from omnireel.events.job_events import QueuePosition, build_queued_event
    from scripts.event_schemas import QUEUED_SCHEMA_PATH

    queued = build_queued_event(
        _job(JobStatus.QUEUED), QueuePosition(kind="image", position=2, callers=3, enqueued_at="2026-11-29T12:00:01Z")
    )
    jsonschema.Draft202012Validator(json.loads(QUEUED_SCHEMA_PATH.read_text())).validate(json.loads(to_json(queued)))
    expired = build_job_event(
        _job(JobStatus.EXPIRED, error=JobError(stage="queue", code="QueueTimeExceeded", message="not admitted")),
        EventArtifacts(),
        now(),
    )
    jsonschema.Draft202012Validator(schema()).validate(json.loads(to_json(expired)))
    assert (queued.event_type, expired.event_type, expired.status) == ("job.queued", "job.expired", "expired")


def test_the_shape_check_finds_a_field_the_schema_lacks_and_a_changed_default():
    from omnireel.events.job_events import EventTimings

    document = schema()
    timings = document["$defs"]["EventTimings"]
    assert shape_mismatches(EventTimings, timings, document, "t") == []
    wider = msgspec.defstruct("EventTimings", [*((n, float | None, None) for n in EventTimings.__struct_fields__),
                                              ("extra_s", float | None, None)], kw_only=True)  # fmt: skip
    assert "fields" in shape_mismatches(wider, timings, document, "t")[0]
    moved = msgspec.defstruct("EventTimings", [(n, float | None, 0.0) for n in EventTimings.__struct_fields__])
    assert any("default" in problem for problem in shape_mismatches(moved, timings, document, "t"))


def _job(status: JobStatus, **extra) -> Job:
    return Job(
        job_id="0b6f1c1e-5a0e-4d55-9c3e-2f8f0f7d6a11",
        status=status,
        request=parse_job_request({"prompt": "p"}),
        source="api",
        created_at="2026-11-29T12:00:00.000Z",
        updated_at="2026-11-29T12:00:00.000Z",
        **extra,
    )


def test_events_validate_against_the_schema():
    validator = jsonschema.Draft202012Validator(schema())
    ok = build_job_event(_job(JobStatus.SUCCEEDED), EventArtifacts(), now())
    failed = build_job_event(
        _job(JobStatus.FAILED, error=JobError(stage="generate_image", code="EndpointUnavailable", message="503")),
        EventArtifacts(),
        now(),
    )
    for event in (ok, failed):
        validator.validate(json.loads(to_json(event)))
    assert ok.event_type == "job.succeeded" and failed.event_type == "job.failed"
    assert ok.event_id != failed.event_id
    assert build_job_event(_job(JobStatus.SUCCEEDED), EventArtifacts(), now()).event_id == ok.event_id


def test_an_event_with_every_field_set_validates_against_the_schema():
    """Every optional part present (a dropped file's batch job with a webhook, all artifacts and timings), for each
    terminal status: what the functions publish, not only the defaults."""
    from omnireel.core.s3uri import SourceVersion
    from omnireel.events.job_events import ArtifactLink
    from omnireel.jobs.job import Artifacts, BatchRef

    request = parse_job_request(
        {
            "prompt": "p", "negative_prompt": "n", "seed": 7, "guidance_scale": 3, "image": {"size": "512x512"},
            "video": {"prompt": "pan", "negative_prompt": "blur", "num_frames": 9},
            "webhook": "https://example.com/h", "webhook_events": ["job.image_ready", "job.failed"],
        }
    )  # fmt: skip
    link = ArtifactLink(s3_uri="s3://b/k", url="https://b.s3.amazonaws.com/k", expires_at="2026-12-01T01:00:00.000Z")
    times = {s: f"2026-11-29T12:00:0{i}.000Z" for i, s in enumerate(["accepted", "generating_image", "staging_video",
                                                                      "rendering_video", "succeeded"])}  # fmt: skip
    validator = jsonschema.Draft202012Validator(schema())
    for status in (JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.CANCELLED):
        job = _job(
            status, source_version=SourceVersion(version_id="v1", etag='"e"'),
            batch=BatchRef(batch_id="b1", line=3), stage_times=times,
            artifacts=Artifacts(image="s3://b/i", video_request="s3://b/r", video="s3://b/v"),
            error=JobError(stage="render_video", code="X", message="m") if status is not JobStatus.SUCCEEDED else None,
        )  # fmt: skip
        job.request, job.source = request, "s3://inbox/prompts/a.jsonl"
        event = build_job_event(job, EventArtifacts(image=link, video_request=link, video=link), now())
        body = json.loads(to_json(event))
        validator.validate(body)
        assert body["timings"]["total_s"] is not None and body["request"]["webhook_events"] == [
            "job.image_ready",
            "job.failed",
        ]


def test_schema_rejects_a_wrong_event():
    validator = jsonschema.Draft202012Validator(schema())
    bad = json.loads(to_json(build_job_event(_job(JobStatus.SUCCEEDED), EventArtifacts(), now())))
    bad["status"] = "maybe"
    assert list(validator.iter_errors(bad))


def test_a_rebuilt_event_is_the_same_event():
    """A retried publish (after a crash between publish and record) must re-send the same event."""
    from datetime import timedelta

    job = _job(JobStatus.SUCCEEDED, stage_times={"succeeded": "2026-11-29T12:00:20.000Z"})
    first = build_job_event(job, EventArtifacts(), now())
    again = build_job_event(job, EventArtifacts(), now() + timedelta(minutes=3))
    assert first == again and first.occurred_at == "2026-11-29T12:00:20.000Z"


def test_the_image_ready_schema_validates_the_event():
    from omnireel.events.job_events import ArtifactLink, build_image_ready_event, sns_message_attributes
    from scripts.event_schemas import image_ready_schema

    job = _job(JobStatus.GENERATING_IMAGE, execution_name="0b6f1c1e-5a0e-4d55-9c3e-2f8f0f7d6a11-abc")
    link = ArtifactLink(
        s3_uri="s3://b/jobs/x/image.png", url="https://b.s3.amazonaws.com/x", expires_at="2026-12-01T01:00:00Z"
    )
    event = build_image_ready_event(job, link, "2026-12-01T00:00:00.000Z")
    jsonschema.Draft202012Validator(image_ready_schema()).validate(json.loads(to_json(event)))
    assert event.event_type == "job.image_ready" and event.status == "generating_image"
    assert event.event_id == build_image_ready_event(job, link, "2026-12-01T00:00:09.000Z").event_id
    assert event.event_id != build_job_event(_job(JobStatus.SUCCEEDED), EventArtifacts(), now()).event_id
    assert sns_message_attributes(event)["event_type"]["StringValue"] == "job.image_ready"
