"""The batch view's ``webhook`` (issue 33 leftover): documented in docs/openapi.yaml as the model writes it, shaped as a
job's, and kept by the client's batch model."""

from pathlib import Path
from typing import Any

import yaml

from omnireel.batches.progress import batch_view
from omnireel.batches.record import Batch
from omnireel.jobs.job import WebhookDelivery
from omnireel_client.models import BatchState

# libyaml's loader (PyYAML's wheels ship it): every test process collects this module; the pure-Python one took ~0.4 s
SPEC = yaml.load((Path(__file__).resolve().parents[3] / "docs" / "openapi.yaml").read_text(), Loader=yaml.CSafeLoader)
SCHEMAS = SPEC["components"]["schemas"]
STAMP = "2026-12-04T12:00:00.000Z"
STATE = {
    "attempts": 3, "outcome": "rejected", "last_status": 503, "last_error": "the receiver answered 503",
    "last_attempt_at": STAMP, "delivered_at": None, "refused": False,
}  # fmt: skip


def _batch(**fields: Any) -> Batch:
    return Batch(batch_id="b-1", source="api", natural_key="k", created_at=STAMP, updated_at=STAMP, total=2, **fields)


def test_the_documented_delivery_state_is_the_model_and_jobs_and_batches_share_it() -> None:
    assert set(SCHEMAS["WebhookDeliveryState"]["properties"]) == set(WebhookDelivery.__struct_fields__)
    job_deliveries = SCHEMAS["Job"]["properties"]["webhook"]["oneOf"][1]["properties"]["deliveries"]
    batch_webhook = SCHEMAS["Batch"]["properties"]["webhook"]["oneOf"][1]
    assert job_deliveries["additionalProperties"] == batch_webhook["properties"]["deliveries"]["additionalProperties"]


def test_the_batch_view_shows_the_delivery_state_as_documented() -> None:
    batch = _batch(webhook="https://hooks.example/b", webhook_deliveries={"batch.completed": WebhookDelivery(**STATE)})
    view = batch_view(batch, artifacts=None, presign_seconds=60)  # type: ignore[arg-type] - no manifest to presign
    assert set(view) == set(SCHEMAS["Batch"]["properties"])
    documented = SCHEMAS["Batch"]["properties"]["webhook"]["oneOf"][1]
    assert set(view["webhook"]) == set(documented["properties"]) == set(documented["required"])
    assert view["webhook"] == {
        "url": "https://hooks.example/b", "events": ["batch.completed"], "deliveries": {"batch.completed": STATE},
    }  # fmt: skip


def test_a_batch_without_a_webhook_or_attempts_yet() -> None:
    assert batch_view(_batch(), artifacts=None, presign_seconds=60)["webhook"] is None  # type: ignore[arg-type]
    waiting = batch_view(_batch(webhook="https://h.example/"), artifacts=None, presign_seconds=60)  # type: ignore[arg-type]
    assert waiting["webhook"]["deliveries"] == {}


def test_the_clients_batch_model_keeps_the_webhook() -> None:
    state = BatchState(batch_id="b-1", status="running")
    webhook = {"url": "https://h.example/b", "events": ["batch.completed"], "deliveries": {"batch.completed": STATE}}
    state._update({"batch_id": "b-1", "status": "completed", "webhook": webhook})
    assert state.webhook == webhook
