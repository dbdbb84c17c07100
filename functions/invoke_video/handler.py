"""InvokeVideo step (``.waitForTaskToken``): take a video slot first (admission's fast path; not admitted: answer this
task's own token with ``admitted: false`` and the state machine parks the job in WaitForVideoSlot), store the task
token with the job, hand the request GenerateImage staged
to the async endpoint (InvokeEndpointAsync, InferenceId = job id) and heartbeat (``omnireel.jobs.steps.start_render``).
The state then waits for the render: async_result answers the token (or fails it).
"""

from aws_lambda_powertools.utilities.typing import LambdaContext

from omnireel.admission.gate import Gate
from omnireel.aws import adapters
from omnireel.core.errors import StepError
from omnireel.jobs.steps import start_render
from omnireel.runtime.handler import lambda_handler, parse_step_input
from omnireel.runtime.observability import logger
from omnireel.runtime.settings import VideoSettings

settings = VideoSettings.from_env()
jobs = adapters.job_store(settings)
artifacts = adapters.artifact_store(settings)
endpoint = adapters.video_endpoint(settings)
callbacks = adapters.task_callbacks()
gate = Gate(store=adapters.admission_store(settings), jobs=jobs, callbacks=callbacks)


@lambda_handler(stage="invoke_video")
def handler(event: dict, context: LambdaContext) -> dict:
    step = parse_step_input(event)
    if not step.task_token:
        raise StepError("InvalidStepInput", "invoke_video needs a task_token ($$.Task.Token)")
    logger.append_keys(job_id=step.job_id)
    return start_render(
        step.job_id,
        step.task_token,
        gate=gate,
        jobs=jobs,
        endpoint=endpoint,
        callbacks=callbacks,
        artifacts=artifacts,
        invocation_timeout_seconds=settings.video_invocation_timeout_seconds,
        request_ttl_seconds=settings.video_request_ttl_seconds,
        instance_type=settings.video_instance_type or None,
    )
