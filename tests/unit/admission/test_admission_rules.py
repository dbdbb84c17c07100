"""Issue 34: admission's pure rules - capacity per endpoint kind and who is served next."""

from __future__ import annotations

from omnireel.admission.pool import Pool, caller_key, capacity_of, entry_key, next_callers


def test_capacity_is_instances_times_per_instance_and_an_async_endpoint_at_zero_keeps_one_instances_slots():
    assert capacity_of("image", 3, 2) == 6
    assert capacity_of("image", 0, 2) == 0  # a real-time endpoint without instances serves nothing
    assert capacity_of("video", 0, 2) == 2  # a bounded backlog reaches SageMaker's queue: it scales from zero
    assert capacity_of("video", 4, 1) == 4


def test_the_caller_served_least_recently_goes_first_and_a_caller_never_served_before_anyone():
    pool = Pool(
        kind="image",
        capacity=1,
        queued={"a": 300, "b": 1, "c": 0, "d": 2},
        served={"a": "2026-12-04T12:00:03.000Z", "d": "2026-12-04T12:00:01.000Z", "c": "2026-12-04T11:00:00.000Z"},
    )
    assert next_callers(pool) == ["b", "d", "a"]  # c has nothing waiting
    assert pool.callers_waiting() == ["a", "b", "d"]


def test_entry_keys_keep_a_callers_jobs_in_arrival_order_and_callers_apart():
    a = caller_key("AIDAEXAMPLE")
    assert a != caller_key("AIDAOTHER") and a == caller_key("AIDAEXAMPLE") and len(a) == 20 and "#" not in a
    assert caller_key(None) == caller_key("inbox")  # dropped files share one queue
    first = entry_key(a, "2026-12-04T12:00:00.000Z", "job-2")
    later = entry_key(a, "2026-12-04T12:00:01.000Z", "job-1")
    assert first < later and first.startswith(f"{a}#")


def test_the_job_deadline_does_not_count_time_spent_waiting_within_max_queue_seconds():
    """Issue 34 item 6: JobDeadlineSeconds counts from the first admission; a job never admitted, from the end of its
    queue limit (on main both counted from acceptance: an hour in the queue was an hour of the deadline)."""
    from datetime import timedelta

    from omnireel.core.clock import parse_time
    from omnireel.jobs.deadline import running_s
    from omnireel.jobs.job import Job, JobStatus
    from omnireel.jobs.request import parse_job_request

    accepted = "2026-12-04T10:00:00.000Z"
    admitted = "2026-12-04T10:50:00.000Z"  # 50 minutes in the queue
    waited = Job(
        job_id="0b6f1c1e-5a0e-4d55-9c3e-2f8f0f7d6a11",
        status=JobStatus.RENDERING_VIDEO,
        request=parse_job_request({"prompt": "p"}),
        source="api",
        created_at=accepted,
        updated_at=admitted,
        stage_times={"accepted": accepted, "queued": accepted, "generating_image": admitted},
    )
    at = parse_time(accepted) + timedelta(hours=1)
    assert running_s(waited, at) == 600  # ten minutes since its admission, not an hour since acceptance
    never = Job(
        job_id="0b6f1c1e-5a0e-4d55-9c3e-2f8f0f7d6a12",
        status=JobStatus.QUEUED,
        request=parse_job_request({"prompt": "p", "max_queue_seconds": 1800}),
        source="api",
        created_at=accepted,
        updated_at=accepted,
    )
    assert running_s(never, at) == 1800  # an hour old, half of it within its queue limit


def test_an_ended_job_keeps_its_image_slot_only_while_its_image_call_may_still_run():
    """A job cancelled during the endpoint's call keeps its image slot: the step frees it when the endpoint answers;
    the healer only after the step's timeout. Not a job that never reached the call, nor one past its image stage,
    nor a failed one (the state machine fails a job once its step has ended: a step killed during the call is a lost
    release the next job must not wait minutes for), nor a job still open (the usual rules hold)."""
    from datetime import timedelta

    from omnireel.admission.gate import IMAGE_STEP_TIMEOUT_S, _image_call_may_run
    from omnireel.core.clock import iso, now
    from omnireel.jobs.job import Job, JobStatus

    def job(status: JobStatus, ended_s_ago: float, *stages: JobStatus) -> Job:
        at = iso(now() - timedelta(seconds=ended_s_ago))
        times = {stage.value: at for stage in stages} | {status.value: at}
        return Job(job_id="j", status=status, request=None, source="api", created_at=at, updated_at=at,
                   stage_times=times)  # fmt: skip

    in_call = (JobStatus.ACCEPTED, JobStatus.GENERATING_IMAGE)
    assert _image_call_may_run(job(JobStatus.CANCELLED, 1, *in_call))
    assert not _image_call_may_run(job(JobStatus.FAILED, 1, *in_call))  # its step has ended (or was killed)
    assert not _image_call_may_run(job(JobStatus.CANCELLED, IMAGE_STEP_TIMEOUT_S + 1, *in_call))  # the step is over
    assert not _image_call_may_run(job(JobStatus.CANCELLED, 1, JobStatus.ACCEPTED, JobStatus.QUEUED))  # no call
    assert not _image_call_may_run(job(JobStatus.CANCELLED, 1, *in_call, JobStatus.STAGING_VIDEO))  # call over
    assert not _image_call_may_run(job(JobStatus.GENERATING_IMAGE, 1, JobStatus.ACCEPTED))  # open: the usual rules
