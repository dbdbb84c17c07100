"""Webhook signing secrets: one per caller scope, derived from a master key that never leaves the stack's functions.

Pure: no AWS here (``omnireel.aws.secrets`` reads the master from Secrets Manager).

- **Master key.** The Secrets Manager secret ``WebhookSigningSecret`` holds ``{"use": "webhook-master-v1", "key":
  <master>}`` and, during a rotation's grace period, ``"previous": <old master>, "previous_until": <ISO 8601 UTC>``.
  The master is served to nobody: API callers get derived secrets only; operators read it with their own Secrets
  Manager rights. A value without the ``use`` marker is the single secret of before issue 25, which ``GET
  /webhooks/secret`` served to every caller as ``whsec_<key>``: deriving from it would let any of them compute every
  secret, so functions refuse it (``SigningKeyUnavailable``) until an operator rotates it (``omnireel webhooks
  rotate``, which drops such a key at once, without a grace period).
- **Per-scope secret.** A caller scope (``omnireel.core.caller.caller_scope``: the IAM user's or the role's unique
  id, or a session's -- the ``owner`` of the jobs and batches it submits) gets
  ``whsec_ + base64(HMAC-SHA256(key = UTF-8 master, msg = b"omnireel-webhook-v1\\x00scope\\x00" + UTF-8 scope))``:
  32 random-looking bytes, stable for the scope and the master, different for every scope, and useless for computing
  the master or another scope's secret.
- **Unowned secret.** Jobs and batches without an owner (files dropped in the S3 inbox) are signed with
  ``msg = b"omnireel-webhook-v1\\x00unowned"``: no scope can produce that message (every scope's message continues
  with ``\\x00scope\\x00``), so no caller's secret equals it. Only operators can read it: ``omnireel webhooks secret
  --unowned`` derives it from the master.
- **Rotation** (Standard Webhooks): a new master is written with the old one as ``previous`` until ``previous_until``;
  while it lasts every delivery carries both signatures (space-separated ``v1,<sig>`` entries in
  ``webhook-signature``: a receiver verifies if any matches), so receivers holding either secret keep verifying; after
  it only the new master signs.
- **When a rotation takes effect** (issue 33 item 9). Functions keep the document for up to their key cache
  (``WEBHOOK_KEY_CACHE_SECONDS``, at most 300 s), so right after a rotation a warm delivery function still signs with
  the old master alone. The document therefore records when it was written (``rotated_at``, and ``grace_ended_at``
  for ``--end-grace``), and every reader derives the same phases from it with its ``pickup`` (its key cache plus
  ``PICKUP_MARGIN``: by then every function has read the new document):
  - until ``key_from`` = ``rotated_at`` + pickup only the previous master signs (what a function still holding the
    old document does anyway);
  - from ``key_from`` both sign, until ``previous_until`` (or ``grace_ended_at`` + pickup, if earlier, but never
    before ``key_from``); a rotation without a grace period switches from the old to the new master at ``key_from``;
  - then only the new master signs.
  ``GET /webhooks/secret`` answers these phases (``omnireel.webhooks.signing.secret_view``), so what a caller is told
  is what deliveries carry. A document without ``rotated_at`` (written before, or the rotation of the single secret of
  before, which no function signs with) signs with its key at once.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any

SECRET_PREFIX = "whsec_"  # noqa: S105 - the Standard Webhooks prefix, not a secret
_LABEL = b"omnireel-webhook-v1\x00"
_SCOPE = _LABEL + b"scope\x00"
_UNOWNED = _LABEL + b"unowned"
MAX_GRACE = timedelta(days=30)
MASTER_USE = "webhook-master-v1"  # template.yaml SecretStringTemplate; written by every rotation
# A rotation reaches every function within its key cache; the margin covers the write's own latency, Secrets
# Manager's propagation and the clocks of the writer (the CLI takes the service's Date header) and of the readers.
PICKUP_MARGIN = timedelta(seconds=30)
MAX_KEY_CACHE = timedelta(seconds=300)  # runtime.settings: WEBHOOK_KEY_CACHE_SECONDS is at most 300
DEFAULT_PICKUP = MAX_KEY_CACHE + PICKUP_MARGIN  # a reader that does not know the functions' cache (the CLI)


class InvalidMasterKey(ValueError):
    """The secret's value is not a master key document (``{"key": ...}``)."""


@dataclass(frozen=True)
class MasterKeys:
    """The secret's value: the current master and, during a rotation's grace period, the one before it."""

    key: str
    previous: str | None = None
    previous_until: datetime | None = None  # the end of the grace period the rotation asked for
    legacy: bool = False  # no ``use`` marker: the pre-issue-25 secret, served to every caller (parse_master)
    rotated_at: datetime | None = None  # when the rotation was written (None: the key signs at once)
    grace_ended_at: datetime | None = None  # when ``--end-grace`` was written
    # Not stored: the reader's key cache + PICKUP_MARGIN (omnireel.aws.secrets.WebhookMasterKey sets its own).
    pickup: timedelta = field(default=DEFAULT_PICKUP, compare=False)

    def key_from(self) -> datetime | None:
        """When the current master starts signing (None: it signs already, nothing records a rotation)."""
        return self.rotated_at + self.pickup if self.rotated_at and self.previous else None

    def previous_end(self) -> datetime | None:
        """When the previous master stops signing (None: there is none)."""
        if not (self.previous and self.previous_until):
            return None
        end = self.previous_until
        if self.grace_ended_at is not None:
            end = min(end, self.grace_ended_at + self.pickup)
        key_from = self.key_from()
        return max(end, key_from) if key_from else end

    def signing(self, at: datetime) -> tuple[str, ...]:
        """The masters that sign at ``at``, the current one first: the previous one alone until ``key_from``, both
        until ``previous_end``, then the current one alone."""
        key_from, end = self.key_from(), self.previous_end()
        current = key_from is None or at >= key_from
        previous = self.previous if end is not None and at < end else None
        return tuple(k for k in (self.key if current else None, previous) if k)

    def in_grace(self, at: datetime) -> bool:
        """The previous master still signs at ``at`` (alone before ``key_from``, with the current one after)."""
        end = self.previous_end()
        return end is not None and at < end

    def rotated(self, new_key: str, at: datetime, grace: timedelta) -> MasterKeys:
        """The value after a rotation written at ``at``: the current key keeps signing alone until every function has
        read the new one (``key_from``), then both sign until ``at`` + ``grace`` (no grace: the old key stops at
        ``key_from``, e.g. after a leak)."""
        if grace < timedelta(0) or grace > MAX_GRACE:
            raise ValueError(f"the grace period must be between 0 and {MAX_GRACE.days} days")
        if self.legacy:  # a key every caller has seen never signs again (no function signs with it: nothing cached)
            return MasterKeys(new_key, pickup=self.pickup)
        return MasterKeys(new_key, self.key, at + grace, rotated_at=at, pickup=self.pickup)

    def grace_ended(self, at: datetime) -> MasterKeys:
        """The value after ``--end-grace`` written at ``at``: the previous key stops once every function has read it
        (``at`` + pickup, never before ``key_from``); ending it again keeps the first end."""
        if not self.previous:
            return self
        ended = at if self.grace_ended_at is None else min(self.grace_ended_at, at)
        return replace(self, grace_ended_at=ended)

    def to_json(self) -> str:
        value: dict[str, str] = {"use": MASTER_USE, "key": self.key}
        if self.previous and self.previous_until:
            value["previous"] = self.previous
            value["previous_until"] = _iso(self.previous_until)
            if self.rotated_at is not None:
                value["rotated_at"] = _iso(self.rotated_at)
            if self.grace_ended_at is not None:
                value["grace_ended_at"] = _iso(self.grace_ended_at)
        return json.dumps(value)


def _iso(at: datetime) -> str:
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _time(value: object, name: str) -> datetime | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise InvalidMasterKey(f'"{name}" must be an ISO 8601 time')
    return datetime.fromisoformat(value).astimezone(UTC)


def parse_master(secret_string: str, *, allow_legacy: bool = False, pickup: timedelta = DEFAULT_PICKUP) -> MasterKeys:
    """The secret's value as stored (``GenerateSecretString`` makes ``{"use": "webhook-master-v1", "key": <44 letters
    and digits>}``). A value without the marker is refused unless ``allow_legacy`` (the rotation reads it to replace
    it). ``pickup``: this reader's key cache plus ``PICKUP_MARGIN`` (when a rotation takes effect)."""
    try:
        value = json.loads(secret_string)
        key = value["key"]
        previous, until = value.get("previous"), value.get("previous_until")
        if not isinstance(key, str) or len(key) < 32:
            raise InvalidMasterKey("the master key must be a string of at least 32 characters")
        legacy = value.get("use") != MASTER_USE
        if legacy and not allow_legacy:
            raise InvalidMasterKey(
                'the secret has no "use": "webhook-master-v1" marker: it is the single secret that GET '
                "/webhooks/secret served to every caller before per-caller secrets; rotate it "
                "(omnireel webhooks rotate) before anything is derived from it"
            )
        if previous is None or legacy:
            return MasterKeys(key, legacy=legacy, pickup=pickup)
        if not isinstance(previous, str) or not isinstance(until, str):
            raise InvalidMasterKey('"previous" needs "previous_until" (ISO 8601)')
        rotated_at, ended_at = (
            _time(value.get("rotated_at"), "rotated_at"),
            _time(value.get("grace_ended_at"), "grace_ended_at"),
        )
        return MasterKeys(
            key, previous, datetime.fromisoformat(until).astimezone(UTC), rotated_at=rotated_at,
            grace_ended_at=ended_at, pickup=pickup,
        )  # fmt: skip
    except InvalidMasterKey:
        raise
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        raise InvalidMasterKey(f"not a webhook master key document: {type(exc).__name__}") from None


def new_master_key() -> str:
    """A fresh master: 32 random bytes, base64 (44 characters)."""
    return base64.b64encode(secrets.token_bytes(32)).decode()


def _derive(master: str, message: bytes) -> str:
    digest = hmac.new(master.encode(), message, hashlib.sha256).digest()
    return SECRET_PREFIX + base64.b64encode(digest).decode()


def scope_secret(master: str, scope: str) -> str:
    """The ``whsec_`` secret of one caller scope (an owner of jobs and batches)."""
    return _derive(master, _SCOPE + scope.encode())


def unowned_secret(master: str) -> str:
    """The ``whsec_`` secret of jobs and batches without an owner (dropped files): operators only."""
    return _derive(master, _UNOWNED)


def owner_secret(master: str, owner: str | None) -> str:
    return unowned_secret(master) if owner is None else scope_secret(master, owner)


def signing_secrets(keys: MasterKeys, owner: str | None, at: datetime) -> tuple[str, ...]:
    """The secrets that sign a delivery of ``owner``'s job or batch at ``at`` (two during a rotation's grace)."""
    return tuple(owner_secret(master, owner) for master in keys.signing(at))


def secrets_view(keys: MasterKeys, derive: Callable[[str], str], at: datetime) -> dict[str, Any]:
    """Which derived secrets sign at ``at`` and when that changes (``GET /webhooks/secret``, ``omnireel webhooks secret
    --unowned``): ``secret`` (the one to switch receivers to), ``secret_signs_from`` (during a rotation: when it
    starts or started signing), ``previous_secret`` and ``previous_until`` (while it still signs: until when), and
    ``signing`` (the names of the fields whose secrets sign a delivery made now, in signature order)."""
    grace = keys.in_grace(at)
    key_from, end, signing = keys.key_from(), keys.previous_end(), keys.signing(at)
    return {
        "secret": derive(keys.key),
        "secret_signs_from": _iso(key_from) if grace and key_from else None,
        "previous_secret": derive(keys.previous) if grace and keys.previous else None,
        "previous_until": _iso(end) if grace and end else None,
        "signing": [name for name, key in (("secret", keys.key), ("previous_secret", keys.previous)) if key in signing],
    }
