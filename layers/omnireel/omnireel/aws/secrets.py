"""The webhook master key in Secrets Manager (template.yaml: WebhookSigningSecret), read with a bounded cache.

The value is a master key document (``omnireel.webhooks.secrets``); nothing here serves it: callers get secrets derived
from it per scope. Functions keep it for ``ttl_s`` (5 minutes by default, well under the shortest rotation grace period
of an hour the CLI asks for), so a rotation reaches every warm execution environment within that time.
A rotation therefore takes effect ``ttl_s`` + ``margin_s`` (``PICKUP_MARGIN`` unless ``WEBHOOK_PICKUP_MARGIN_SECONDS``
says otherwise) after it was written (``pickup``): until then the
previous master alone signs, in every function, whether it still holds the old document or has read the new one
(``omnireel.webhooks.secrets``), and ``GET /webhooks/secret`` (the API's own reader, with the same setting) says so.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import timedelta

from botocore.exceptions import BotoCoreError, ClientError

from omnireel.aws.clients import client
from omnireel.core.errors import SigningKeyUnavailable
from omnireel.webhooks.secrets import PICKUP_MARGIN, InvalidMasterKey, MasterKeys, parse_master

DEFAULT_TTL_S = 300.0


class WebhookMasterKey:
    def __init__(
        self,
        secret_arn: str,
        *,
        ttl_s: float = DEFAULT_TTL_S,
        margin_s: float = PICKUP_MARGIN.total_seconds(),
        clock: Callable[[], float] = time.monotonic,
    ):
        self.secret_arn = secret_arn
        self.ttl_s = ttl_s
        self._clock = clock
        self._lock = threading.Lock()
        self._cached: tuple[float, MasterKeys] | None = None
        # when a rotation takes effect for this reader: every cache (of this length) has expired by then
        self.pickup = timedelta(seconds=ttl_s + margin_s)

    def keys(self) -> MasterKeys:
        """The master key document, read again once it is ``ttl_s`` old."""
        with self._lock:
            now = self._clock()
            if self._cached is not None and now - self._cached[0] < self.ttl_s:
                return self._cached[1]
            keys = self._read()
            self._cached = (now, keys)
            return keys

    def _read(self) -> MasterKeys:
        if not self.secret_arn:
            raise SigningKeyUnavailable("no webhook signing secret is configured (WEBHOOK_SECRET_ARN)")
        try:
            value = client("secretsmanager").get_secret_value(SecretId=self.secret_arn)["SecretString"]
            return parse_master(value, pickup=self.pickup)
        except (ClientError, BotoCoreError) as exc:
            raise SigningKeyUnavailable(f"cannot read the webhook master key: {exc}") from exc
        except InvalidMasterKey as exc:
            raise SigningKeyUnavailable(f"the webhook master key is malformed: {exc}") from exc
