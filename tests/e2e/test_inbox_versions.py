"""Dropped files on the local stack: each upload is its own job, run with exactly the object version its S3 event
names, through real S3 PUTs and their notifications (issue 9, defect 1)."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest
from botocore.exceptions import ClientError

from omnireel_local import home as homedir
from tests.support.processes import stop_process
from tests.support.stack import ROOT, LocalStack, cli_command

from .helpers import JobEvents, aws_client, held_s3_events, job_of_version

pytestmark = pytest.mark.e2e

JOB_TIMEOUT_S = 150


def _job(stack: LocalStack, job_id: str) -> dict:
    return json.loads(stack.cli("status", job_id, "--json", check=True).stdout)


def test_an_overwrite_before_the_read_runs_each_upload_with_its_own_prompt(stack: LocalStack) -> None:
    s3 = aws_client(stack, "s3")
    bucket = stack.outputs["OMNIREEL_INBOX_BUCKET_NAME"]
    key = "prompts/overwrite/x.txt"
    source = f"s3://{bucket}/{key}"
    events = JobEvents(stack)
    try:
        # Both notifications arrive after the second upload (S3 may deliver late): reading the key would run "b" twice.
        with held_s3_events(stack, "prompts/overwrite/"):
            first = s3.put_object(Bucket=bucket, Key=key, Body=b"a")
            second = s3.put_object(Bucket=bucket, Key=key, Body=b"b")
        received = events.until(
            lambda got: len({e["job_id"] for e in got if e.get("source") == source}) >= 2, JOB_TIMEOUT_S
        )
    finally:
        events.close()
    terminal = {e["job_id"]: e for e in received if e.get("source") == source}
    assert sorted(e["prompt"] for e in terminal.values()) == ["a", "b"], "each upload must run with its own prompt"
    for put, prompt in ((first, "a"), (second, "b")):
        job_id = job_of_version(s3, bucket, key, put["VersionId"])  # the inbox tagged exactly this version
        assert terminal[job_id]["event_type"] == "job.succeeded", terminal[job_id]
        assert terminal[job_id]["prompt"] == prompt
        # what S3's notification named, as AWS sends it: the version and its (unquoted) ETag
        assert terminal[job_id]["source_version"] == {"version_id": put["VersionId"], "etag": put["ETag"].strip('"')}
        job = _job(stack, job_id)  # GET /jobs/{id} through the front door
        assert job["request"]["prompt"] == prompt and job["source_version"]["version_id"] == put["VersionId"]


def test_a_version_deleted_before_it_is_read_fails_its_job_with_the_reason(stack: LocalStack) -> None:
    s3 = aws_client(stack, "s3")
    bucket = stack.outputs["OMNIREEL_INBOX_BUCKET_NAME"]
    key = "prompts/vanishing/x.txt"
    events = JobEvents(stack)
    try:
        with held_s3_events(stack, "prompts/vanishing/"):
            gone = s3.put_object(Bucket=bucket, Key=key, Body=b"the deleted prompt")["VersionId"]
            kept = s3.put_object(Bucket=bucket, Key=key, Body=b"the kept prompt")["VersionId"]
            s3.delete_object(Bucket=bucket, Key=key, VersionId=gone)
        kept_job = job_of_version(s3, bucket, key, kept)

        def of(version: str, got: list[dict]) -> list[dict]:
            return [e for e in got if (e.get("source_version") or {}).get("version_id") == version]

        received = events.until(lambda got: of(gone, got) and of(kept, got), timeout=JOB_TIMEOUT_S)
    finally:
        events.close()
    [failed] = of(gone, received)
    assert failed["event_type"] == "job.failed" and failed["prompt"] is None
    assert failed["source"] == f"s3://{bucket}/{key}"
    assert failed["error"]["stage"] == "accept" and failed["error"]["code"] == "SourceVersionGone"
    assert f"version {gone} of the file no longer exists" in failed["error"]["message"]
    assert _job(stack, failed["job_id"])["status"] == "failed"
    [succeeded] = of(kept, received)
    assert succeeded["job_id"] == kept_job and succeeded["event_type"] == "job.succeeded"
    assert succeeded["prompt"] == "the kept prompt"


def test_drop_wait_follows_its_own_upload_when_the_key_is_overwritten(stack: LocalStack, tmp_path: Path) -> None:
    s3 = aws_client(stack, "s3")
    bucket = stack.outputs["OMNIREEL_INBOX_BUCKET_NAME"]
    key = "prompts/cli-overwrite/x.txt"
    mine = tmp_path / "mine.txt"
    mine.write_text("my own prompt")
    with held_s3_events(stack, "prompts/cli-overwrite/"):
        dropping = subprocess.Popen(
            [*cli_command(), "drop", str(mine), "--key", key, "--wait", "--json", "--timeout", str(JOB_TIMEOUT_S)],
            env=stack.env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        try:
            # someone else overwrites the key once the CLI's upload is in (its version is the first one)
            deadline = time.monotonic() + 30
            while not s3.list_object_versions(Bucket=bucket, Prefix=key).get("Versions"):
                assert time.monotonic() < deadline and dropping.poll() is None, "the CLI did not upload"
                time.sleep(0.1)
            s3.put_object(Bucket=bucket, Key=key, Body=b"somebody else's prompt")
        except BaseException:
            stop_process(dropping)
            raise
    try:
        out, err = dropping.communicate(timeout=JOB_TIMEOUT_S + 30)
    finally:
        stop_process(dropping)
    assert dropping.returncode == 0, err
    job = json.loads(out)
    assert job["request"]["prompt"] == "my own prompt", "drop --wait must report the job of its own upload"
    assert f"(version {job['source_version']['version_id']})" in err


# Scratch buckets: the developer identity may create and manage buckets named <stack>-scratch-* (iam/identities.py).
VERSIONED = f"{homedir.STACK_NAME}-scratch-versioned"
UNVERSIONED = f"{homedir.STACK_NAME}-scratch-unversioned"


def _notified(sqs, queue_url: str, timeout: float = 30) -> dict:  # type: ignore[no-untyped-def]
    """The next ObjectCreated record S3 sent to this queue (bounded wait)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for message in sqs.receive_message(QueueUrl=queue_url, WaitTimeSeconds=1).get("Messages", []):
            sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=message["ReceiptHandle"])
            records = json.loads(message["Body"]).get("Records") or []
            if records:
                return records[0]["s3"]["object"]
    raise AssertionError(f"no S3 notification within {timeout:.0f} s")


def test_the_local_stack_answers_versioned_s3_requests_as_aws_does(stack: LocalStack) -> None:
    s3, sqs = aws_client(stack, "s3"), aws_client(stack, "sqs")
    queue = sqs.create_queue(QueueName="omnireel-e2e-s3-notifications")["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    for bucket, versioned in ((VERSIONED, True), (UNVERSIONED, False)):
        s3.create_bucket(Bucket=bucket)
        if versioned:
            s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
        s3.put_bucket_notification_configuration(
            Bucket=bucket,
            NotificationConfiguration={"QueueConfigurations": [{"QueueArn": arn, "Events": ["s3:ObjectCreated:*"]}]},
        )
        put = s3.put_object(Bucket=bucket, Key="k.txt", Body=b"first")
        notified = _notified(sqs, queue)
        # The event names the upload as AWS does: versionId only for a versioning-enabled bucket, eTag unquoted.
        assert notified["eTag"] == put["ETag"].strip('"') and notified["size"] == 5 and notified["sequencer"]
        assert notified.get("versionId") == (put["VersionId"] if versioned else None), notified
    first = s3.put_object(Bucket=VERSIONED, Key="x.txt", Body=b"a")
    s3.put_object(Bucket=VERSIONED, Key="x.txt", Body=b"b")
    assert s3.get_object(Bucket=VERSIONED, Key="x.txt", VersionId=first["VersionId"])["Body"].read() == b"a"
    s3.delete_object(Bucket=VERSIONED, Key="x.txt", VersionId=first["VersionId"])
    cases = [
        ({"Bucket": VERSIONED, "VersionId": first["VersionId"]}, 404, "NoSuchVersion"),  # a deleted version
        ({"Bucket": VERSIONED, "VersionId": "not a version id"}, 400, "InvalidArgument"),  # malformed
        ({"Bucket": UNVERSIONED, "IfMatch": first["ETag"]}, 412, "PreconditionFailed"),  # another upload's ETag
    ]
    for arguments, status, code in cases:
        with pytest.raises(ClientError) as raised:
            s3.get_object(Key="x.txt" if "VersionId" in arguments else "k.txt", **arguments)
        error = raised.value.response
        assert (error["ResponseMetadata"]["HTTPStatusCode"], error["Error"]["Code"]) == (status, code), arguments
    sqs.delete_queue(QueueUrl=queue)
