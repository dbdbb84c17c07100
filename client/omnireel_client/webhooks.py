"""Verifying a delivery (Standard Webhooks, HMAC-SHA256) with the ``standardwebhooks`` library."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from datetime import datetime, timezone

from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from .errors import OmnireelClientError
from .models import WebhookEvent, WebhookSecret


class InvalidWebhookError(OmnireelClientError):
    """The delivery is not signed by a given secret, is too old or too new (5 minutes), or is not an event."""


def verify_webhook(headers: Mapping[str, str], body: bytes | str, secret: str | WebhookSecret | Iterable[str]
                   ) -> WebhookEvent:  # fmt: skip
    """The event of a delivery whose signature one of ``secret`` made; raises ``InvalidWebhookError`` otherwise.

    ``headers``: the request's headers (any case); ``body``: the raw body, exactly as received (not re-serialised);
    ``secret``: a ``whsec_`` secret, a ``WebhookSecret`` (both secrets during a rotation) or several secrets.
    """
    lowered = {k.lower(): v for k, v in headers.items()}
    if isinstance(secret, WebhookSecret):
        secrets: tuple[str, ...] = secret.secrets
    elif isinstance(secret, str):
        secrets = (secret,)
    else:
        secrets = tuple(secret)
    raw = body.encode() if isinstance(body, str) else body
    last: Exception | None = None
    for candidate in secrets:
        try:
            Webhook(candidate).verify(raw, lowered)
        except WebhookVerificationError as exc:
            last = exc
            continue
        except ValueError as exc:  # not a whsec_ secret
            raise InvalidWebhookError(f"not a webhook secret: {exc}") from None
        try:
            data = json.loads(raw)
        except ValueError as exc:
            raise InvalidWebhookError(f"the signed body is not JSON: {exc}") from None
        if not isinstance(data, dict):
            raise InvalidWebhookError("the signed body is not a JSON object")
        stamp = datetime.fromtimestamp(int(lowered["webhook-timestamp"]), tz=timezone.utc)
        return WebhookEvent(lowered["webhook-id"], str(data.get("event_type", "")), stamp, data)
    raise InvalidWebhookError(f"the delivery is not verified: {last or 'no secret given'}")
