"""Issue 33 item 9 in process: after a rotation, what ``GET /webhooks/secret`` says signs is what every delivery
function signs, whatever document its key cache holds.

The rule, checked over time: functions read the master document through a cache of ``ttl`` seconds, and a write
reaches readers up to ``visible_after`` seconds late (Secrets Manager, clocks). At any instant, every reader -- the API
answering the view, and each delivery function, whichever document version it read within its cache -- derives the
same signing masters."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from omnireel.webhooks.secrets import (
    PICKUP_MARGIN,
    MasterKeys,
    parse_master,
    scope_secret,
)
from omnireel.webhooks.signing import secret_view

K0, K1 = "A" * 44, "B" * 44
T = datetime(2026, 12, 4, 12, tzinfo=UTC)
ALICE = "AIDAALICE"


def _history(*writes: tuple[datetime, MasterKeys]) -> list[tuple[datetime, str]]:
    return [(at, keys.to_json()) for at, keys in writes]


def _document_read_at(history: list[tuple[datetime, str]], read_at: datetime, visible_after: timedelta) -> str:
    """The document a read at ``read_at`` returns: the last write visible by then."""
    seen = [doc for at, doc in history if at + visible_after <= read_at]
    return seen[-1] if seen else history[0][1]


def _readers_agree(history: list[tuple[datetime, str]], ttl: timedelta, span: timedelta) -> None:
    pickup = ttl + PICKUP_MARGIN
    step = timedelta(seconds=5)
    t = history[0][0]
    while t < history[-1][0] + span:
        answers = set()
        for visible_after in (timedelta(0), PICKUP_MARGIN - timedelta(seconds=1)):
            for age in range(0, int(ttl.total_seconds()) + 1, max(1, int(ttl.total_seconds()) // 6)):
                document = _document_read_at(history, t - timedelta(seconds=age), visible_after)
                answers.add(parse_master(document, pickup=pickup).signing(t))
        assert len(answers) == 1, f"at {t:%H:%M:%S} readers sign with different masters: {answers}"
        t += step


@pytest.mark.parametrize("ttl_s", [1, 60, 300])
@pytest.mark.parametrize("grace", [timedelta(0), timedelta(hours=1)])
def test_every_reader_signs_with_the_same_masters_through_a_rotation(ttl_s: int, grace: timedelta) -> None:
    start = MasterKeys(K0)
    rotated = start.rotated(K1, T, grace)
    history = _history((T - timedelta(hours=1), start), (T, rotated))
    _readers_agree(history, timedelta(seconds=ttl_s), timedelta(minutes=10) + grace)


@pytest.mark.parametrize("ttl_s", [1, 300])
def test_every_reader_signs_with_the_same_masters_when_the_grace_period_is_ended_early(ttl_s: int) -> None:
    rotated = MasterKeys(K0).rotated(K1, T, timedelta(hours=24))
    ended = rotated.grace_ended(T + timedelta(hours=2))
    history = _history((T - timedelta(hours=1), MasterKeys(K0)), (T, rotated), (T + timedelta(hours=2), ended))
    _readers_agree(history, timedelta(seconds=ttl_s), timedelta(minutes=10))


def test_ending_it_right_after_the_rotation_still_lets_every_function_read_the_new_key_first() -> None:
    rotated = MasterKeys(K0).rotated(K1, T, timedelta(hours=24))
    ended = rotated.grace_ended(T + timedelta(seconds=10))
    history = _history((T - timedelta(hours=1), MasterKeys(K0)), (T, rotated), (T + timedelta(seconds=10), ended))
    _readers_agree(history, timedelta(seconds=300), timedelta(minutes=10))
    assert ended.grace_ended(T + timedelta(hours=1)).grace_ended_at == ended.grace_ended_at  # the first end stays


def test_the_view_says_which_secrets_sign_now_and_from_when_the_new_one_will() -> None:
    pickup = timedelta(seconds=300) + PICKUP_MARGIN
    keys = parse_master(MasterKeys(K0).rotated(K1, T, timedelta(hours=24)).to_json(), pickup=pickup)
    new, old = scope_secret(K1, ALICE), scope_secret(K0, ALICE)
    starts = (T + pickup).strftime("%Y-%m-%dT%H:%M:%SZ")

    right_after = secret_view(keys, ALICE, T + timedelta(seconds=1))
    assert right_after["secret"] == new and right_after["previous_secret"] == old
    assert right_after["signing"] == ["previous_secret"] and right_after["secret_signs_from"] == starts

    both = secret_view(keys, ALICE, T + pickup)
    assert both["signing"] == ["secret", "previous_secret"] and both["previous_until"] == "2026-12-05T12:00:00Z"

    after = secret_view(keys, ALICE, T + timedelta(hours=25))
    assert after["signing"] == ["secret"]
    assert (after["previous_secret"], after["previous_until"], after["secret_signs_from"]) == (None, None, None)


def test_a_document_without_rotated_at_signs_as_it_did_before() -> None:
    """Written by an older CLI, or the replacement of the pre-issue-25 single secret: the new key signs at once."""
    document = json.dumps(
        {"use": "webhook-master-v1", "key": K1, "previous": K0, "previous_until": "2026-12-05T12:00:00Z"}
    )
    keys = parse_master(document)
    assert keys.signing(T) == (K1, K0) and keys.key_from() is None
    assert secret_view(keys, ALICE, T)["signing"] == ["secret", "previous_secret"]
    legacy = parse_master(json.dumps({"key": K0}), allow_legacy=True).rotated(K1, T, timedelta(hours=24))
    assert legacy.signing(T) == (K1,) and legacy.previous is None


def test_the_functions_reader_derives_its_pickup_from_its_own_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    from omnireel.aws import secrets as module

    class Manager:
        def get_secret_value(self, SecretId: str) -> dict[str, str]:
            return {"SecretString": MasterKeys(K0).rotated(K1, T, timedelta(hours=1)).to_json()}

    monkeypatch.setattr(module, "client", lambda service: Manager())
    quick = module.WebhookMasterKey("arn:secret", ttl_s=1).keys()
    assert quick.key_from() == T + timedelta(seconds=1) + PICKUP_MARGIN
    assert module.WebhookMasterKey("arn:secret").keys().key_from() == T + timedelta(seconds=300) + PICKUP_MARGIN


def test_the_functions_reader_takes_its_margin_from_its_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    """WEBHOOK_PICKUP_MARGIN_SECONDS (1-300 s, default PICKUP_MARGIN) reaches the reader the functions build."""
    from omnireel.aws import adapters
    from omnireel.aws import secrets as module
    from omnireel.runtime.settings import WebhookSettings

    class Manager:
        def get_secret_value(self, SecretId: str) -> dict[str, str]:
            return {"SecretString": MasterKeys(K0).rotated(K1, T, timedelta(hours=1)).to_json()}

    monkeypatch.setattr(module, "client", lambda service: Manager())
    base = {"JOBS_TABLE": "jobs", "WEBHOOK_SECRET_ARN": "arn:secret", "WEBHOOK_QUEUE_URL": "https://queue"}
    default = WebhookSettings.from_env({**base, "WEBHOOK_KEY_CACHE_SECONDS": "2"})
    assert adapters.webhook_master_key(default).keys().key_from() == T + timedelta(seconds=2) + PICKUP_MARGIN
    tuned = WebhookSettings.from_env({**base, "WEBHOOK_KEY_CACHE_SECONDS": "2", "WEBHOOK_PICKUP_MARGIN_SECONDS": "3"})
    assert adapters.webhook_master_key(tuned).keys().key_from() == T + timedelta(seconds=5)
    for refused in ("0", "0.5", "301"):
        with pytest.raises(RuntimeError, match="WEBHOOK_PICKUP_MARGIN_SECONDS"):
            WebhookSettings.from_env({**base, "WEBHOOK_PICKUP_MARGIN_SECONDS": refused})
