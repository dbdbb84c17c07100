"""docs/openapi.yaml is a valid OpenAPI document and does not drift from the request model."""

from pathlib import Path

import msgspec
import pytest
import yaml
from openapi_spec_validator import validate

from omnireel.events.event_types import WEBHOOK_EVENT_TYPES
from omnireel.jobs.request import ImageOptions, JobRequest, VideoOptions, parse_job_request

# libyaml's loader (PyYAML's wheels ship it): every test process collects this module; the pure-Python one took ~0.4 s
SPEC = yaml.load((Path(__file__).resolve().parents[3] / "docs" / "openapi.yaml").read_text(), Loader=yaml.CSafeLoader)
SCHEMAS = SPEC["components"]["schemas"]


def test_spec_is_valid():
    validate(SPEC)


@pytest.mark.parametrize(
    ("schema", "model"),
    [
        (SCHEMAS["JobRequest"], JobRequest),
        (SCHEMAS["JobRequest"]["properties"]["image"], ImageOptions),
        (SCHEMAS["JobRequest"]["properties"]["video"], VideoOptions),
    ],
)
def test_documented_fields_are_the_model_fields(schema, model):
    assert set(schema["properties"]) == set(model.__struct_fields__)


def test_documented_defaults_are_the_model_defaults():
    request = parse_job_request({"prompt": "p"})
    video = SCHEMAS["JobRequest"]["properties"]["video"]["properties"]
    assert {k: v["default"] for k, v in video.items()} == msgspec.to_builtins(request.video)
    image = SCHEMAS["JobRequest"]["properties"]["image"]["properties"]
    assert {k: v["default"] for k, v in image.items()} == msgspec.to_builtins(request.image)


def test_examples_are_valid_requests():
    examples = SPEC["paths"]["/jobs"]["post"]["requestBody"]["content"]["application/json"]["examples"]
    for example in examples.values():
        parse_job_request(example["value"])


def test_documented_webhook_events_are_the_event_types():
    """Issue 36: the event types are defined once (``omnireel.events.event_types``); the document lists them all, in
    order, and bounds the list by their number, as the request check does."""
    documented = SCHEMAS["JobRequest"]["properties"]["webhook_events"]
    assert documented["items"]["enum"] == list(WEBHOOK_EVENT_TYPES)
    assert documented["maxItems"] == len(WEBHOOK_EVENT_TYPES)


class _NoArtifacts:
    def presign(self, uri, seconds):  # a job without artifacts never asks
        raise AssertionError("no artifact to presign")


def _job(**fields):
    from omnireel.jobs.job import Job, JobStatus

    stamp = "2026-12-05T16:00:00.000Z"
    return Job(job_id="j-1", status=JobStatus.SUCCEEDED, request=None, source="api", created_at=stamp,
               updated_at=stamp, **fields)  # fmt: skip


def test_the_job_view_is_the_documented_job():
    """GET /jobs/{id}: every key the view writes is documented, and every documented property is written."""
    from omnireel.jobs.job_view import job_view

    view = job_view(_job(), _NoArtifacts(), 60)  # type: ignore[arg-type]
    assert set(view) == set(SCHEMAS["Job"]["properties"])
    assert set(SCHEMAS["Job"]["required"]) <= set(view)


def test_the_job_view_says_when_the_terminal_event_went_out():
    """Null while the status is terminal but the event not yet recorded (finish_job: transition, publish, record)."""
    from omnireel.jobs.job_view import job_view

    assert job_view(_job(), _NoArtifacts(), 60)["event_published_at"] is None  # type: ignore[arg-type]
    published = _job(event_published_at="2026-12-05T16:00:01.000Z")
    assert job_view(published, _NoArtifacts(), 60)["event_published_at"] == "2026-12-05T16:00:01.000Z"  # type: ignore[arg-type]
