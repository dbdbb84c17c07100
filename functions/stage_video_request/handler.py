"""StageVideoRequest step: PNG -> 480x320 JPEG data URL -> multipart request in jobs/<id>/."""

from aws_lambda_powertools.utilities.typing import LambdaContext

from omnireel.aws.artifact_store import ArtifactStore
from omnireel.aws.job_store import JobStore
from omnireel.observability import logger, metrics, stage_duration, tracer
from omnireel.settings import StageSettings
from omnireel.staging import stage_video_request
from omnireel.step_handler import StepInput, step_errors

settings = StageSettings.from_env()
jobs = JobStore(settings.jobs_table, settings.job_ttl_days)
artifacts = ArtifactStore(settings.artifacts_bucket)


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler
@metrics.log_metrics
@step_errors("stage_video_request")
def handler(event: dict, context: LambdaContext) -> dict:
    step = StepInput.model_validate(event)
    logger.append_keys(job_id=step.job_id)
    with stage_duration("stage_video_request"):
        uri = stage_video_request(step.job_id, jobs=jobs, artifacts=artifacts, model_id=settings.video_model_id)
    return {"job_id": step.job_id, "video_request": uri}
