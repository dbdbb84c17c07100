import json
from pathlib import Path

import jsonschema

from omnireel.events import EventArtifacts, build_job_event
from omnireel.job import Job, JobError, JobStatus, now
from omnireel.request import parse_job_request
from scripts.write_event_schema import SCHEMA_PATH, schema


def test_published_schema_is_current():
    assert json.loads(Path(SCHEMA_PATH).read_text()) == schema(), "run: .venv/bin/python scripts/write_event_schema.py"


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
        validator.validate(json.loads(event.model_dump_json()))
    assert ok.event_type == "job.succeeded" and failed.event_type == "job.failed"
    assert ok.event_id != failed.event_id
    assert build_job_event(_job(JobStatus.SUCCEEDED), EventArtifacts(), now()).event_id == ok.event_id


def test_schema_rejects_a_wrong_event():
    validator = jsonschema.Draft202012Validator(schema())
    bad = json.loads(build_job_event(_job(JobStatus.SUCCEEDED), EventArtifacts(), now()).model_dump_json())
    bad["status"] = "maybe"
    assert list(validator.iter_errors(bad))


def test_a_rebuilt_event_is_the_same_event():
    """A retried publish (after a crash between publish and record) must re-send the same event."""
    from datetime import timedelta

    job = _job(JobStatus.SUCCEEDED, stage_times={"succeeded": "2026-11-29T12:00:20.000Z"})
    first = build_job_event(job, EventArtifacts(), now())
    again = build_job_event(job, EventArtifacts(), now() + timedelta(minutes=3))
    assert first == again and first.occurred_at == "2026-11-29T12:00:20.000Z"


def test_the_image_ready_schema_is_current_and_validates_the_event():
    from omnireel.events import ArtifactLink, build_image_ready_event, sns_message_attributes
    from scripts.write_event_schema import IMAGE_READY_SCHEMA_PATH, image_ready_schema

    assert json.loads(Path(IMAGE_READY_SCHEMA_PATH).read_text()) == image_ready_schema()
    job = _job(JobStatus.GENERATING_IMAGE, execution_name="0b6f1c1e-5a0e-4d55-9c3e-2f8f0f7d6a11-abc")
    link = ArtifactLink(
        s3_uri="s3://b/jobs/x/image.png", url="https://b.s3.amazonaws.com/x", expires_at="2026-12-01T01:00:00Z"
    )
    event = build_image_ready_event(job, link, "2026-12-01T00:00:00.000Z")
    jsonschema.Draft202012Validator(image_ready_schema()).validate(json.loads(event.model_dump_json()))
    assert event.event_type == "job.image_ready" and event.status == "generating_image"
    assert event.event_id == build_image_ready_event(job, link, "2026-12-01T00:00:09.000Z").event_id
    assert event.event_id != build_job_event(_job(JobStatus.SUCCEEDED), EventArtifacts(), now()).event_id
    assert sns_message_attributes(event)["event_type"]["StringValue"] == "job.image_ready"
