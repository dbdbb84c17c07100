"""Issue 33 (leftover): each attempt to deliver a batch's ``batch.completed`` is recorded on the batch record, and
``GET /batches/{id}`` (``batch_view``) shows it under ``webhook.deliveries``, as a job's view shows its events.

``functions/webhook_delivery/handler.py`` on moto with the stack's real records (the fixture and helpers of
``test_forged_deliveries``): the batch is written by ``BatchStore.create``, its ``batch.completed`` published by
``EventPublisher`` (recorded on the batch, then through the topic to the webhook queue) as ``batches.progress`` does.
Before, the attempt was recorded nowhere (the event names no job) and the batch view said nothing of it.
"""

from __future__ import annotations

import uuid
from typing import Any

from omnireel.aws.batch_store import BATCH_ITEM, BatchStore
from omnireel.aws.event_publisher import EventPublisher
from omnireel.batches.progress import batch_view
from omnireel.batches.record import Batch
from omnireel.events.batch_events import BatchCounts, BatchEvent, BatchManifest, batch_event_id

from . import test_forged_deliveries
from .test_forged_deliveries import VICTIM, Receivers, _invoke_on_queue

stack = test_forged_deliveries.stack  # the fixture: moto, the template's tables, topic, queue and a loopback receiver

STAMP = "2026-12-04T12:00:00.000Z"
DELIVERY_FIELDS = {"attempts", "outcome", "last_status", "last_error", "last_attempt_at", "delivered_at", "refused"}


def _completed_batch(stack: dict[str, Any], hook: str) -> tuple[BatchStore, str]:
    """A batch of the victim's with ``hook`` as its webhook whose ``batch.completed`` the stack has just published."""
    store = BatchStore(stack["batches"])
    batch_id = str(uuid.uuid4())
    store.create(
        Batch(
            batch_id=batch_id, source="api", owner=VICTIM, natural_key=f"api/{batch_id}", webhook=hook,
            created_at=STAMP, updated_at=STAMP, total=1, accepted=1, succeeded=1, terminal=1,
        )
    )  # fmt: skip
    event = BatchEvent(
        event_id=batch_event_id(batch_id), occurred_at=STAMP, batch_id=batch_id, source="api",
        counts=BatchCounts(total=1, accepted=1, rejected=0, succeeded=1, failed=0, cancelled=0),
        manifest=BatchManifest(s3_uri=f"s3://artifacts/batches/{batch_id}/manifest.jsonl", url="https://m",
                               expires_at=STAMP),
    )  # fmt: skip
    event.with_webhook(hook)
    EventPublisher(stack["topic"], jobs_table=stack["jobs"], batches_table=stack["batches"]).publish(event)
    store.mark_published(batch_id)
    return store, batch_id


def _view(store: BatchStore, batch_id: str) -> dict[str, Any]:
    batch = store.find(batch_id)
    assert batch is not None
    return batch_view(batch, artifacts=None, presign_seconds=60)  # type: ignore[arg-type] - no manifest to presign


def test_a_delivered_batch_completed_is_recorded_on_the_batch_and_shown_in_its_view(stack: dict[str, Any]) -> None:
    receivers: Receivers = stack["receivers"]
    hook = receivers.url("/batches")
    store, batch_id = _completed_batch(stack, hook)

    assert _invoke_on_queue(stack, 1) == {"batchItemFailures": []}

    assert receivers.paths() == ["/batches"]
    webhook = _view(store, batch_id)["webhook"]
    assert webhook["url"] == hook and webhook["events"] == ["batch.completed"]
    state = webhook["deliveries"]["batch.completed"]
    assert set(state) == DELIVERY_FIELDS
    assert state["attempts"] == 1 and state["outcome"] == "delivered" and state["last_status"] == 204
    assert state["last_error"] is None and state["refused"] is False
    assert state["delivered_at"] and state["last_attempt_at"]
    assert stack["ddb"].scan(TableName=stack["jobs"])["Items"] == []  # nothing written on a job's record


def test_a_failed_batch_completed_attempt_is_recorded_and_retried(stack: dict[str, Any]) -> None:
    """A receiver that is not there (a closed loopback port): the attempt is retried and the view says why."""
    store, batch_id = _completed_batch(stack, "http://127.0.0.1:1/closed")

    response = _invoke_on_queue(stack, 1)

    assert len(response["batchItemFailures"]) == 1  # retried on the schedule
    state = _view(store, batch_id)["webhook"]["deliveries"]["batch.completed"]
    assert state["attempts"] == 1 and state["outcome"] == "unreachable" and state["last_status"] is None
    assert state["last_error"] and state["delivered_at"] is None and state["refused"] is False


def test_a_batch_without_a_webhook_shows_none(stack: dict[str, Any]) -> None:
    store = BatchStore(stack["batches"])
    batch_id = str(uuid.uuid4())
    batch = Batch(batch_id=batch_id, source="api", natural_key=batch_id, created_at=STAMP, updated_at=STAMP, total=1)
    store.create(batch)
    assert _view(store, batch_id)["webhook"] is None


def test_recording_an_attempt_never_resurrects_a_deleted_batch_and_fills_an_older_record(
    stack: dict[str, Any],
) -> None:
    store = BatchStore(stack["batches"])
    state = {
        "attempts": 2, "outcome": "rejected", "last_status": 500, "last_error": "the receiver answered 500",
        "last_attempt_at": STAMP, "delivered_at": None, "refused": False,
    }  # fmt: skip
    gone = str(uuid.uuid4())  # expired (TTL) or deleted between the delivery's read of it and the attempt's end
    store.record_webhook_attempt(gone, "batch.completed", state)
    assert store.find(gone) is None
    assert stack["ddb"].scan(TableName=stack["batches"])["Items"] == []

    older = str(uuid.uuid4())  # a record written before attempts were recorded on batches: no webhook_deliveries map
    item = {"batch_id": {"S": older}, "item": {"S": BATCH_ITEM}, "source": {"S": "api"}, "natural_key": {"S": "k"},
            "webhook": {"S": "https://hooks.example/b"}, "created_at": {"S": STAMP}, "updated_at": {"S": STAMP},
            "total": {"N": "1"}}  # fmt: skip
    stack["ddb"].put_item(TableName=stack["batches"], Item=item)
    store.record_webhook_attempt(older, "batch.completed", state)
    assert _view(store, older)["webhook"]["deliveries"] == {"batch.completed": state}
