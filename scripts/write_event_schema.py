"""Regenerate docs/events/job-event.v1.schema.json from omnireel.events.JobEvent and batch-event.v1.schema.json from
omnireel.batch_events.BatchEvent (tests check both are current)."""

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "layers" / "omnireel"))

from omnireel.batch_events import BatchEvent  # noqa: E402
from omnireel.events import JobEvent  # noqa: E402

SCHEMA_PATH = ROOT / "docs" / "events" / "job-event.v1.schema.json"
BATCH_SCHEMA_PATH = ROOT / "docs" / "events" / "batch-event.v1.schema.json"


def schema() -> dict:
    document = JobEvent.model_json_schema()
    document["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    document["$id"] = "omnireel/job-event/v1"
    return document


def batch_schema() -> dict:
    document = BatchEvent.model_json_schema()
    document["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    document["$id"] = "omnireel/batch-event/v1"
    return document


if __name__ == "__main__":
    SCHEMA_PATH.write_text(json.dumps(schema(), indent=2, sort_keys=True) + "\n")
    print(SCHEMA_PATH.relative_to(ROOT))
    BATCH_SCHEMA_PATH.write_text(json.dumps(batch_schema(), indent=2, sort_keys=True) + "\n")
    print(BATCH_SCHEMA_PATH.relative_to(ROOT))
