"""S3 drops against the bad-input corpus (tests/corpus/s3/cases.json) through the user's path: real PUTs to the local
stack's inbox bucket, S3's own notifications (each delivered twice: S3 delivers at least once), the inbox function
and, for accepted files, the whole pipeline.

One batch uploads every case (the module fixture); one test per case then checks its outcome: an accepted file is one
job whose stored request and terminal event carry exactly the prompt that was uploaded; a rejected file is one job with
one ``job.failed`` event carrying the reason; the uploaded version is tagged with the outcome. Never a crash, never
silence. Cases that need an event S3 never sends (``event_only``) run in-process only
(tests/integration/corpus/test_s3_corpus.py).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import pytest

from tests.support.corpus import CORPUS, expand, load_cases, params
from tests.support.stack import LocalStack

from .helpers import JobEvents, aws_client, platform_faults

pytestmark = pytest.mark.e2e

BATCH_TIMEOUT_S = 300  # every delivered case reaches its terminal event within this (accepted ones run the pipeline)
REAL_CASES = [c for c in load_cases("s3") if not c.get("event_only")]


@dataclass
class Outcome:
    key: str
    body: bytes
    version: str
    tags: dict[str, str] = field(default_factory=dict)
    events: list[dict[str, Any]] = field(default_factory=list)
    stored: dict[str, Any] | None = None  # the job's DynamoDB item


def content(case: dict[str, Any]) -> bytes:
    if "file" in case:
        return (CORPUS / "s3" / "files" / case["file"]).read_bytes()
    return expand(case["content"]).encode()


def expectation(case: dict[str, Any]) -> dict[str, Any]:
    return case.get("via_s3") or case["expect"]


def uploaded_prompt(key: str, body: bytes) -> str:
    """The prompt a user put in the file, worked out independently of the inbox code."""
    text = body.decode("utf-8-sig")
    return json.loads(text)["prompt"] if key.lower().endswith(".json") else text.strip()


@pytest.fixture(scope="module")
def corpus(stack: LocalStack) -> dict[str, Outcome]:
    s3, ddb = aws_client(stack, "s3"), aws_client(stack, "dynamodb")
    bucket, table = stack.outputs["OMNIREEL_INBOX_BUCKET_NAME"], stack.outputs["OMNIREEL_JOBS_TABLE_NAME"]
    vanishing = [expand(c["key"]) for c in REAL_CASES if not c.get("put", True)]
    events = JobEvents(stack)
    outcomes: dict[str, Outcome] = {}
    try:
        # Every S3 event is delivered twice; the events of files that must vanish are held back until their version
        # has been deleted (a late delivery, which S3 may make).
        platform_faults(stack, {"seed": 9, "s3_event_duplicate_rate": 1.0, "s3_event_hold": {"prefix": vanishing}})
        try:
            for case in REAL_CASES:
                key, body = expand(case["key"]), content(case)
                version = s3.put_object(Bucket=bucket, Key=key, Body=body)["VersionId"]
                if not case.get("put", True):
                    s3.delete_object(Bucket=bucket, Key=key, VersionId=version)
                outcomes[case["id"]] = Outcome(key, body, version)
        finally:
            platform_faults(stack, {})
        delivered = {
            outcomes[c["id"]].version for c in REAL_CASES if expectation(c)["status"] in ("accepted", "rejected")
        }

        def all_terminal(received: list[dict[str, Any]]) -> bool:
            return delivered <= {(e.get("source_version") or {}).get("version_id") for e in received}

        received = events.until(all_terminal, timeout=BATCH_TIMEOUT_S)
    finally:
        events.close()
    for case in REAL_CASES:
        outcome = outcomes[case["id"]]
        outcome.events = [e for e in received if (e.get("source_version") or {}).get("version_id") == outcome.version]
        if case.get("put", True):
            tagging = s3.get_object_tagging(Bucket=bucket, Key=outcome.key, VersionId=outcome.version)
            outcome.tags = {t["Key"]: t["Value"] for t in tagging["TagSet"]}
        if outcome.events:
            item = ddb.get_item(TableName=table, Key={"job_id": {"S": outcome.events[0]["job_id"]}}).get("Item")
            outcome.stored = item
    return outcomes


@pytest.mark.parametrize("case", [p for p in params("s3") if not p.values[0].get("event_only")])
def test_s3_case_through_a_real_put(stack: LocalStack, corpus: dict[str, Outcome], case: dict[str, Any]) -> None:
    outcome, expect = corpus[case["id"]], expectation(case)
    source = f"s3://{stack.outputs['OMNIREEL_INBOX_BUCKET_NAME']}/{outcome.key}"
    if expect["status"] in ("ignored", "not_delivered"):
        # the batch waited for every delivered case's terminal event; this one made no job and no tag meanwhile
        assert outcome.events == [] and outcome.tags == {}, (outcome.events, outcome.tags)
        return
    assert outcome.events, f"no terminal event within {BATCH_TIMEOUT_S} s"
    job_ids, event_ids = {e["job_id"] for e in outcome.events}, {e["event_id"] for e in outcome.events}
    assert len(job_ids) == 1 and len(event_ids) == 1, "one upload delivered twice is one job with one terminal event"
    event = outcome.events[0]
    assert event["source"] == source and event["source_version"]["version_id"] == outcome.version
    assert outcome.stored is not None and outcome.stored["source"]["S"] == source
    if expect["status"] == "accepted":
        prompt = uploaded_prompt(outcome.key, outcome.body)
        assert json.loads(outcome.stored["request_json"]["S"])["prompt"] == prompt, "the stored job's prompt"
        assert event["prompt"] == prompt, "the prompt that ran"
        assert event["event_type"] == "job.succeeded", event.get("error")
    else:
        assert event["event_type"] == "job.failed" and event["prompt"] is None
        assert event["error"]["stage"] == "accept" and expect["reason"] in event["error"]["message"], event["error"]
        assert outcome.stored["status"]["S"] == "failed" and "request_json" not in outcome.stored
    if case.get("put", True):
        assert outcome.tags.get("omnireel-job-id") == event["job_id"]
        assert outcome.tags.get("omnireel-status") == expect["status"]
    else:
        assert event["error"]["code"] == "SourceVersionGone"
