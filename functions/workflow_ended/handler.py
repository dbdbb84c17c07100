"""Safety net: an execution that ended FAILED / TIMED_OUT / ABORTED without its job's terminal event gets one.

EventBridge delivers Step Functions' "Execution Status Change" events here. ``finish_job`` is
idempotent: if RecordFailure (or PublishSucceeded) already published, nothing happens; if the job
already succeeded but its event never went out, the succeeded event is published.
"""

import json

from aws_lambda_powertools.utilities.typing import LambdaContext

from omnireel.aws import adapters
from omnireel.jobs.job import JobStatus, job_id_of_execution
from omnireel.jobs.outcome import finish_job, of_execution
from omnireel.runtime.handler import lambda_handler
from omnireel.runtime.observability import MetricUnit, logger, metrics
from omnireel.runtime.settings import PublishSettings

settings = PublishSettings.from_env()
jobs = adapters.job_store(settings)
artifacts = adapters.artifact_store(settings)
publisher = adapters.event_publisher(settings)
CODES = {"FAILED": "WorkflowFailed", "TIMED_OUT": "WorkflowTimedOut", "ABORTED": "WorkflowAborted"}


@lambda_handler()
def handler(event: dict, context: LambdaContext) -> dict:
    detail = event["detail"]  # the EventBridge event as a dict (no Powertools data classes: cold start)
    name, status = detail["name"], detail["status"]
    job_id = job_id_of_execution(name)
    logger.append_keys(job_id=job_id)
    job = jobs.find(job_id)
    if job is None:
        logger.warning("execution ended for an unknown job", extra={"status": status})
        return {"job_id": job_id, "published": False}
    if not of_execution(job, name):  # an earlier record of the same job id (its execution outlived the record's TTL)
        return {"job_id": job_id, "published": False}
    code = CODES.get(status, "WorkflowEnded")
    cause = detail.get("cause") or f"the workflow execution ended {status}"
    published = finish_job(
        job_id,
        JobStatus.FAILED,
        step_error={"Error": code, "Cause": json.dumps({"code": code, "message": cause})},
        jobs=jobs,
        artifacts=artifacts,
        publisher=publisher,
        presign_seconds=settings.presign_seconds,
    ).event
    if published is not None:
        logger.warning("terminal event published by the safety net", extra={"status": published.status})
        metrics.add_metric(name="terminal_events_recovered", unit=MetricUnit.Count, value=1)
    return {"job_id": job_id, "published": published is not None}
