"""S3 drops that S3 itself never sends, against the bad-input corpus (tests/corpus/s3/cases.json), in-process.

Every case runs through real PUTs and S3's own notifications on the local stack (tests/e2e/test_s3_corpus.py). The
handler must also hold when an event is one S3 would not send: a key outside prompts/ (the notification filter is
the first guard, the function checks anyway) or a size that understates the object (``event_only`` cases). Those are
delivered here as hand-built events, twice (S3 delivers at least once): exactly one ``job.failed`` event carrying the
reason, no execution, the object tagged with the outcome.
"""

from __future__ import annotations

import hashlib
import json
import time
from typing import Any
from urllib.parse import quote_plus

import pytest

from omnireel.events.event_types import TERMINAL_EVENT_TYPES
from tests.integration.pipeline.harness import Context, s3_put_event
from tests.support.corpus import CORPUS, expand, params

_EVENTS: list[dict[str, Any]] = []  # job events received so far (the queue is shared by the module's cases)


def _content(case: dict[str, Any]) -> bytes:
    if "file" in case:
        return (CORPUS / "s3" / "files" / case["file"]).read_bytes()
    return expand(case["content"]).encode()


def _event(pipeline, case: dict[str, Any], key: str, body: bytes, put: dict[str, Any]) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    return s3_put_event(
        pipeline.inbox_bucket,
        quote_plus(key, safe="/"),  # S3 URL-encodes keys in events (space -> '+')
        size=case.get("event_size", len(body)),
        etag=put["ETag"].strip('"'),
        sequencer=hashlib.sha256(case["id"].encode()).hexdigest()[:16].upper(),
        version_id=put["VersionId"],
    )


def _not_sent_by_s3(case: dict[str, Any]) -> bool:
    return bool(case.get("event_only")) or (case.get("via_s3") or {}).get("status") == "not_delivered"


def _events_for(pipeline, job_id: str, *, wait_for_one: bool, timeout: float = 10) -> list[dict[str, Any]]:  # type: ignore[no-untyped-def]
    """This job's events, after draining the shared events queue (bounded by ``timeout``).

    ``wait_for_one``: until at least one of its events has arrived. Otherwise until the queue is empty: the inbox
    handler publishes before it returns, so an accept-stage failure of this job is in the queue by then, behind at
    most every other case's events -- all of which are read, not just the first batch.
    """
    deadline = time.monotonic() + timeout
    while True:
        messages = pipeline.sqs.receive_message(
            QueueUrl=pipeline.events_queue, MaxNumberOfMessages=10, WaitTimeSeconds=0
        ).get("Messages", [])
        for message in messages:
            _EVENTS.append(json.loads(json.loads(message["Body"])["Message"]))
            pipeline.sqs.delete_message(QueueUrl=pipeline.events_queue, ReceiptHandle=message["ReceiptHandle"])
        mine = [e for e in _EVENTS if e.get("job_id") == job_id and e.get("event_type") in TERMINAL_EVENT_TYPES]
        if not messages and (mine or not wait_for_one):
            return mine
        assert time.monotonic() < deadline, f"the events of job {job_id} did not arrive within {timeout} s"
        if not messages:
            time.sleep(0.05)  # polling interval of a bounded wait


@pytest.mark.parametrize("case", [p for p in params("s3") if _not_sent_by_s3(p.values[0])])
def test_s3_case(corpus_pipeline, case: dict[str, Any]) -> None:
    pipeline = corpus_pipeline
    expect = case["expect"]
    key = expand(case["key"])
    body = _content(case)
    put = pipeline.s3.put_object(Bucket=pipeline.inbox_bucket, Key=key, Body=body)
    event = _event(pipeline, case, key, body, put)

    t0 = time.monotonic()
    first = pipeline.handlers["inbox"].handler(event, Context("inbox"))["results"]
    again = pipeline.handlers["inbox"].handler(event, Context("inbox"))["results"]  # a duplicate delivery
    assert time.monotonic() - t0 < 10, "the inbox function took too long"
    [result] = first
    [second] = again
    assert expect["status"] == "rejected", "only rejections are expected of events S3 never sends"
    assert result["key"] == key
    assert result["status"] == "rejected" and second["status"] == "rejected", (result, second)
    assert second["job_id"] == result["job_id"], "the same drop delivered twice must be one job"
    assert expect["reason"] in result["reason"], result["reason"]
    job_id = result["job_id"]
    assert [e for e in pipeline.executions() if e["name"] == job_id] == [], (
        "a rejected drop must not start an execution"
    )
    job = pipeline.ddb.get_item(TableName=pipeline.table, Key={"job_id": {"S": job_id}})["Item"]
    assert job["status"]["S"] == "failed"
    events = _events_for(pipeline, job_id, wait_for_one=True)
    assert [e["event_type"] for e in events] == ["job.failed"], "exactly one job.failed per rejected drop"
    assert events[0]["error"]["stage"] == "accept" and expect["reason"] in events[0]["error"]["message"]
    assert events[0]["source"] == f"s3://{pipeline.inbox_bucket}/{key}"
    assert events[0]["source_version"]["version_id"] == put["VersionId"]
    tagging = pipeline.s3.get_object_tagging(Bucket=pipeline.inbox_bucket, Key=key, VersionId=put["VersionId"])
    assert {"Key": "omnireel-job-id", "Value": job_id} in tagging["TagSet"]
    assert {"Key": "omnireel-status", "Value": "rejected"} in tagging["TagSet"]
