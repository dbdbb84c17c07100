"""InvokeVideo step (``.waitForTaskToken``): store the task token with the job, hand the request GenerateImage staged
to the async endpoint (InvokeEndpointAsync, InferenceId = job id) and heartbeat. The state then waits for the render:
async_result answers the token (or fails it).
"""

from aws_lambda_powertools.utilities.typing import LambdaContext

from omnireel.aws.artifact_store import ArtifactStore
from omnireel.aws.job_store import JobStore
from omnireel.aws.video_endpoint import VideoEndpoint
from omnireel.aws.workflow import TaskCallbacks
from omnireel.errors import StepError
from omnireel.observability import logger, metrics, stage_duration, tracer
from omnireel.settings import VideoSettings
from omnireel.step_handler import parse_step_input, step_errors
from omnireel.steps import invoke_video

settings = VideoSettings.from_env()
jobs = JobStore(settings.jobs_table, settings.job_ttl_days)
artifacts = ArtifactStore(settings.artifacts_bucket)
endpoint = VideoEndpoint(settings.video_endpoint_name)
callbacks = TaskCallbacks()


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler
@metrics.log_metrics
@step_errors("invoke_video")
def handler(event: dict, context: LambdaContext) -> dict:
    step = parse_step_input(event)
    if not step.task_token:
        raise StepError("InvalidStepInput", "invoke_video needs a task_token ($$.Task.Token)")
    logger.append_keys(job_id=step.job_id)
    with stage_duration("invoke_video"):
        invoke_video(
            step.job_id,
            step.task_token,
            jobs=jobs,
            endpoint=endpoint,
            callbacks=callbacks,
            artifacts=artifacts,
            invocation_timeout_seconds=settings.video_invocation_timeout_seconds,
            request_ttl_seconds=settings.video_request_ttl_seconds,
        )
    return {"job_id": step.job_id, "queued": True}
