"""Which secrets sign a delivery, and what ``GET /webhooks/secret`` shows a caller (``omnireel.webhooks.secrets``).

A delivery is signed with the secret of the owner of its job (``job.*`` events) or of its batch (``batch.completed``),
read from the record (``omnireel.aws.record_owners``: authoritative, whatever the event or its message attributes
say); without an owner (a dropped file) with the unowned secret. During a rotation's grace period both the new and
the previous master sign, so the delivery carries two signatures; before it (until every function has read the
rotation) the previous master alone (``omnireel.webhooks.secrets``: when a rotation takes effect).
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any, Protocol

from omnireel.core.errors import WebhookOwnerUnknown
from omnireel.webhooks.secrets import MasterKeys, scope_secret, secrets_view, signing_secrets


class RecordOwners(Protocol):
    """Who owns a job or a batch (``omnireel.aws.record_owners.RecordOwners``: the record, authoritative)."""

    def of_job(self, job_id: str) -> str | None: ...
    def of_batch(self, batch_id: str) -> str | None: ...


class WebhookMasterKey(Protocol):
    """The master key document (``omnireel.aws.secrets.WebhookMasterKey``, a bounded cache of Secrets Manager)."""

    def keys(self) -> MasterKeys: ...


class QueuedEvent(Protocol):
    """What signing reads of a queued event (``omnireel.webhooks.dispatch.QueuedEvent``, which calls this module)."""

    @property
    def job_id(self) -> str | None: ...
    @property
    def body(self) -> str: ...
    @property
    def event_id(self) -> str: ...


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
    """``GET /webhooks/secret`` for the caller ``scope``: its own secret, and during a rotation which of its secrets
    sign now and when that changes (``omnireel.webhooks.secrets.secrets_view``: the phases every function derives from
    the same document, so the answer is what deliveries carry, whatever a function's key cache holds)."""
    return {
        **secrets_view(keys, lambda master: scope_secret(master, scope), at),
        "scheme": "Standard Webhooks v1 (HMAC-SHA256)",
        "headers": ["webhook-id", "webhook-timestamp", "webhook-signature"],
    }
