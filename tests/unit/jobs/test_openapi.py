"""docs/openapi.yaml is a valid OpenAPI document and does not drift from the request model."""

from pathlib import Path

import msgspec
import pytest
import yaml
from openapi_spec_validator import validate

from omnireel.events.event_types import WEBHOOK_EVENT_TYPES
from omnireel.jobs.request import ImageOptions, JobRequest, VideoOptions, parse_job_request

SPEC = yaml.safe_load((Path(__file__).resolve().parents[3] / "docs" / "openapi.yaml").read_text())
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
