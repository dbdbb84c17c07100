"""Slow DNS and lost work items never leave a batch running (issue 33 item 2), in-process on moto (the fixtures of
test_batch_reconcile.py: real DynamoDB transactions, SQS, SNS).

- A line's webhook lookup is bounded; lines of one chunk sharing a slow host wait for it once; a recorded line is
  never looked up again.
- Each line is budgeted against the invocation's deadline: what does not fit is queued again as a new work item, so
  BatchSubmit (BatchSize 2) answers both records before its Timeout.
- The reconciler fails the lines of a dead-lettered chunk (and ends a dead-lettered split step) with the reason, and
  the unrecorded lines of a batch silent for long; every batch then completes with counts adding up to its total.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import boto3
import pytest

from omnireel.aws.batch_queue import DeadLetters
from omnireel.batches.batch import Line
from omnireel.batches.reconcile import Reconciler
from omnireel.core.s3uri import SourceVersion
from tests.integration.pipeline.test_batch_reconcile import (  # noqa: F401 - the fixture is used by name
    REGION,
    VIDEO,
    _Context,
    _end,
    _handler,
    _later,
    _receive,
    _record,
    aws,
)

SLOW = "https://slow.hooks.example/in"
FAST = "https://fast.hooks.example/in"


class SlowResolver:
    """``slow.hooks.example`` never answers until released (a resolver hanging far past any bound); any other host
    answers a public address at once. Counts lookups per host."""

    def __init__(self) -> None:
        self.calls: dict[str, int] = {}
        self.release = threading.Event()

    def __call__(self, host: str, port: int) -> list[str]:
        self.calls[host] = self.calls.get(host, 0) + 1
        if host.startswith("slow."):
            self.release.wait(60)
            raise OSError("released")
        return ["93.184.215.14"]


@pytest.fixture
def slow(aws: dict[str, Any]) -> Iterator[SlowResolver]:  # noqa: F811
    resolver = SlowResolver()
    aws["fanout"].resolve = resolver
    aws["fanout"].resolve_timeout_s = 0.3
    aws["fanout"].max_in_flight = 100
    try:
        yield resolver
    finally:
        resolver.release.set()


def _job(i: int, webhook: str | None = None) -> dict[str, Any]:
    job: dict[str, Any] = {"prompt": f"a heron {i}", "seed": i, "video": VIDEO}
    if webhook:
        job["webhook"] = webhook
    return job


def _lines(jobs: list[dict[str, Any]]) -> list[Line]:
    return [Line(n, json.dumps(job)) for n, job in enumerate(jobs, start=1)]


def _failed(env: dict[str, Any]) -> dict[int, str]:
    return {
        e["batch"]["line"]: e["error"]["message"] for e in _receive(env, "events") if e["event_type"] == "job.failed"
    }


def test_a_slow_host_fails_its_lines_once_bounded_and_is_never_looked_up_for_a_recorded_line(aws, slow):  # noqa: F811
    jobs = [_job(1, SLOW), _job(2), _job(3, SLOW), _job(4, FAST)]
    batch, _ = aws["intake"].start_api_batch(jobs, owner="alice", idempotency_key="slow-1")
    (item,) = _receive(aws, "work")
    lines = [Line.from_message(line) for line in item["lines"]]
    started = time.monotonic()
    outcome = aws["fanout"].submit_lines(batch.batch_id, lines, 0)
    assert time.monotonic() - started < 5  # one bounded wait (0.3 s) for the slow host, not one per line
    assert (outcome["accepted"], outcome["rejected"]) == (2, 2)
    assert slow.calls == {"slow.hooks.example": 1, "fast.hooks.example": 1}
    failed = _failed(aws)
    assert sorted(failed) == [1, 3]
    assert all("did not resolve within 0.3 s" in message for message in failed.values()), failed
    # A redelivery of the same chunk: every line is recorded, so nothing is looked up (nor submitted) again.
    again = aws["fanout"].submit_lines(batch.batch_id, lines, 0)
    assert again["already"] == 4 and slow.calls == {"slow.hooks.example": 1, "fast.hooks.example": 1}
    record = aws["store"].find(batch.batch_id)
    assert (record.accepted, record.rejected, record.total) == (2, 2, 4)


def test_lines_that_do_not_fit_before_the_deadline_are_continued_not_cut(aws, slow):  # noqa: F811
    jobs = [_job(i, SLOW if i % 2 else None) for i in range(1, 7)]
    batch, _ = aws["intake"].start_api_batch(jobs, owner="alice", idempotency_key="slow-2")
    (item,) = _receive(aws, "work")
    lines = [Line.from_message(line) for line in item["lines"]]
    # Less time than a line's writes take (LINE_WORK_S): the invocation's first line still starts (its lookup clipped
    # to 0.5 s), the rest is continued.
    deadline = time.monotonic() + 3.0
    outcome = aws["fanout"].submit_lines(batch.batch_id, lines, 2, queued_at=1234, deadline=deadline)
    assert outcome["rejected"] == 1 and outcome["continued"] == 5
    (continued,) = _receive(aws, "work")
    assert [line["n"] for line in continued["lines"]] == [2, 3, 4, 5, 6]
    assert (continued["attempt"], continued["queued_at"]) == (2, 1234)  # no backoff step, the same first queue time
    # Not the invocation's first work item and no time left: nothing starts, everything is continued.
    outcome = aws["fanout"].submit_lines(batch.batch_id, lines[1:], 2, deadline=time.monotonic() + 1, first=False)
    assert outcome["continued"] == 5 and sum(v for k, v in outcome.items() if k != "continued") == 0
    # With time, the continued item finishes the batch's submissions.
    (item,) = _receive(aws, "work")
    outcome = aws["fanout"].submit_lines(batch.batch_id, [Line.from_message(x) for x in item["lines"]], 2)
    assert (outcome["accepted"], outcome["rejected"], outcome.get("continued", 0)) == (3, 2, 0)
    assert slow.calls["slow.hooks.example"] == 2  # once per work item that reached a slow line, never per line


def test_batch_submit_answers_both_records_before_its_timeout(aws, slow, monkeypatch):  # noqa: F811
    """BatchSize 2: a chunk of slow-host lines and another caller's chunk in one invocation with 6 s left. Before issue
    33 the first record's unbounded lookups outlived the invocation and both records came back."""
    first, _ = aws["intake"].start_api_batch([_job(i, SLOW) for i in range(3)], owner="alice", idempotency_key="s3a")
    second, _ = aws["intake"].start_api_batch([_job(9)], owner="bob", idempotency_key="s3b")
    items = _receive(aws, "work")
    module = _handler("batch_submit", {"BATCHES_TABLE": "batches", "JOBS_TABLE": "jobs",
                                       "ARTIFACTS_BUCKET": "artifacts", "JOB_EVENTS_TOPIC_ARN": aws["topic"],
                                       "BATCH_QUEUE_URL": aws["work"], "STATE_MACHINE_ARN": "arn:sm",
                                       "POWERTOOLS_METRICS_NAMESPACE": "omnireel"}, monkeypatch)  # fmt: skip
    monkeypatch.setattr(module.fanout, "resolve", slow)
    monkeypatch.setattr(module.fanout, "workflow", aws["workflow"])
    monkeypatch.setattr(module.fanout, "resolve_timeout_s", 3.0)

    class Short(_Context):
        def get_remaining_time_in_millis(self) -> int:
            return 6_000  # 4 s usable (BatchSubmit keeps 2 s to answer): less than one more line's lookup and writes

    by_batch = {item["batch_id"]: item for item in items}
    records = [_record("a", json.dumps(by_batch[first.batch_id])), _record("b", json.dumps(by_batch[second.batch_id]))]
    started = time.monotonic()
    assert module.handler({"Records": records}, Short()) == {"batchItemFailures": []}
    assert time.monotonic() - started < 6
    # Record a: line 1 waited its lookup (clipped to the time left) and failed; too little time was left for another
    # line's lookup and writes, so lines 2-3 were continued. Record b: not the invocation's first and no time left
    # for a line, so it was continued whole. Nothing failed, nothing was cut.
    assert aws["store"].find(first.batch_id).rejected == 1
    continued = {c["batch_id"]: c for c in _receive(aws, "work")}
    assert [len(continued[b.batch_id]["lines"]) for b in (first, second)] == [2, 1]
    records = [_record(m, json.dumps(continued[b.batch_id])) for m, b in (("c", first), ("d", second))]
    assert module.handler({"Records": records}, _Context()) == {"batchItemFailures": []}
    assert aws["store"].find(first.batch_id).rejected == 3 and aws["store"].find(second.batch_id).accepted == 1
    assert slow.calls["slow.hooks.example"] == 2  # once per invocation that reached the host


def _dead_letter_queue(env: dict[str, Any]) -> tuple[str, DeadLetters]:
    url = env["sqs"].create_queue(QueueName="batch-dlq")["QueueUrl"]
    return url, DeadLetters(url)


def _reconciler(env: dict[str, Any], **kwargs: Any) -> Reconciler:
    return Reconciler(store=env["store"], jobs=env["jobs"], progress=env["progress"], failure=env["failure"],
                      grace_s=0, **kwargs)  # fmt: skip


def _complete(env: dict[str, Any], batch_id: str, events: list[dict[str, Any]]) -> dict[str, Any]:
    """Count the batch's terminal events (as BatchProgress does); the batch record then, its counts adding up."""
    for event in events:
        if event.get("batch"):
            env["progress"].record(event)
    record = env["store"].find(batch_id)
    counts = record.counts()
    assert counts.succeeded + counts.failed + counts.cancelled == counts.total == record.terminal
    assert counts.accepted + counts.rejected == counts.total
    return {"status": record.status, "counts": counts}


def test_a_dead_lettered_chunk_fails_its_unrecorded_lines_with_the_reason(aws):  # noqa: F811
    url, dead = _dead_letter_queue(aws)
    batch, _ = aws["intake"].start_api_batch([_job(i) for i in range(4)], owner="alice", idempotency_key="dl1")
    (item,) = _receive(aws, "work")
    lines = [Line.from_message(line) for line in item["lines"]]
    aws["fanout"].max_in_flight = 100
    aws["fanout"].submit_lines(batch.batch_id, lines[:1], 0)  # line 1 made it before the process was killed
    aws["sqs"].send_message(QueueUrl=url, MessageBody=json.dumps(item))  # all five receives killed: dead-lettered
    event = {"event_type": "job.failed", "job_id": "x", "batch": {"batch_id": batch.batch_id, "line": 1}}
    aws["sqs"].send_message(QueueUrl=url, MessageBody=json.dumps(event))  # a job event: the operator's, left alone
    repairs = _reconciler(aws, dead_letter_queue=dead).run(_later())
    assert (repairs.lines_lost, repairs.dead_letters) == (3, 1)
    left = aws["sqs"].get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    # The job event stays, visible at once (the queue's depth alarm keeps firing for it); the work item is gone.
    assert (left["ApproximateNumberOfMessages"], left["ApproximateNumberOfMessagesNotVisible"]) == ("1", "0")
    _end(aws, aws["workflow"].started[0])  # line 1's job ends
    events = _receive(aws, "events")
    failed = {e["batch"]["line"]: e["error"]["message"] for e in events if e["event_type"] == "job.failed"}
    assert sorted(failed) == [2, 3, 4]
    assert all(message.startswith(f"line {n}: ") and "dead-lettered" in message for n, message in failed.items())
    done = _complete(aws, batch.batch_id, events)
    assert done["status"] == "completed" and (done["counts"].cancelled, done["counts"].failed) == (1, 3)


def test_a_dead_lettered_split_step_ends_the_batch_at_its_cursor(aws):  # noqa: F811
    url, dead = _dead_letter_queue(aws)
    s3 = boto3.client("s3", region_name=REGION)
    s3.create_bucket(Bucket="inbox")
    s3.put_bucket_versioning(Bucket="inbox", VersioningConfiguration={"Status": "Enabled"})
    body = b'{"prompt": ""}\n' * 3
    put = s3.put_object(Bucket="inbox", Key="prompts/d.jsonl", Body=body)
    version = SourceVersion(version_id=put["VersionId"], etag=put["ETag"].strip('"'))
    batch_id = aws["intake"].start_file_batch(
        bucket="inbox", key="prompts/d.jsonl", version=version, size=len(body),
        natural_key=f"s3://inbox/prompts/d.jsonl?versionId={put['VersionId']}", inbox=aws["fanout"].inbox,
    )  # fmt: skip
    (split,) = _receive(aws, "work")
    aws["sqs"].send_message(QueueUrl=url, MessageBody=json.dumps(split))
    repairs = _reconciler(aws, dead_letter_queue=dead).run(_later())
    assert repairs.intakes_ended == 1 and repairs.dead_letters == 1
    batch = aws["store"].find(batch_id)
    assert batch.split_done and batch.truncated is not None and batch.truncated.code == "SplitFailed"
    assert "dead-lettered" in batch.truncated.message
    assert batch.status == "completed" and batch.total == 0


def test_unrecorded_lines_of_a_silent_batch_fail_after_the_silence_not_before(aws):  # noqa: F811
    batch, _ = aws["intake"].start_api_batch([_job(i) for i in range(3)], owner="alice", idempotency_key="lost1")
    (item,) = _receive(aws, "work")  # the chunk is lost (taken off the queue, never run)
    assert item["batch_id"] == batch.batch_id
    assert _reconciler(aws).run(_later()).lines_lost == 0  # silent for less than LOST_LINE_MIN_SILENCE_S: waiting
    repairs = _reconciler(aws, lost_line_min_silence_s=0).run(_later())
    assert repairs.lines_lost == 3
    events = _receive(aws, "events")
    failed = {e["batch"]["line"]: e["error"]["message"] for e in events if e["event_type"] == "job.failed"}
    assert sorted(failed) == [1, 2, 3] and all("never submitted" in m for m in failed.values())
    done = _complete(aws, batch.batch_id, events)
    assert done["status"] == "completed" and done["counts"].failed == 3


def test_unrecorded_lines_of_a_dropped_file_are_named_from_the_file(aws):  # noqa: F811
    s3 = boto3.client("s3", region_name=REGION)
    s3.create_bucket(Bucket="inbox")
    s3.put_bucket_versioning(Bucket="inbox", VersioningConfiguration={"Status": "Enabled"})
    body = b'{"prompt": ""}\n\n{"prompt": ""}\n\n\n{"prompt": ""}\n'  # job lines 1, 3 and 6
    put = s3.put_object(Bucket="inbox", Key="prompts/l.jsonl", Body=body)
    version = SourceVersion(version_id=put["VersionId"], etag=put["ETag"].strip('"'))
    batch_id = aws["intake"].start_file_batch(
        bucket="inbox", key="prompts/l.jsonl", version=version, size=len(body),
        natural_key=f"s3://inbox/prompts/l.jsonl?versionId={put['VersionId']}", inbox=aws["fanout"].inbox,
    )  # fmt: skip
    (split,) = _receive(aws, "work")
    assert aws["fanout"].split_step(batch_id, split["offset"], split["line"], redelivered=False) == "done"
    (chunk,) = _receive(aws, "work")
    lines = [Line.from_message(line) for line in chunk["lines"]]
    assert [line.number for line in lines] == [1, 3, 6]
    aws["fanout"].submit_lines(batch_id, lines[:1], 0)  # line 1 rejected (empty prompt); 3 and 6 lost
    repairs = _reconciler(aws, lost_line_min_silence_s=0, inbox=aws["fanout"].inbox).run(_later())
    assert repairs.lines_lost == 2
    assert sorted(_failed(aws)) == [1, 3, 6]
