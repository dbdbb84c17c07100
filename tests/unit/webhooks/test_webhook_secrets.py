"""Issue 25 item 1: per-caller webhook secrets derived from a master key, the unowned secret, rotation with a grace
period (two signatures, both verify) and the functions' bounded cache of the master key."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from datetime import UTC, datetime, timedelta

import pytest
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from omnireel.core.errors import SigningKeyUnavailable, WebhookOwnerUnknown
from omnireel.webhooks.delivery import signed_headers
from omnireel.webhooks.dispatch import QueuedEvent
from omnireel.webhooks.secrets import (
    InvalidMasterKey,
    MasterKeys,
    new_master_key,
    parse_master,
    scope_secret,
    signing_secrets,
    unowned_secret,
)
from omnireel.webhooks.signing import delivery_secrets, event_owner, secret_view

MASTER = "Q2hhbmdlTWVDaGFuZ2VNZUNoYW5nZU1lQ2hhbmdlTWU"  # 44 characters, as GenerateSecretString makes it
ALICE = "arn:aws:iam::123456789012:user/alice"
BOB = "arn:aws:iam::123456789012:role/bob-app"
AT = datetime(2026, 12, 3, 9, 0, tzinfo=UTC)


def test_a_scope_secret_is_the_documented_hmac_of_the_master_and_the_scope() -> None:
    digest = hmac.new(MASTER.encode(), b"omnireel-webhook-v1\x00scope\x00" + ALICE.encode(), hashlib.sha256).digest()
    assert scope_secret(MASTER, ALICE) == "whsec_" + base64.b64encode(digest).decode()
    unowned = hmac.new(MASTER.encode(), b"omnireel-webhook-v1\x00unowned", hashlib.sha256).digest()
    assert unowned_secret(MASTER) == "whsec_" + base64.b64encode(unowned).decode()


def test_secrets_are_stable_distinct_per_scope_and_usable_by_the_standard_webhooks_library() -> None:
    assert scope_secret(MASTER, ALICE) == scope_secret(MASTER, ALICE)
    scopes = [ALICE, BOB, "arn:aws:iam::123456789012:root", "anonymous", "", "unowned", "\x00unowned"]
    secrets = {scope_secret(MASTER, scope) for scope in scopes} | {unowned_secret(MASTER)}
    assert len(secrets) == len(scopes) + 1  # every scope differs, and none is the unowned secret
    assert scope_secret(new_master_key(), ALICE) != scope_secret(MASTER, ALICE)  # another master, another secret
    for secret in secrets:
        assert secret.startswith("whsec_") and len(base64.b64decode(secret.removeprefix("whsec_"))) == 32
        Webhook(secret)  # a valid Standard Webhooks secret


def test_a_delivery_signed_for_one_scope_does_not_verify_with_another_scopes_secret() -> None:
    body, now = '{"event_id": "ev-1"}', datetime.now(UTC)
    headers = signed_headers(scope_secret(MASTER, ALICE), "ev-1", body, now)
    assert Webhook(scope_secret(MASTER, ALICE)).verify(body, headers) == {"event_id": "ev-1"}
    with pytest.raises(WebhookVerificationError):
        Webhook(scope_secret(MASTER, BOB)).verify(body, headers)
    with pytest.raises(WebhookVerificationError):
        Webhook(unowned_secret(MASTER)).verify(body, headers)


def test_the_master_document_round_trips_and_a_malformed_one_is_refused() -> None:
    assert parse_master(json.dumps({"use": "webhook-master-v1", "key": MASTER})) == MasterKeys(MASTER)
    rotated = MasterKeys(MASTER).rotated("N" * 44, AT, timedelta(hours=24))
    assert rotated == MasterKeys("N" * 44, MASTER, AT + timedelta(hours=24), rotated_at=AT)
    assert parse_master(rotated.to_json()) == rotated
    assert json.loads(rotated.to_json())["previous_until"] == "2026-12-04T09:00:00Z"
    marked = {"use": "webhook-master-v1"}
    for bad in ("not json", "{}", json.dumps({**marked, "key": "short"}),
                json.dumps({**marked, "key": MASTER, "previous": MASTER}), "[1]"):  # fmt: skip
        with pytest.raises(InvalidMasterKey):
            parse_master(bad)


def test_the_single_secret_of_before_is_never_derived_from_and_a_rotation_drops_it_at_once() -> None:
    """Before per-caller secrets, GET /webhooks/secret served ``whsec_<key>`` of this very secret to every caller:
    anyone of them could compute every derived secret from it. Its value has no ``use`` marker."""
    legacy = json.dumps({"key": MASTER})  # as GenerateSecretString made it then
    with pytest.raises(InvalidMasterKey, match="rotate"):
        parse_master(legacy)
    old = parse_master(legacy, allow_legacy=True)  # only the rotation reads it
    assert old.legacy
    assert old.rotated("N" * 44, AT, timedelta(hours=24)) == MasterKeys("N" * 44)  # no grace for a disclosed key
    assert json.loads(MasterKeys("N" * 44).to_json())["use"] == "webhook-master-v1"


def test_during_the_grace_period_both_masters_sign_then_only_the_new_one() -> None:
    keys = MasterKeys(MASTER).rotated("N" * 44, AT, timedelta(hours=24))
    during = signing_secrets(keys, ALICE, AT + timedelta(hours=23))
    assert during == (scope_secret("N" * 44, ALICE), scope_secret(MASTER, ALICE))
    assert signing_secrets(keys, ALICE, AT + timedelta(hours=24)) == (scope_secret("N" * 44, ALICE),)
    # until every function has read the rotation (issue 33 item 9: test_webhook_rotation_phases), the old one alone
    assert signing_secrets(keys, None, AT) == (unowned_secret(MASTER),)
    assert signing_secrets(keys, None, AT + timedelta(hours=1)) == (unowned_secret("N" * 44), unowned_secret(MASTER))
    with pytest.raises(ValueError, match="grace"):
        MasterKeys(MASTER).rotated("N" * 44, AT, timedelta(days=31))


def test_a_delivery_in_the_grace_period_carries_two_signatures_and_each_secret_verifies_it() -> None:
    keys = MasterKeys(MASTER).rotated("N" * 44, AT, timedelta(hours=24))
    now = datetime.now(UTC)
    body = '{"event_id": "ev-2"}'
    headers = signed_headers(signing_secrets(keys, ALICE, AT + timedelta(hours=1)), "ev-2", body, now)
    entries = headers["webhook-signature"].split(" ")
    assert len(entries) == 2 and all(e.startswith("v1,") for e in entries)
    for secret in (scope_secret(MASTER, ALICE), scope_secret("N" * 44, ALICE)):  # an old and an updated receiver
        assert Webhook(secret).verify(body, headers)["event_id"] == "ev-2"
    with pytest.raises(WebhookVerificationError):
        Webhook(scope_secret("N" * 44, BOB)).verify(body, headers)
    after = signed_headers(signing_secrets(keys, ALICE, AT + timedelta(days=2)), "ev-2", body, now)
    assert " " not in after["webhook-signature"]
    with pytest.raises(WebhookVerificationError):
        Webhook(scope_secret(MASTER, ALICE)).verify(body, after)


def test_get_webhooks_secret_shows_the_callers_secret_and_the_previous_one_only_during_the_grace_period() -> None:
    keys = MasterKeys(MASTER).rotated("N" * 44, AT, timedelta(hours=24))
    view = secret_view(keys, ALICE, AT + timedelta(hours=1))
    assert view["secret"] == scope_secret("N" * 44, ALICE)
    assert view["previous_secret"] == scope_secret(MASTER, ALICE)
    assert view["previous_until"] == "2026-12-04T09:00:00Z"
    later = secret_view(keys, ALICE, AT + timedelta(hours=25))
    assert (later["previous_secret"], later["previous_until"]) == (None, None)
    assert unowned_secret("N" * 44) not in json.dumps(view) and "N" * 44 not in json.dumps(view)


# ---------------------------------------------------------------- who owns the event
class _Owners:
    def __init__(self, jobs: dict[str, str | None], batches: dict[str, str | None]):
        self.jobs, self.batches = jobs, batches

    def of_job(self, job_id: str) -> str | None:
        if job_id not in self.jobs:
            raise WebhookOwnerUnknown(f"job {job_id} has no record")
        return self.jobs[job_id]

    def of_batch(self, batch_id: str) -> str | None:
        if batch_id not in self.batches:
            raise WebhookOwnerUnknown(f"batch {batch_id} has no record")
        return self.batches[batch_id]


class _Master:
    def __init__(self, keys: MasterKeys):
        self._keys = keys

    def keys(self) -> MasterKeys:
        return self._keys


def _queued(job_id: str | None, body: dict) -> QueuedEvent:
    return QueuedEvent("https://h.example/", json.dumps(body), "ev", str(body.get("event_type")), job_id)


def test_each_delivery_is_signed_with_its_records_owners_secret() -> None:
    owners = _Owners({"j-a": ALICE, "j-drop": None}, {"b-b": BOB, "b-drop": None})
    master = _Master(MasterKeys(MASTER))

    def secrets(queued: QueuedEvent) -> tuple[str, ...]:
        return delivery_secrets(queued, master=master, owners=owners, at=AT)  # type: ignore[arg-type]

    assert secrets(_queued("j-a", {"event_type": "job.succeeded"})) == (scope_secret(MASTER, ALICE),)
    assert secrets(_queued("j-drop", {"event_type": "job.failed"})) == (unowned_secret(MASTER),)
    completed = {"event_type": "batch.completed", "batch_id": "b-b"}
    assert secrets(_queued(None, completed)) == (scope_secret(MASTER, BOB),)
    assert secrets(_queued(None, {**completed, "batch_id": "b-drop"})) == (unowned_secret(MASTER),)
    # A batch's job event is the job's: its record (owner = the batch's owner, set at fan-out) decides.
    assert secrets(_queued("j-a", {"event_type": "job.succeeded", "batch": {"batch_id": "b-b"}})) == (
        scope_secret(MASTER, ALICE),
    )
    with pytest.raises(WebhookOwnerUnknown):
        event_owner(_queued("j-gone", {"event_type": "job.succeeded"}), owners=owners)  # type: ignore[arg-type]
    with pytest.raises(WebhookOwnerUnknown):
        event_owner(_queued(None, {"event_type": "x"}), owners=owners)  # type: ignore[arg-type]


# ---------------------------------------------------------------- the functions' cache of the master key
class _SecretsManager:
    def __init__(self, value: str):
        self.value, self.reads = value, 0

    def get_secret_value(self, SecretId: str) -> dict:
        self.reads += 1
        return {"SecretString": self.value}


def test_a_rotated_master_is_picked_up_once_the_cache_is_older_than_its_ttl(monkeypatch: pytest.MonkeyPatch) -> None:
    from omnireel.aws import secrets as module

    manager = _SecretsManager(MasterKeys(MASTER).to_json())
    monkeypatch.setattr(module, "client", lambda service: manager)
    clock = [1000.0]
    source = module.WebhookMasterKey("arn:secret", ttl_s=300, clock=lambda: clock[0])
    assert source.keys() == MasterKeys(MASTER) and manager.reads == 1
    rotated = MasterKeys(MASTER).rotated("N" * 44, AT, timedelta(hours=1))
    manager.value = rotated.to_json()  # `omnireel webhooks rotate`
    clock[0] += 299
    assert source.keys() == MasterKeys(MASTER) and manager.reads == 1  # still cached
    clock[0] += 1
    assert source.keys() == rotated and manager.reads == 2  # 300 s after the read: read again
    assert module.DEFAULT_TTL_S < 3600  # shorter than the shortest grace period the CLI allows (1 hour)


def test_an_unreadable_or_malformed_master_is_a_retryable_domain_error(monkeypatch: pytest.MonkeyPatch) -> None:
    from botocore.exceptions import ClientError

    from omnireel.aws import secrets as module

    class Failing:
        def get_secret_value(self, SecretId: str) -> dict:
            raise ClientError({"Error": {"Code": "ThrottlingException", "Message": "slow down"}}, "GetSecretValue")

    monkeypatch.setattr(module, "client", lambda service: Failing())
    with pytest.raises(SigningKeyUnavailable) as failed:
        module.WebhookMasterKey("arn:secret").keys()
    assert failed.value.retryable and "ThrottlingException" in failed.value.message
    monkeypatch.setattr(module, "client", lambda service: _SecretsManager('{"key": "short"}'))
    with pytest.raises(SigningKeyUnavailable, match="malformed"):
        module.WebhookMasterKey("arn:secret").keys()
    monkeypatch.setattr(module, "client", lambda service: _SecretsManager(json.dumps({"key": MASTER})))
    with pytest.raises(SigningKeyUnavailable, match="served to every caller"):
        module.WebhookMasterKey("arn:secret").keys()
