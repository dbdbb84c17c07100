"""Which secrets sign a delivery, and what ``GET /webhooks/secret`` shows a caller (``omnireel.webhooks.secrets``).

A delivery is signed with the secret of the owner of its job (``job.*`` events) or of its batch (``batch.completed``),
read from the record (``omnireel.aws.record_owners``: authoritative, whatever the event or its message attributes
say); without an owner (a dropped file) with the unowned secret. During a rotation's grace period both the new and
the previous master sign, so the delivery carries two signatures.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from omnireel.core.errors import WebhookOwnerUnknown
from omnireel.webhooks.secrets import MasterKeys, scope_secret, signing_secrets

if TYPE_CHECKING:
    from omnireel.aws.record_owners import RecordOwners
    from omnireel.aws.secrets import WebhookMasterKey
    from omnireel.webhooks.dispatch import QueuedEvent


def event_owner(queued: QueuedEvent, *, owners: RecordOwners) -> str | None:
    """The owner of the job or batch the event is about (None: a dropped file's, signed with the unowned secret)."""
    if queued.job_id:
        return owners.of_job(queued.job_id)
    try:
        batch_id = json.loads(queued.body).get("batch_id")
    except (ValueError, AttributeError):
        batch_id = None
    if isinstance(batch_id, str) and batch_id:
        return owners.of_batch(batch_id)
    raise WebhookOwnerUnknown(f"event {queued.event_id} names no job and no batch: no owner to sign for")


def delivery_secrets(
    queued: QueuedEvent, *, master: WebhookMasterKey, owners: RecordOwners, at: datetime
) -> tuple[str, ...]:
    """The ``whsec_`` secrets that sign this event's delivery at ``at`` (the owner's; two during a rotation)."""
    return signing_secrets(master.keys(), event_owner(queued, owners=owners), at)


def secret_view(keys: MasterKeys, scope: str, at: datetime) -> dict[str, Any]:
    """``GET /webhooks/secret`` for the caller ``scope``: its own secret, and during a rotation's grace period the
    previous one with the time it stops signing."""
    grace = keys.in_grace(at) and keys.previous is not None and keys.previous_until is not None
    return {
        "secret": scope_secret(keys.key, scope),
        "previous_secret": scope_secret(keys.previous, scope) if grace and keys.previous else None,
        "previous_until": keys.previous_until.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        if grace and keys.previous_until
        else None,
        "scheme": "Standard Webhooks v1 (HMAC-SHA256)",
        "headers": ["webhook-id", "webhook-timestamp", "webhook-signature"],
    }
