"""A dropped file whose caller is at CallerMaxPendingJobs waits in the inbox retry queue (``jobs.inbox``:
``accept_dropped_file``, which the inbox function calls once per record): a growing delay, the first wait's time
carried along, and after ``max_deferral_s`` (or without a retry queue) a failure with the reason instead of a wait."""

from __future__ import annotations

import re
import time
from typing import Any

import pytest

from omnireel.core.s3uri import SourceVersion
from omnireel.jobs import inbox
from omnireel.jobs.inbox import InboxOutcome, accept_dropped_file, wait_delay

RECORD = {
    "s3": {
        "bucket": {"name": "drops"},
        "object": {"key": "prompts/a+b.txt", "versionId": "v1", "eTag": "e1", "sequencer": "01", "size": 7},
    }
}


class RetryQueue:
    def __init__(self) -> None:
        self.waits: list[tuple[dict, dict[str, Any]]] = []

    def wait(self, record: dict, **kwargs: Any) -> None:
        self.waits.append((record, kwargs))


@pytest.fixture
def accepted(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """``accept_inbox_object``'s calls; the drop's caller is at its limit unless it gives up waiting."""
    calls: list[dict[str, Any]] = []

    def accept(**kwargs: Any) -> InboxOutcome:
        calls.append(kwargs)
        return InboxOutcome(kwargs["key"], "job-1", "rejected" if kwargs["give_up_waiting"] else "waiting")

    monkeypatch.setattr(inbox, "accept_inbox_object", accept)
    return calls


def _drop(attempt: int, first_waited_at: int | None, retry: RetryQueue | None, max_deferral_s: int = 3600):  # type: ignore[no-untyped-def]
    return accept_dropped_file(
        RECORD, attempt=attempt, first_waited_at=first_waited_at, retry=retry, max_deferral_s=max_deferral_s,  # type: ignore[arg-type]
        inbox=None, jobs=None, workflow=None, artifacts=None, publisher=None, presign_seconds=60,  # type: ignore[arg-type]
    )  # fmt: skip


def test_a_first_drop_over_the_limit_waits_with_the_first_delay(accepted: list[dict[str, Any]]) -> None:
    retry = RetryQueue()
    before = int(time.time())
    assert _drop(0, None, retry).status == "waiting"
    call = accepted[0]
    assert (call["bucket"], call["key"], call["sequencer"], call["size"]) == ("drops", "prompts/a+b.txt", "01", 7)
    assert call["version"] == SourceVersion(version_id="v1", etag="e1") and call["give_up_waiting"] is None
    [(record, wait)] = retry.waits
    assert record is RECORD and wait["attempt"] == 1 and wait["delay_s"] == wait_delay(1) == 15
    assert before <= wait["first_waited_at"] <= int(time.time())


def test_a_drop_back_from_the_queue_waits_longer_and_keeps_its_first_wait(accepted: list[dict[str, Any]]) -> None:
    retry = RetryQueue()
    first = int(time.time()) - 100
    _drop(2, first, retry)
    [(_, wait)] = retry.waits
    assert wait == {"attempt": 3, "first_waited_at": first, "delay_s": wait_delay(3)} and wait_delay(3) == 60


def test_a_drop_that_waited_too_long_or_cannot_wait_fails_with_the_reason(accepted: list[dict[str, Any]]) -> None:
    retry = RetryQueue()
    assert _drop(5, int(time.time()) - 4000, retry).status == "rejected"
    assert _drop(0, None, None).status == "rejected"  # no retry queue: it cannot wait
    assert retry.waits == []
    waited, cannot = (call["give_up_waiting"] for call in accepted)
    assert "CallerMaxPendingJobs" in waited and "it may wait 3600 s" in waited
    assert re.search(r"pending for 400[01] s after the file was dropped", waited)  # a second may tick meanwhile
    assert "for 0 s" in cannot
