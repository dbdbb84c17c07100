"""Issue 34 items 5 and 8 at the job store, against moto's DynamoDB with the template's tables: a job takes its
caller's pending place in the transaction that writes it and gives it back, with its day's usage, in the one that ends
it -- once, whatever retries and duplicate terminal events do; the heal fixes a counter that drifted. The front door
(two callers, 429, drops, GET /usage) is tests/e2e/test_caller_limits.py."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta
from typing import Any

import boto3
import pytest
from moto import mock_aws

from omnireel.aws import clients
from omnireel.aws.job_store import JobStore
from omnireel.aws.usage_store import UsageStore, day_key
from omnireel.core.clock import iso, now
from omnireel.core.errors import InvalidRequest, JobConflict, TooManyPendingJobs
from omnireel.jobs.job import JobStatus
from omnireel.jobs.request import parse_job_request
from omnireel.jobs.submission import submit_job
from omnireel.usage import heal as heal_module
from omnireel.usage.heal import heal_pending_counters
from omnireel.usage.limits import INBOX_CALLER, ratelimit_fields
from omnireel.usage.metering import Metering, job_usage, usage_view
from omnireel.usage.prices import ON_DEMAND_USD_PER_HOUR, PRICES_AS_OF, PRICES_SOURCE
from omnireel.usage.report import MAX_RANGE_DAYS, parse_usage_query
from omnireel_template import load_template

LIMIT = 2


class _Workflow:
    def __init__(self) -> None:
        self.started: list[str] = []

    def start(self, job_id: str, name: str) -> None:
        self.started.append(job_id)


def _table(ddb: Any, name: str, logical: str) -> None:
    props = load_template()["Resources"][logical]["Properties"]  # keys and indexes as deployed
    ddb.create_table(
        TableName=name,
        AttributeDefinitions=props["AttributeDefinitions"],
        KeySchema=props["KeySchema"],
        GlobalSecondaryIndexes=props["GlobalSecondaryIndexes"],
        BillingMode="PAY_PER_REQUEST",
    )


@pytest.fixture
def stores(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[JobStore, UsageStore]]:
    for name, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                        "AWS_DEFAULT_REGION": "us-east-1"}.items():  # fmt: skip
        monkeypatch.setenv(name, value)
    with mock_aws():
        clients.client.cache_clear()
        clients._session.cache_clear()
        ddb = boto3.client("dynamodb")
        _table(ddb, "jobs", "JobsTable")
        _table(ddb, "usage", "UsageTable")
        yield JobStore("jobs", usage_table="usage", max_pending=LIMIT), UsageStore("usage")
        clients.client.cache_clear()
        clients._session.cache_clear()


def _submit(jobs: JobStore, owner: str | None, key: str) -> tuple[Any, bool]:
    request = parse_job_request({"prompt": f"p {key}"})
    return submit_job(request, source="api", natural_key=f"api:{owner}:{key}", jobs=jobs, workflow=_Workflow(),
                      owner=owner)  # type: ignore[arg-type]  # fmt: skip


def test_a_caller_at_its_limit_is_refused_and_nothing_is_written(stores: tuple[JobStore, UsageStore]) -> None:
    jobs, usage = stores
    first = [_submit(jobs, "AIDAALICE", str(i))[0] for i in range(LIMIT)]
    with pytest.raises(TooManyPendingJobs):
        _submit(jobs, "AIDAALICE", "over")
    assert usage.pending("AIDAALICE") == LIMIT
    assert _submit(jobs, "AIDABOB", "b")[1] is True  # another caller: its own count
    # A retry of an accepted job at the limit answers that job (idempotent), and counts nothing more.
    again, created = _submit(jobs, "AIDAALICE", "0")
    assert (again.job_id, created) == (first[0].job_id, False) and usage.pending("AIDAALICE") == LIMIT
    # Dropped files (no owner) count against the inbox.
    _submit(jobs, None, "drop")
    assert usage.pending(INBOX_CALLER) == 1


def test_the_terminal_transition_gives_the_place_back_and_counts_the_day_once(
    stores: tuple[JobStore, UsageStore],
) -> None:
    jobs, usage = stores
    job, _ = _submit(jobs, "AIDAALICE", "x")
    jobs.transition(job.job_id, JobStatus.GENERATING_IMAGE)
    metering = {"image_ms": 4800, "image_instance_types": ["ml.g6.xlarge"]}
    ended = jobs.transition(job.job_id, JobStatus.FAILED, metering=metering)
    assert ended.counted_as is None and ended.usage is not None and ended.usage.image_ms == 4800
    for target in (JobStatus.FAILED, JobStatus.CANCELLED):  # a duplicate event, a racing cancel: refused, no count
        with pytest.raises(JobConflict):
            jobs.transition(job.job_id, target)
    assert usage.pending("AIDAALICE") == 0
    today = iso(now())[:10]
    (day,) = usage.days("AIDAALICE", today, today)
    assert (day["jobs"], day["failed"], day["image_ms"]) == (1, 1, 4800)
    assert day["cost_micro_usd"] == round(4.8 / 3600 * ON_DEMAND_USD_PER_HOUR["ml.g6.xlarge"] * 1e6)
    assert _submit(jobs, "AIDAALICE", "y")[1] and _submit(jobs, "AIDAALICE", "z")[1]  # both places free again


def test_the_heal_recounts_a_drifted_counter_only_once_it_is_quiet(
    stores: tuple[JobStore, UsageStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    jobs, usage = stores
    _submit(jobs, "AIDAALICE", "1")
    ddb = boto3.client("dynamodb")
    key = {"caller": {"S": "AIDAALICE"}, "item": {"S": "pending"}}
    ddb.update_item(TableName="usage", Key=key, UpdateExpression="SET pending = :n",
                    ExpressionAttributeValues={":n": {"N": "7"}})  # fmt: skip  # a hand edit: 7 places taken
    assert heal_pending_counters(jobs=jobs, usage=usage) == {}  # just changed: not quiet yet
    monkeypatch.setattr(heal_module, "QUIET_S", -5)  # as if a minute had passed
    assert heal_pending_counters(jobs=jobs, usage=usage) == {"AIDAALICE": 1}
    assert usage.pending("AIDAALICE") == 1
    assert heal_pending_counters(jobs=jobs, usage=usage) == {}  # nothing left to heal


def test_usage_of_a_job_prices_model_seconds_and_names_what_it_cannot_price() -> None:
    start = datetime(2026, 1, 1, tzinfo=UTC)
    record = job_usage(
        created_at=start,
        first_stage_at=start + timedelta(seconds=3),
        ended_at=start + timedelta(seconds=40),
        metering=Metering(image_ms=4000, image_instance_types=["ml.g6.xlarge", "ml.g5.xlarge"],
                          video_invoked_at=iso(start + timedelta(seconds=8)), video_instance_type="ml.p5.48xlarge"),
    )  # fmt: skip
    view = usage_view(record)
    assert view is not None
    assert (view["queue_seconds"], view["image_seconds"], view["video_seconds"]) == (3.0, 4.0, 32.0)
    assert view["instance_types"] == {"image": ["ml.g6.xlarge", "ml.g5.xlarge"], "video": ["ml.p5.48xlarge"]}
    assert view["estimated_cost_usd"] is None and view["unpriced_instance_types"] == ["ml.p5.48xlarge"]
    assert PRICES_AS_OF in PRICES_SOURCE and view["prices_as_of"] == PRICES_AS_OF


def test_the_ratelimit_fields_follow_the_httpapi_draft() -> None:
    assert ratelimit_fields(100, 63) == {
        "RateLimit-Policy": '"pending";q=100;qu="concurrent-requests"',
        "RateLimit": '"pending";r=37',
    }
    assert ratelimit_fields(5, 9)["RateLimit"] == '"pending";r=0'  # never negative
    assert "RateLimit" not in ratelimit_fields(5, None)


def test_usage_ranges_are_bounded_with_clear_errors() -> None:
    today = date(2026, 12, 4)
    assert parse_usage_query(None, today) == (today - timedelta(days=29), today)
    assert parse_usage_query({"from": "2026-12-01", "to": "2026-12-02"}, today) == (
        date(2026, 12, 1),
        date(2026, 12, 2),
    )
    for query, code in (
        ({"from": "2026-2-1"}, "InvalidDate"),
        ({"to": "yesterday"}, "InvalidDate"),
        ({"from": "2026-12-03", "to": "2026-12-02"}, "InvalidRange"),
        ({"from": "2020-01-01", "to": "2026-12-02"}, "InvalidRange"),
        ({"day": "1"}, "InvalidRequest"),
    ):
        with pytest.raises(InvalidRequest) as caught:
            parse_usage_query(query, today)
        assert caught.value.code == code, query
    last = today - timedelta(days=MAX_RANGE_DAYS - 1)
    assert parse_usage_query({"from": last.isoformat(), "to": today.isoformat()}, today)[0] == last
    assert day_key("2026-12-04") == "day#2026-12-04"


def test_a_job_ended_by_a_function_without_the_usage_table_is_healed_not_leaked(
    stores: tuple[JobStore, UsageStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A function wired without USAGE_TABLE (a template mistake) still ends the job and takes it out of its caller's
    open jobs; the heal then gives the place back."""
    jobs, usage = stores
    job, _ = _submit(jobs, "AIDAALICE", "x")
    JobStore("jobs").transition(job.job_id, JobStatus.FAILED)
    assert usage.pending("AIDAALICE") == 1 and jobs.count_open("AIDAALICE") == 0
    monkeypatch.setattr(heal_module, "QUIET_S", -5)
    assert heal_pending_counters(jobs=jobs, usage=usage) == {"AIDAALICE": 0}
