"""Verifying a delivery (Standard Webhooks, HMAC-SHA256) with the ``standardwebhooks`` library.

``verify_webhook`` checks one delivery against the secrets it is given, and says which part is wrong (``reason``).
``WebhookVerifier`` (``Client.webhook_verifier()``) is what a long-running receiver keeps: it holds the caller's
``WebhookSecret`` (a previous secret is accepted until its ``previous_until`` only) and reads it again when a
delivery verifies with none of the secrets it holds -- a rotation -- at most once per ``refresh_interval_s`` seconds.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime, timezone

from .errors import OmnireelClientError
from .models import WebhookEvent, WebhookSecret

TOLERANCE_S = 300  # Standard Webhooks: a delivery more than 5 minutes old or new is refused (replays)
DEFAULT_REFRESH_INTERVAL_S = 60.0
_TIMESTAMP = re.compile(r"[0-9]{1,12}")
_BASE64 = re.compile(r"[A-Za-z0-9+/]+={0,2}")
_VERSION = re.compile(r"v[0-9]+[a-z]?")


class InvalidWebhookError(OmnireelClientError):
    """The delivery is not signed by a given secret, is too old or too new (5 minutes), or is not an event.

    ``reason`` says which, for a receiver's log and its choice of answer:

    - ``"secret"``: a secret given to verify with is not a ``whsec_`` secret (the receiver's setup is wrong);
    - ``"headers"``: ``webhook-id``, ``webhook-timestamp`` or ``webhook-signature`` is missing or malformed;
    - ``"timestamp"``: signed more than 5 minutes ago or ahead (a replay, or a clock far off);
    - ``"signature"``: no signature matches any given secret (forged, tampered with, or signed with a secret the
      receiver does not hold: after a rotation, ``WebhookVerifier`` reads the new one);
    - ``"body"``: the body is not a JSON object (not UTF-8, not JSON, or an array...).
    """

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


def _checked_secrets(secret: str | WebhookSecret | Iterable[str]) -> tuple[str, ...]:
    if isinstance(secret, WebhookSecret):
        secrets: tuple[str, ...] = secret.secrets
    elif isinstance(secret, str):
        secrets = (secret,)
    else:
        secrets = tuple(secret)
    if not secrets:
        raise InvalidWebhookError("secret", "bad secret: no secret given to verify with")
    for position, candidate in enumerate(secrets, 1):
        # The library decodes leniently (it drops characters that are not base64): check the shape first. The
        # message never shows the secret.
        key = candidate[len("whsec_") :] if isinstance(candidate, str) and candidate.startswith("whsec_") else candidate
        try:
            if not isinstance(key, str) or not _BASE64.fullmatch(key + "=" * (-len(key) % 4)):
                raise ValueError
            if not base64.b64decode(key + "=" * (-len(key) % 4), validate=True):
                raise ValueError
        except (ValueError, binascii.Error):
            raise InvalidWebhookError(
                "secret", f"bad secret: secret {position} is not a webhook secret (whsec_ and base64)"
            ) from None
    return secrets


def _checked_headers(headers: Mapping[str, str]) -> dict[str, str]:
    lowered = {str(k).lower(): v for k, v in headers.items()}
    missing = [n for n in ("webhook-id", "webhook-timestamp", "webhook-signature") if not lowered.get(n)]
    if missing:
        raise InvalidWebhookError("headers", f"malformed delivery: no {', '.join(missing)} header")
    if not all(isinstance(lowered[n], str) for n in ("webhook-id", "webhook-timestamp", "webhook-signature")):
        raise InvalidWebhookError("headers", "malformed delivery: a webhook header is not a text")
    if not _TIMESTAMP.fullmatch(lowered["webhook-timestamp"].strip()):
        raise InvalidWebhookError("headers", "malformed webhook-timestamp header: not integer seconds")
    for token in lowered["webhook-signature"].split(" "):
        version, comma, signature = token.partition(",")
        valid = comma and _VERSION.fullmatch(version) and _BASE64.fullmatch(signature) and len(signature) % 4 == 0
        if not valid:
            raise InvalidWebhookError(
                "headers",
                "malformed webhook-signature header: expected signatures `v1,<base64>` separated by single spaces",
            )
    return lowered


def verify_webhook(headers: Mapping[str, str], body: bytes | str, secret: str | WebhookSecret | Iterable[str]
                   ) -> WebhookEvent:  # fmt: skip
    """The event of a delivery whose signature one of ``secret`` made; raises ``InvalidWebhookError`` otherwise (its
    ``reason``: ``secret``, ``headers``, ``timestamp``, ``signature`` or ``body``).

    ``headers``: the request's headers (any case); ``body``: the raw body, exactly as received (not re-serialised);
    ``secret``: a ``whsec_`` secret, a ``WebhookSecret`` (its previous secret too, until ``previous_until``) or several
    secrets.
    """
    secrets = _checked_secrets(secret)
    lowered = _checked_headers(headers)
    stamp = int(lowered["webhook-timestamp"].strip())
    age = time.time() - stamp
    if abs(age) > TOLERANCE_S:
        when = f"{age:.0f} s old" if age > 0 else f"{-age:.0f} s in the future"
        raise InvalidWebhookError("timestamp", f"the delivery's timestamp is {when}: more than 5 minutes (a replay?)")
    try:
        text = body if isinstance(body, str) else body.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidWebhookError("body", "the body is not JSON (not UTF-8 text)") from None
    # Imported here: a client that never verifies a delivery (the CLI's every command) does not load the library.
    from standardwebhooks.webhooks import Webhook, WebhookVerificationError

    for candidate in secrets:
        try:
            Webhook(candidate).verify(text, lowered, json_parse=False)
        except WebhookVerificationError:
            continue
        except ValueError as exc:  # a header the checks above let through and the library cannot read
            raise InvalidWebhookError("headers", f"malformed webhook headers: {exc}") from None
        break
    else:
        raise InvalidWebhookError(
            "signature",
            f"no signature matches the {len(secrets)} secret(s) given: forged, tampered with, or signed with a secret "
            "this receiver does not hold (rotated?)",
        )
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise InvalidWebhookError("body", f"the signed body is not JSON: {str(exc)[:200]}") from None
    if not isinstance(data, dict):
        raise InvalidWebhookError("body", "the signed body is not a JSON object")
    signed_at = datetime.fromtimestamp(stamp, tz=timezone.utc)
    return WebhookEvent(lowered["webhook-id"], str(data.get("event_type", "")), signed_at, data)


class WebhookVerifier:
    """Verifies deliveries with the caller's secret and picks up a rotation without a restart.

    It holds a ``WebhookSecret`` (its previous secret is accepted until ``previous_until`` only, checked at each
    verification). When a well-formed, fresh delivery matches none of the secrets it holds (``reason`` ``signature``:
    after ``omnireel webhooks rotate``, once the previous key stops signing), it reads the secret again with
    ``fetch`` (``Client.webhook_secret``) and verifies once more -- at most once per ``refresh_interval_s`` seconds
    (default 60), so a stream of forged deliveries costs the API one read a minute. A read that fails keeps the secret
    it had (``last_refresh_error`` says why) and the delivery is refused; Omnireel retries refused deliveries on its
    schedule. Thread-safe; a delivery never waits for another thread's read.

    ``Client.webhook_verifier()`` / ``await AsyncClient.webhook_verifier()`` build one. ``verify`` blocks while it
    reads the secret; in a coroutine use ``await verify_async(...)`` (the read runs in a worker thread).
    """

    def __init__(self, fetch: Callable[[], WebhookSecret], secret: WebhookSecret | None = None, *,
                 refresh_interval_s: float = DEFAULT_REFRESH_INTERVAL_S,
                 clock: Callable[[], float] = time.monotonic) -> None:  # fmt: skip
        if not refresh_interval_s >= 0:
            raise ValueError("refresh_interval_s must be 0 or more seconds")
        self._fetch = fetch
        self._secret = secret
        self._clock = clock
        self._read_at: float | None = clock() if secret is not None else None
        self._lock = threading.Lock()
        self.refresh_interval_s = refresh_interval_s
        self.refreshes = 0  # reads after the first (for a receiver's metrics)
        self.last_refresh_error: OmnireelClientError | None = None

    @property
    def secret(self) -> WebhookSecret:
        """The secret held now (read on first use when none was given)."""
        held = self._secret
        if held is None:
            held = self._fetch()
            with self._lock:
                self._secret, self._read_at = held, self._clock()
        return held

    def verify(self, headers: Mapping[str, str], body: bytes | str) -> WebhookEvent:
        """``verify_webhook`` with the held secret, read again once if no signature matches (rate limited)."""
        held = self.secret
        try:
            return verify_webhook(headers, body, held)
        except InvalidWebhookError as exc:
            if exc.reason != "signature" or not self._refresh(held):
                raise
        return verify_webhook(headers, body, self.secret)

    async def verify_async(self, headers: Mapping[str, str], body: bytes | str) -> WebhookEvent:
        """``verify`` for a coroutine: the secret is read in a worker thread, the event loop never blocks on it."""
        import asyncio  # here: importing the client (the CLI's every command) does not load asyncio

        held = self._secret if self._secret is not None else await asyncio.to_thread(lambda: self.secret)
        try:
            return verify_webhook(headers, body, held)
        except InvalidWebhookError as exc:
            if exc.reason != "signature" or not await asyncio.to_thread(self._refresh, held):
                raise
        return verify_webhook(headers, body, self.secret)

    def _refresh(self, held: WebhookSecret) -> bool:
        """Read the secret again unless it was read less than ``refresh_interval_s`` ago; whether there is a secret
        to try that ``held`` was not (another thread's fresh read counts)."""
        with self._lock:
            if self._secret is not held:
                return True
            now = self._clock()
            if self._read_at is not None and now - self._read_at < self.refresh_interval_s:
                return False
            self._read_at = now  # taken: another thread's failure now waits for the next interval
        try:
            fresh = self._fetch()
        except OmnireelClientError as exc:
            self.last_refresh_error = exc
            return False
        with self._lock:
            self._secret = fresh
            self.refreshes += 1
            self.last_refresh_error = None
        return True
