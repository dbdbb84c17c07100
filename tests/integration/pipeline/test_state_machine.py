"""The real ASL, run by moto's executing Step Functions, with the real handlers in-process."""

import json

import pytest

from omnireel.core.errors import EndpointRejected
from omnireel.jobs import staging
from tests.integration.pipeline.harness import Context, tiny_mp4

PROMPT = {"prompt": "a paper boat on a rainy street", "seed": 7}


def submit(pipeline, body=PROMPT, key=None):
    headers = {"Idempotency-Key": key} if key else {}
    response = pipeline.api("POST", "/jobs", body, headers)
    assert response["statusCode"] == 202, response
    return response["json"]["job_id"]


def test_happy_path_prompt_to_mp4_and_one_event(pipeline):
    job_id = submit(pipeline)
    call = pipeline.wait_rendering(job_id)
    assert call["inference_id"] == job_id
    assert call["input_location"] == f"s3://{pipeline.artifacts_bucket}/jobs/{job_id}/video-request.multipart"
    assert call["content_type"].startswith("multipart/form-data; boundary=")

    pipeline.write_output(job_id, tiny_mp4())
    pipeline.publish_notification(job_id, "Completed")
    assert pipeline.execution(job_id)["status"] == "SUCCEEDED"

    job = pipeline.job(job_id)
    assert job["status"] == "succeeded"
    assert set(job["artifacts"]) == {"image", "video_request", "video"}
    assert job["artifacts"]["video"]["s3_uri"] == f"s3://{pipeline.artifacts_bucket}/jobs/{job_id}/video.mp4"
    assert job["artifacts"]["video"]["url"].startswith("https://")
    video = pipeline.s3.get_object(Bucket=pipeline.artifacts_bucket, Key=f"jobs/{job_id}/video.mp4")
    assert video["ContentType"] == "video/mp4" and video["Body"].read()[4:8] == b"ftyp"
    assert all(job["timings"][k] is not None for k in ("image_s", "staging_s", "video_queue_and_render_s", "total_s"))

    events = pipeline.consumer_events()
    assert [e["event_type"] for e in events] == ["job.succeeded"]
    event = events[0]
    assert event["job_id"] == job_id and event["prompt"] == PROMPT["prompt"] and event["version"] == 1
    assert event["_attributes"] == {"event_type": "job.succeeded", "status": "succeeded", "version": "1"}
    assert event["artifacts"]["video"]["expires_at"] and event["error"] is None
    # The image call carried the request's parameters.
    assert pipeline.image_endpoint.calls[0] | {"prompt": None} == {
        "prompt": None,
        "size": "1024x1024",
        "num_inference_steps": 4,
        "guidance_scale": 5.0,
        "response_format": "b64_json",
        "output_format": "png",
        "model": "black-forest-labs/FLUX.2-klein-4B",
        "seed": 7,
    }


def test_job_image_ready_is_published_once_as_soon_as_the_image_is_stored(pipeline):
    """Before the video is rendered, a consumer has the still: S3 URI and a presigned URL, event_type attribute."""
    job_id = submit(pipeline)
    pipeline.wait_rendering(job_id)
    [ready] = pipeline.consumer_events(progress=True)  # the video is not rendered yet: no terminal event
    assert ready["event_type"] == "job.image_ready" and ready["job_id"] == job_id
    assert ready["_attributes"] == {"event_type": "job.image_ready", "status": "generating_image", "version": "1"}
    assert ready["artifacts"]["image"]["s3_uri"] == f"s3://{pipeline.artifacts_bucket}/jobs/{job_id}/image.png"
    assert ready["artifacts"]["image"]["url"].startswith("https://") and ready["status"] == "generating_image"
    pipeline.write_output(job_id, tiny_mp4())
    pipeline.publish_notification(job_id, "Completed")
    events = pipeline.consumer_events(progress=True)
    assert [e["event_type"] for e in events] == ["job.succeeded"], "job.image_ready once, then the terminal event"


def test_image_endpoint_recovers_within_its_retries(pipeline):
    pipeline.image_endpoint.failures = 1
    job_id = submit(pipeline)
    pipeline.wait_rendering(job_id)
    assert len(pipeline.image_endpoint.calls) == 2
    assert "RetryableStepError" in pipeline.history_errors(job_id)


def test_image_endpoint_failing_past_its_retries_fails_the_job_once(pipeline):
    pipeline.image_endpoint.failures = 99
    job_id = submit(pipeline)
    assert pipeline.execution(job_id)["status"] == "FAILED"
    assert len(pipeline.image_endpoint.calls) == 3  # 1 + ImageMaxAttempts (2)
    job = pipeline.job(job_id)
    assert job["status"] == "failed"
    assert job["error"]["stage"] == "generate_image" and job["error"]["code"] == "EndpointUnavailable"
    assert "HTTP 503" in job["error"]["message"]
    events = pipeline.consumer_events()
    assert [e["event_type"] for e in events] == ["job.failed"]
    assert events[0]["error"] == job["error"]


def test_a_rejected_image_request_is_not_retried(pipeline):
    pipeline.image_endpoint.failures = 1
    pipeline.image_endpoint.error = EndpointRejected("endpoint image: model returned HTTP 400: bad size")
    job_id = submit(pipeline)
    assert pipeline.execution(job_id)["status"] == "FAILED"
    assert len(pipeline.image_endpoint.calls) == 1
    assert pipeline.job(job_id)["error"]["code"] == "EndpointRejected"


def test_a_crashing_step_is_retried(pipeline):
    pipeline.crash_next["generate_image"] = 1
    job_id = submit(pipeline)
    pipeline.wait_rendering(job_id)
    assert "RuntimeError" in pipeline.history_errors(job_id)


def test_the_video_request_is_staged_from_the_png_in_hand(pipeline, monkeypatch):
    """GenerateImage stages the request from the bytes it just generated: the PNG is never read back from S3."""
    from omnireel.aws.artifact_store import ArtifactStore

    reads = []
    original = ArtifactStore.read
    monkeypatch.setattr(
        ArtifactStore, "read", lambda self, uri, *a, **k: reads.append(str(uri)) or original(self, uri, *a, **k)
    )
    job_id = submit(pipeline)
    call = pipeline.wait_rendering(job_id)
    assert not [uri for uri in reads if uri.endswith("/image.png")], reads
    job = pipeline.job(job_id)
    assert job["status"] == "rendering_video" and set(job["artifacts"]) == {"image", "video_request"}
    assert job["timings"]["staging_s"] is not None  # staging_video is still a recorded stage
    staged = pipeline.s3.get_object(Bucket=pipeline.artifacts_bucket, Key=f"jobs/{job_id}/video-request.multipart")
    # (in-process moto stores a multipart/form-data PUT without its body; tests/e2e reads the staged bytes)
    assert staged["ContentType"] == call["content_type"]
    image = pipeline.s3.get_object(Bucket=pipeline.artifacts_bucket, Key=f"jobs/{job_id}/image.png")
    assert image["ContentType"] == "image/png" and image["Body"].read().startswith(b"\x89PNG")  # kept for consumers
    names = [name for name, _ in pipeline.invocations]
    assert names.count("generate_image") == names.count("invoke_video") == 1 and "stage_video_request" not in names


def test_a_staging_crash_after_the_image_is_stored_reuses_the_image(pipeline, monkeypatch):
    """The retry finds the job staging with image.png stored: it reads the image back, never calls the model twice."""
    import omnireel.jobs.staging

    original = omnireel.jobs.staging.prepare_video_reference
    crashes = []

    def crash_once(*args, **kwargs):
        if not crashes:
            crashes.append(1)
            raise RuntimeError("injected crash while staging")
        return original(*args, **kwargs)

    monkeypatch.setattr(omnireel.jobs.staging, "prepare_video_reference", crash_once)
    job_id = submit(pipeline)
    call = pipeline.wait_rendering(job_id)
    assert crashes and "RuntimeError" in pipeline.history_errors(job_id)
    assert len(pipeline.image_endpoint.calls) == 1
    assert call["input_location"].endswith(f"jobs/{job_id}/video-request.multipart")
    assert pipeline.job(job_id)["status"] == "rendering_video"


def test_video_failure_via_the_error_topic(pipeline):
    job_id = submit(pipeline)
    pipeline.wait_rendering(job_id)
    pipeline.write_failure(job_id, "CUDA out of memory while decoding frame 12")
    pipeline.publish_notification(job_id, "Failed", failureReason="ClientError: Received server error (500)")
    assert pipeline.execution(job_id)["status"] == "FAILED"
    job = pipeline.job(job_id)
    assert job["error"]["stage"] == "render_video" and job["error"]["code"] == "VideoRenderFailed"
    assert "Received server error (500)" in job["error"]["message"]
    assert [e["event_type"] for e in pipeline.consumer_events()] == ["job.failed"]


def test_expired_request_is_a_failure(pipeline):
    job_id = submit(pipeline)
    pipeline.wait_rendering(job_id)
    pipeline.publish_notification(job_id, "Expired")
    assert pipeline.execution(job_id)["status"] == "FAILED"
    assert pipeline.job(job_id)["error"]["code"] == "VideoRequestExpired"


def test_output_that_is_not_an_mp4_fails_the_job(pipeline):
    job_id = submit(pipeline)
    pipeline.wait_rendering(job_id)
    pipeline.write_output(job_id, b'{"error": "not a video"}' * 100)
    pipeline.publish_notification(job_id, "Completed")
    assert pipeline.execution(job_id)["status"] == "FAILED"
    assert pipeline.job(job_id)["error"]["code"] == "MalformedModelOutput"


def test_duplicate_sns_delivery_is_harmless(pipeline):
    job_id = submit(pipeline)
    pipeline.wait_rendering(job_id)
    pipeline.write_output(job_id, tiny_mp4())
    pipeline.publish_notification(job_id, "Completed")
    pipeline.publish_notification(job_id, "Completed")
    assert pipeline.execution(job_id)["status"] == "SUCCEEDED"
    pipeline.publish_notification(job_id, "Completed")  # after the job ended, too
    assert [e["event_type"] for e in pipeline.consumer_events(expect=2, timeout=3)] == ["job.succeeded"]
    assert pipeline.job(job_id)["status"] == "succeeded"


@pytest.mark.parametrize("outcome", ["output", "failure"])
def test_callback_timeout_is_reconciled_from_s3(make_pipeline, outcome):
    # The heartbeat (2 s of silence after the render is queued) ends the wait; the state's timeout covers the image too.
    pipeline = make_pipeline(VideoCallbackTimeoutSeconds="8", VideoHeartbeatSeconds="2")
    job_id = submit(pipeline)
    pipeline.wait_rendering(job_id)
    # The SNS notification is lost: only S3 knows what happened.
    if outcome == "output":
        pipeline.write_output(job_id, tiny_mp4())
    else:
        pipeline.write_failure(job_id, "model crashed: invalid reference image")
    result = pipeline.execution(job_id)
    errors = pipeline.history_errors(job_id)
    assert any(e.startswith("States.") and "Timeout" in e for e in errors), errors
    job = pipeline.job(job_id)
    if outcome == "output":
        assert result["status"] == "SUCCEEDED" and job["status"] == "succeeded"
        assert [e["event_type"] for e in pipeline.consumer_events()] == ["job.succeeded"]
    else:
        assert result["status"] == "FAILED" and job["error"]["code"] == "VideoRenderFailed"
        assert "invalid reference image" in job["error"]["message"]


def test_callback_timeout_with_nothing_in_s3_fails_clearly(make_pipeline):
    pipeline = make_pipeline(VideoCallbackTimeoutSeconds="8", VideoHeartbeatSeconds="2")
    job_id = submit(pipeline)
    assert pipeline.execution(job_id)["status"] == "FAILED"
    job = pipeline.job(job_id)
    assert job["error"]["code"] == "VideoTimedOut" and job["error"]["stage"] == "render_video"


def test_duplicate_idempotency_key_returns_the_same_job(pipeline):
    first = pipeline.api("POST", "/jobs", PROMPT, {"Idempotency-Key": "order-42"})
    second = pipeline.api("POST", "/jobs", PROMPT, {"Idempotency-Key": "order-42"})
    assert first["statusCode"] == second["statusCode"] == 202
    assert first["json"]["job_id"] == second["json"]["job_id"]
    assert first["headers"]["Idempotent-Replayed"] == "false" and second["headers"]["Idempotent-Replayed"] == "true"
    assert len(pipeline.executions()) == 1
    other = pipeline.api("POST", "/jobs", {"prompt": "something else"}, {"Idempotency-Key": "order-42"})
    assert other["statusCode"] == 409 and other["json"]["error"]["code"] == "IdempotencyKeyReused"
    assert len(pipeline.executions()) == 1


def test_duplicate_s3_event_starts_one_execution(pipeline):
    event = pipeline.s3_event("prompts/boat.txt", b"a paper boat on a rainy street\n")
    first = pipeline.handlers["inbox"].handler(event, Context("inbox"))
    second = pipeline.handlers["inbox"].handler(event, Context("inbox"))
    assert first["results"][0]["status"] == "accepted" and second["results"][0]["status"] == "duplicate"
    assert first["results"][0]["job_id"] == second["results"][0]["job_id"]
    assert len(pipeline.executions()) == 1
    tags = pipeline.s3.get_object_tagging(Bucket=pipeline.inbox_bucket, Key="prompts/boat.txt")["TagSet"]
    assert {"Key": "omnireel-status", "Value": "accepted"} in tags


def workflow_ended_event(pipeline, job_id, status):
    return {
        "version": "0",
        "id": "e1",
        "detail-type": "Step Functions Execution Status Change",
        "source": "aws.states",
        "account": "123456789012",
        "time": "2026-11-29T12:05:00Z",
        "region": "us-east-1",
        "resources": [],
        "detail": {
            "name": pipeline.execution_arn(job_id).rsplit(":", 1)[1],
            "status": status,
            "stateMachineArn": pipeline.state_machine,
            "cause": None,
        },
    }


def test_an_aborted_execution_still_gets_exactly_one_terminal_event(pipeline):
    job_id = submit(pipeline)
    pipeline.wait_rendering(job_id)
    pipeline.stop_executions()  # an operator aborts the execution while it waits for the video
    ended = pipeline.handlers["workflow_ended"].handler(workflow_ended_event(pipeline, job_id, "ABORTED"), Context("w"))
    again = pipeline.handlers["workflow_ended"].handler(workflow_ended_event(pipeline, job_id, "ABORTED"), Context("w"))
    assert ended["published"] is True and again["published"] is False
    job = pipeline.job(job_id)
    assert job["status"] == "failed" and job["error"]["code"] == "WorkflowAborted"
    assert job["error"]["stage"] == "render_video"
    assert [e["event_type"] for e in pipeline.consumer_events()] == ["job.failed"]


def test_the_safety_net_adds_nothing_after_a_normal_failure(pipeline):
    pipeline.image_endpoint.failures = 99
    job_id = submit(pipeline)
    assert pipeline.execution(job_id)["status"] == "FAILED"
    result = pipeline.handlers["workflow_ended"].handler(workflow_ended_event(pipeline, job_id, "FAILED"), Context("w"))
    assert result["published"] is False
    assert [e["event_type"] for e in pipeline.consumer_events()] == ["job.failed"]


def test_a_crash_after_the_render_is_queued_is_retried_and_never_renders_twice(pipeline, monkeypatch):
    """InvokeVideo crashes after InvokeEndpointAsync (here: at its heartbeat): the retry finds the job rendering with
    its request queued, stores the new task token, and the render's notification answers it."""
    module = pipeline.handlers["invoke_video"]
    original, crashes = module.callbacks.heartbeat, []

    def crash_once(*args, **kwargs):
        if not crashes:
            crashes.append(1)
            raise RuntimeError("injected crash after the render was queued")
        return original(*args, **kwargs)

    monkeypatch.setattr(module.callbacks, "heartbeat", crash_once)
    job_id = submit(pipeline)
    pipeline.wait_rendering(job_id)
    pipeline.wait(lambda: [n for n, _ in pipeline.invocations].count("invoke_video") == 2, what="the retry")
    pipeline.wait(lambda: pipeline.job(job_id)["status"] == "rendering_video" and len(crashes) == 1, what="retry")
    pipeline.wait(lambda: pipeline.consumer_events(progress=True, expect=1, timeout=1), what="job.image_ready")
    pipeline.write_output(job_id, tiny_mp4())
    pipeline.publish_notification(job_id, "Completed")
    assert pipeline.execution(job_id)["status"] == "SUCCEEDED"
    assert "RuntimeError" in pipeline.history_errors(job_id)
    assert len([c for c in pipeline.video_endpoint.calls if c["inference_id"] == job_id]) == 1
    assert len(pipeline.image_endpoint.calls) == 1
    assert [n for n, _ in pipeline.invocations].count("generate_image") == 1  # the image state is not re-run
    assert [e["event_type"] for e in pipeline.consumer_events()] == ["job.succeeded"]


def test_a_crash_after_the_image_state_staged_is_retried_without_a_second_model_call(pipeline, monkeypatch):
    """GenerateImage crashes after storing the image and staging the request (here: publishing job.image_ready): its
    own retrier runs it again, which reuses the stored image, and InvokeVideo then queues the render exactly once."""
    original, crashes = staging.publish_image_ready, []

    def crash_once(*args, **kwargs):
        if not crashes:
            crashes.append(1)
            raise RuntimeError("injected crash after staging")
        return original(*args, **kwargs)

    monkeypatch.setattr(staging, "publish_image_ready", crash_once)
    job_id = submit(pipeline)
    pipeline.wait_rendering(job_id)
    pipeline.write_output(job_id, tiny_mp4())
    pipeline.publish_notification(job_id, "Completed")
    assert pipeline.execution(job_id)["status"] == "SUCCEEDED"
    names = [n for n, _ in pipeline.invocations]
    assert names.count("generate_image") == 2 and names.count("invoke_video") == 1
    assert len(pipeline.image_endpoint.calls) == 1
    assert len([c for c in pipeline.video_endpoint.calls if c["inference_id"] == job_id]) == 1
    assert "RuntimeError" in pipeline.history_errors(job_id)
    assert _entered(pipeline, job_id) == [
        "GenerateImage",
        "ImageAdmitted",
        "InvokeVideo",
        "EventPublished",
        "JobSucceeded",
    ]


def _history(pipeline, job_id) -> list[dict]:
    return pipeline.sfn.get_execution_history(executionArn=pipeline.execution_arn(job_id), maxResults=1000)["events"]


def _entered(pipeline, job_id) -> list[str]:
    history = _history(pipeline, job_id)
    return [e["stateEnteredEventDetails"]["name"] for e in history if "stateEnteredEventDetails" in e]


def test_the_image_time_counts_against_neither_the_callback_timeout_nor_its_heartbeat(make_pipeline):
    """Issue 26: an image call slower than the callback's heartbeat (a cold image endpoint) is GenerateImage's time,
    bounded by its own TimeoutSeconds; InvokeVideo's timeout and heartbeat start with the render's state and the job
    succeeds."""
    pipeline = make_pipeline(VideoCallbackTimeoutSeconds="4", VideoHeartbeatSeconds="3")
    pipeline.image_endpoint.latency_s = 5.0  # longer than the callback's whole TimeoutSeconds
    job_id = submit(pipeline)
    pipeline.wait_rendering(job_id)
    pipeline.write_output(job_id, tiny_mp4())
    pipeline.publish_notification(job_id, "Completed")
    assert pipeline.execution(job_id)["status"] == "SUCCEEDED", pipeline.history_errors(job_id)
    assert not [e for e in pipeline.history_errors(job_id) if "Timeout" in e]
    assert [e["event_type"] for e in pipeline.consumer_events()] == ["job.succeeded"]


def test_a_success_shows_each_stage_and_the_event_leaves_before_the_task_is_answered(pipeline, monkeypatch):
    """Issue 26: one state per stage (GenerateImage, then InvokeVideo waiting on the render), so the history shows
    which stage ran and how long; AsyncResult publishes job.succeeded before SendTaskSuccess (no PublishSucceeded)."""
    module = pipeline.handlers["async_result"]
    order = []
    publish, succeed = module.publisher.publish, module.callbacks.succeed
    monkeypatch.setattr(module.publisher, "publish", lambda event: order.append(event.event_type) or publish(event))
    monkeypatch.setattr(module.callbacks, "succeed", lambda *a, **k: order.append("answer") or succeed(*a, **k))
    job_id = submit(pipeline)
    pipeline.wait_rendering(job_id)
    pipeline.write_output(job_id, tiny_mp4())
    pipeline.publish_notification(job_id, "Completed")
    assert pipeline.execution(job_id)["status"] == "SUCCEEDED"
    assert [name for name, _ in pipeline.invocations] == ["generate_image", "invoke_video", "async_result"]
    assert order == ["job.succeeded", "answer"]  # job.image_ready left with GenerateImage, before the render
    assert [e["event_type"] for e in pipeline.consumer_events()] == ["job.succeeded"]
    assert _entered(pipeline, job_id) == [
        "GenerateImage",
        "ImageAdmitted",
        "InvokeVideo",
        "EventPublished",
        "JobSucceeded",
    ]
    # Each task state's start and end are in the history (its duration); GenerateImage ends before InvokeVideo starts.
    history = _history(pipeline, job_id)
    bounds = {
        (e["type"], (e.get("stateEnteredEventDetails") or e.get("stateExitedEventDetails"))["name"]): e["id"]
        for e in history
        if e["type"] in ("TaskStateEntered", "TaskStateExited")
    }
    assert bounds[("TaskStateExited", "GenerateImage")] < bounds[("TaskStateEntered", "InvokeVideo")]
    assert bounds[("TaskStateEntered", "InvokeVideo")] < bounds[("TaskStateExited", "InvokeVideo")]


def test_a_crash_between_the_event_and_the_answer_is_answered_by_the_redelivery(pipeline, monkeypatch):
    """AsyncResult published job.succeeded but crashed before SendTaskSuccess: Lambda's retry (the same notification
    again) finds the job succeeded, publishes nothing more, and answers the task, so the execution ends at once."""
    module = pipeline.handlers["async_result"]
    original, crashes = module.callbacks.succeed, []

    def crash_once(*args, **kwargs):
        if not crashes:
            crashes.append(1)
            raise RuntimeError("injected crash before SendTaskSuccess")
        return original(*args, **kwargs)

    monkeypatch.setattr(module.callbacks, "succeed", crash_once)
    job_id = submit(pipeline)
    pipeline.wait_rendering(job_id)
    pipeline.write_output(job_id, tiny_mp4())
    message = json.dumps(pipeline.notification(job_id, "Completed"))
    notification = {"Records": [{"EventSource": "aws:sns", "Sns": {"Message": message}}]}
    with pytest.raises(RuntimeError):
        module.handler(notification, Context("async_result"))
    assert pipeline.job(job_id)["status"] == "succeeded"
    assert pipeline.handlers["async_result"].handler(notification, Context("async_result"))["results"] == [
        {"job_id": job_id, "outcome": "succeeded"}
    ]
    assert pipeline.execution(job_id)["status"] == "SUCCEEDED"
    assert [e["event_type"] for e in pipeline.consumer_events(expect=2, timeout=3)] == ["job.succeeded"]


def test_a_render_done_before_job_image_ready_gets_it_published_first(pipeline, monkeypatch):
    """GenerateImage publishes job.image_ready before the render is queued; a render that is done before it was
    published (here: the step never gets to it, e.g. a lost write) has AsyncResult publish it before the terminal
    event, exactly once."""
    monkeypatch.setattr(staging, "publish_image_ready", lambda *a, **k: None)
    job_id = submit(pipeline)
    pipeline.wait_rendering(job_id)
    pipeline.write_output(job_id, tiny_mp4())
    pipeline.publish_notification(job_id, "Completed")
    assert pipeline.execution(job_id)["status"] == "SUCCEEDED"
    events = pipeline.consumer_events(expect=2, progress=True)
    assert [e["event_type"] for e in events] == ["job.image_ready", "job.succeeded"]
    assert events[0]["status"] == "generating_image" and events[0]["job_id"] == job_id


def test_a_job_cancelled_during_generate_image_stops_before_invoke_video(pipeline):
    """DELETE /jobs/{id} stops the execution whichever state it is in: here GenerateImage (a slow image call), so
    InvokeVideo never starts and nothing is rendered; the job has one terminal event, job.cancelled."""
    pipeline.image_endpoint.latency_s = 2.0
    job_id = submit(pipeline)
    pipeline.wait(lambda: pipeline.image_endpoint.calls, what="the image call")
    answer = pipeline.api("DELETE", f"/jobs/{job_id}")
    assert answer["statusCode"] == 200, answer
    assert answer["json"]["cancelled_at_stage"] == "generate_image"
    assert pipeline.execution(job_id)["status"] == "ABORTED"
    assert "InvokeVideo" not in _entered(pipeline, job_id) and _entered(pipeline, job_id)[0] == "GenerateImage"
    pipeline.wait(lambda: "generate_image" in [n for n, _ in pipeline.invocations], what="the image step")
    assert not pipeline.video_endpoint.calls
    assert pipeline.job(job_id)["status"] == "cancelled"
    assert [e["event_type"] for e in pipeline.consumer_events()] == ["job.cancelled"]
