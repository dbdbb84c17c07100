"""Regenerate docs/events/*.v1.schema.json: job-event from omnireel.events.JobEvent, job-image-ready from
omnireel.events.ImageReadyEvent, batch-event from omnireel.batch_events.BatchEvent (tests check they are current)."""

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "layers" / "omnireel"))

from omnireel.batch_events import BatchEvent  # noqa: E402
from omnireel.events import ImageReadyEvent, JobEvent  # noqa: E402

SCHEMA_PATH = ROOT / "docs" / "events" / "job-event.v1.schema.json"
IMAGE_READY_SCHEMA_PATH = ROOT / "docs" / "events" / "job-image-ready.v1.schema.json"
BATCH_SCHEMA_PATH = ROOT / "docs" / "events" / "batch-event.v1.schema.json"


def schema() -> dict:
    document = JobEvent.model_json_schema()
    document["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    document["$id"] = "omnireel/job-event/v1"
    return document


def image_ready_schema() -> dict:
    document = ImageReadyEvent.model_json_schema()
    document["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    document["$id"] = "omnireel/job-image-ready/v1"
    return document


def batch_schema() -> dict:
    document = BatchEvent.model_json_schema()
    document["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    document["$id"] = "omnireel/batch-event/v1"
    return document


if __name__ == "__main__":
    documents = (
        (SCHEMA_PATH, schema()),
        (IMAGE_READY_SCHEMA_PATH, image_ready_schema()),
        (BATCH_SCHEMA_PATH, batch_schema()),
    )
    for path, document in documents:
        path.write_text(json.dumps(document, indent=2, sort_keys=True) + "\n")
        print(path.relative_to(ROOT))
