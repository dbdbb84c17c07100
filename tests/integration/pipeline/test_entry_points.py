"""The api and inbox handlers against moto: what an app developer sees at the front door."""

import json

import pytest

from tests.integration.pipeline.harness import Context


def test_submit_returns_202_with_status_url_and_starts_one_named_execution(pipeline):
    response = pipeline.api("POST", "/jobs", {"prompt": "a fox"})
    assert response["statusCode"] == 202
    job_id = response["json"]["job_id"]
    assert response["json"] == {"job_id": job_id, "status": "accepted", "status_url": f"/jobs/{job_id}"}
    assert response["headers"]["Location"] == f"/jobs/{job_id}"
    (execution,) = pipeline.executions()
    assert execution["executionArn"] == pipeline.execution_arn(job_id)
    assert execution["name"].startswith(f"{job_id}-") and len(execution["name"]) <= 80


@pytest.mark.parametrize(
    ("body", "status", "code", "fragment"),
    [
        ("{not json", 400, "InvalidRequest", "not valid JSON"),
        ("", 400, "InvalidRequest", "body is empty"),
        (json.dumps({"prompt": 42}), 400, "InvalidRequest", "prompt"),
        (json.dumps({"prompt": "p", "frames": 17}), 400, "InvalidRequest", "frames: unknown field"),
        (json.dumps({"prompt": "x" * 2001}), 400, "InvalidRequest", "2000"),
    ],
)
def test_bad_requests_get_a_clear_error_and_start_nothing(pipeline, body, status, code, fragment):
    response = pipeline.api("POST", "/jobs", body)
    assert response["statusCode"] == status
    assert response["json"]["error"]["code"] == code and fragment in response["json"]["error"]["message"]
    assert pipeline.executions() == []


def test_a_400_lists_every_problem_as_data(pipeline):
    """Issue 28: a client shows every problem without parsing the message (which lists them too)."""
    body = {"prompt": "", "seed": "x", "video": {"num_frames": 16, "width": 100}, "frames": 1}
    error = pipeline.api("POST", "/jobs", body)["json"]["error"]
    fields = [problem["field"] for problem in error["problems"]]
    assert sorted(fields) == ["frames", "prompt", "seed", "video.num_frames", "video.width"]
    assert all(f"{p['field']}: {p['message']}" in error["message"] for p in error["problems"])
    assert pipeline.executions() == []


def test_bad_idempotency_key(pipeline):
    response = pipeline.api("POST", "/jobs", {"prompt": "p"}, {"Idempotency-Key": "has spaces"})
    assert response["statusCode"] == 400 and response["json"]["error"]["code"] == "InvalidIdempotencyKey"


@pytest.mark.parametrize("path", ["/jobs/not-a-uuid", "/jobs/00000000-0000-4000-8000-000000000000"])
def test_unknown_job_is_404(pipeline, path):
    response = pipeline.api("GET", path)
    assert response["statusCode"] == 404 and response["json"]["error"]["code"] == "JobNotFound"


def test_unknown_route_is_404(pipeline):
    assert pipeline.api("GET", "/nothing")["statusCode"] == 404


def test_get_reports_status_timings_and_request(pipeline):
    job_id = pipeline.api("POST", "/jobs", {"prompt": "p", "seed": 3})["json"]["job_id"]
    job = pipeline.job(job_id)
    assert job["job_id"] == job_id and job["request"]["seed"] == 3 and job["source"] == "api"
    assert "accepted" in job["stage_times"] and set(job["timings"]) == {
        "image_s",
        "staging_s",
        "video_queue_and_render_s",
        "total_s",
    }


@pytest.mark.parametrize(
    ("key", "body", "fragment"),
    [
        ("prompts/empty.txt", b"", "empty"),
        ("prompts/blank.txt", b"   \n", "empty"),
        ("prompts/binary.txt", b"\xff\xfe\x00\x01", "not UTF-8"),
        ("prompts/picture.png", b"\x89PNG....", "unsupported file type"),
        ("prompts/bad.json", b'{"prompt": ', "not valid JSON"),
        ("prompts/schema.json", b'{"prompt": "p", "video": {"num_frames": 2}}', "video.num_frames"),
        ("prompts/huge.txt", b"a" * 70_000, "larger than"),
    ],
)
def test_an_unreadable_drop_becomes_one_job_failed_event(pipeline, key, body, fragment):
    event = pipeline.s3_event(key, body)
    result = pipeline.handlers["inbox"].handler(event, Context("inbox"))["results"][0]
    assert result["status"] == "rejected" and fragment in result["reason"]
    pipeline.handlers["inbox"].handler(event, Context("inbox"))  # a duplicate delivery
    events = pipeline.consumer_events()
    assert len(events) == 1
    event_body = events[0]
    assert event_body["event_type"] == "job.failed" and event_body["job_id"] == result["job_id"]
    assert event_body["source"] == f"s3://{pipeline.inbox_bucket}/{key}"
    assert event_body["error"]["stage"] == "accept" and fragment in event_body["error"]["message"]
    assert event_body["prompt"] is None
    assert pipeline.executions() == []
    assert pipeline.job(result["job_id"])["status"] == "failed"
    tags = pipeline.s3.get_object_tagging(Bucket=pipeline.inbox_bucket, Key=key)["TagSet"]
    assert {"Key": "omnireel-status", "Value": "rejected"} in tags


def test_json_drop_with_a_full_request(pipeline):
    body = json.dumps({"prompt": "a kite", "seed": 9, "video": {"num_frames": 9}}).encode()
    result = pipeline.handlers["inbox"].handler(pipeline.s3_event("prompts/kite.json", body), Context("inbox"))
    job_id = result["results"][0]["job_id"]
    job = pipeline.job(job_id)
    assert job["request"]["video"]["num_frames"] == 9 and job["source"].endswith("prompts/kite.json")


def test_url_encoded_keys_are_decoded(pipeline):
    pipeline.s3.put_object(Bucket=pipeline.inbox_bucket, Key="prompts/my boat.txt", Body=b"a boat")
    event = pipeline.s3_event("prompts/my boat.txt", b"a boat")
    event["Records"][0]["s3"]["object"]["key"] = "prompts/my+boat.txt"
    result = pipeline.handlers["inbox"].handler(event, Context("inbox"))["results"][0]
    assert result["status"] == "accepted" and result["key"] == "prompts/my boat.txt"


def test_a_new_upload_of_the_same_key_is_a_new_job(pipeline):
    first = pipeline.handlers["inbox"].handler(pipeline.s3_event("prompts/a.txt", b"one", "01"), Context("inbox"))
    second = pipeline.handlers["inbox"].handler(pipeline.s3_event("prompts/a.txt", b"two", "02"), Context("inbox"))
    assert first["results"][0]["job_id"] != second["results"][0]["job_id"]
    assert len(pipeline.executions()) == 2


def test_an_overwrite_before_the_read_runs_each_upload_with_its_own_prompt(pipeline):
    first = pipeline.s3_event("prompts/x.txt", b"a", "01")
    second = pipeline.s3_event("prompts/x.txt", b"b", "02")  # lands before the first event is handled
    results = [pipeline.handlers["inbox"].handler(e, Context("inbox"))["results"][0] for e in (first, second)]
    assert [r["status"] for r in results] == ["accepted", "accepted"]
    jobs = [pipeline.job(r["job_id"]) for r in results]
    assert [j["request"]["prompt"] for j in jobs] == ["a", "b"]
    versions = [e["Records"][0]["s3"]["object"]["versionId"] for e in (first, second)]
    assert [j["source_version"]["version_id"] for j in jobs] == versions
    for result, version in zip(results, versions, strict=True):
        tags = pipeline.s3.get_object_tagging(Bucket=pipeline.inbox_bucket, Key="prompts/x.txt", VersionId=version)
        assert {"Key": "omnireel-job-id", "Value": result["job_id"]} in tags["TagSet"]


def test_a_version_deleted_before_the_read_is_a_job_failed_with_the_reason(pipeline):
    gone = pipeline.s3_event("prompts/x.txt", b"a", "01")
    pipeline.s3_event("prompts/x.txt", b"b", "02")
    version = gone["Records"][0]["s3"]["object"]["versionId"]
    pipeline.s3.delete_object(Bucket=pipeline.inbox_bucket, Key="prompts/x.txt", VersionId=version)
    result = pipeline.handlers["inbox"].handler(gone, Context("inbox"))["results"][0]
    assert result["status"] == "rejected" and f"version {version} of the file no longer exists" in result["reason"]
    [event] = pipeline.consumer_events()
    assert event["event_type"] == "job.failed" and event["job_id"] == result["job_id"]
    assert event["error"] == {"stage": "accept", "code": "SourceVersionGone", "message": result["reason"]}
    assert event["source_version"]["version_id"] == version and event["prompt"] is None
    assert pipeline.executions() == []
    current = pipeline.s3.get_object_tagging(Bucket=pipeline.inbox_bucket, Key="prompts/x.txt")["TagSet"]
    assert current == [], "the newer upload is not this job's: it must not carry this job's tags"


def test_an_unversioned_bucket_reads_the_upload_by_its_etag(pipeline):
    bucket = f"plain-{pipeline.suffix}"
    pipeline.s3.create_bucket(Bucket=bucket)
    first = pipeline.s3_event("prompts/x.txt", b"a", "01", bucket=bucket)
    second = pipeline.s3_event("prompts/x.txt", b"b", "02", bucket=bucket)  # overwrites in place
    assert "versionId" not in first["Records"][0]["s3"]["object"]
    overwritten = pipeline.handlers["inbox"].handler(first, Context("inbox"))["results"][0]
    assert overwritten["status"] == "rejected" and "overwritten before it could be read" in overwritten["reason"]
    newer = pipeline.handlers["inbox"].handler(second, Context("inbox"))["results"][0]
    assert newer["status"] == "accepted" and pipeline.job(newer["job_id"])["request"]["prompt"] == "b"
    assert pipeline.job(newer["job_id"])["source_version"] == {
        "version_id": None,
        "etag": second["Records"][0]["s3"]["object"]["eTag"],
    }
    again = pipeline.handlers["inbox"].handler(second, Context("inbox"))["results"][0]
    assert again == {**newer, "status": "duplicate"}, "the same event delivered twice is one job"


def test_a_job_is_visible_to_its_submitter_only(pipeline):
    job_id = pipeline.api("POST", "/jobs", {"prompt": "p"}, caller="alice")["json"]["job_id"]
    assert pipeline.api("GET", f"/jobs/{job_id}", caller="alice")["statusCode"] == 200
    other = pipeline.api("GET", f"/jobs/{job_id}", caller="mallory")
    assert other["statusCode"] == 404 and other["json"]["error"]["code"] == "JobNotFound"


def test_the_same_idempotency_key_from_two_callers_makes_two_jobs(pipeline):
    first = pipeline.api("POST", "/jobs", {"prompt": "p"}, {"Idempotency-Key": "k"}, caller="alice")
    second = pipeline.api("POST", "/jobs", {"prompt": "p"}, {"Idempotency-Key": "k"}, caller="bob")
    assert first["json"]["job_id"] != second["json"]["job_id"]
    assert second["headers"]["Idempotent-Replayed"] == "false"


def test_dropped_files_have_no_owner_and_are_visible_to_callers(pipeline):
    result = pipeline.handlers["inbox"].handler(pipeline.s3_event("prompts/x.txt", b"a kite"), Context("inbox"))
    job_id = result["results"][0]["job_id"]
    assert pipeline.api("GET", f"/jobs/{job_id}", caller="anyone")["statusCode"] == 200
