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
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

SECRET_PREFIX = "whsec_"  # noqa: S105 - the Standard Webhooks prefix, not a secret
_LABEL = b"omnireel-webhook-v1\x00"
_SCOPE = _LABEL + b"scope\x00"
_UNOWNED = _LABEL + b"unowned"
MAX_GRACE = timedelta(days=30)
MASTER_USE = "webhook-master-v1"  # template.yaml SecretStringTemplate; written by every rotation


class InvalidMasterKey(ValueError):
    """The secret's value is not a master key document (``{"key": ...}``)."""


@dataclass(frozen=True)
class MasterKeys:
    """The secret's value: the current master and, during a rotation's grace period, the one before it."""

    key: str
    previous: str | None = None
    previous_until: datetime | None = None
    legacy: bool = False  # no ``use`` marker: the pre-issue-25 secret, served to every caller (parse_master)

    def signing(self, at: datetime) -> tuple[str, ...]:
        """The masters that sign at ``at``: the current one, then the previous one while its grace period lasts."""
        if self.previous and self.previous_until and at < self.previous_until:
            return (self.key, self.previous)
        return (self.key,)

    def in_grace(self, at: datetime) -> bool:
        return len(self.signing(at)) > 1

    def rotated(self, new_key: str, at: datetime, grace: timedelta) -> MasterKeys:
        """The value after a rotation at ``at``: ``new_key`` signs, the current key keeps signing for ``grace``
        (none: the old key stops at once, e.g. after a leak)."""
        if grace < timedelta(0) or grace > MAX_GRACE:
            raise ValueError(f"the grace period must be between 0 and {MAX_GRACE.days} days")
        if not grace or self.legacy:  # a key every caller has seen never signs again
            return MasterKeys(new_key)
        return MasterKeys(new_key, self.key, at + grace)

    def grace_ended(self) -> MasterKeys:
        """The value with the previous key dropped: only the current master signs from now on."""
        return MasterKeys(self.key)

    def to_json(self) -> str:
        value: dict[str, str] = {"use": MASTER_USE, "key": self.key}
        if self.previous and self.previous_until:
            value["previous"] = self.previous
            value["previous_until"] = self.previous_until.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        return json.dumps(value)


def parse_master(secret_string: str, *, allow_legacy: bool = False) -> MasterKeys:
    """The secret's value as stored (``GenerateSecretString`` makes ``{"use": "webhook-master-v1", "key": <44 letters
    and digits>}``). A value without the marker is refused unless ``allow_legacy`` (the rotation reads it to replace
    it)."""
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
            return MasterKeys(key, legacy=legacy)
        if not isinstance(previous, str) or not isinstance(until, str):
            raise InvalidMasterKey('"previous" needs "previous_until" (ISO 8601)')
        return MasterKeys(key, previous, datetime.fromisoformat(until).astimezone(UTC))
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
