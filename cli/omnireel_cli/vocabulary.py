"""Words the parser offers before any command runs: the smoke checks, the smoke prompt and ``invoke``'s placeholders.

Kept apart from ``smoke`` and ``invoke`` so that building the parser (every command, ``--help`` included) imports
neither of them nor what they need (asyncio, PyYAML, botocore): see ``main._lazy``.
"""

from __future__ import annotations

SMOKE_PROMPT = "a lighthouse on a rocky coast at dusk, waves, cinematic"
CHECKS = ("image", "video", "tts", "deploy")

# What each placeholder means (also the list `omnireel invoke --help` shows); filled by ``values``.
PLACEHOLDERS = {
    "job_id": "the job (--job, default the latest)",
    "account_id": "the stack's account",
    "region": "the stack's region",
    "inbox_bucket": "InboxBucketName output",
    "artifacts_bucket": "ArtifactsBucketName output",
    "state_machine_arn": "StateMachineArn output",
    "video_success_topic_arn": "VideoSuccessTopicArn output",
    "video_error_topic_arn": "VideoErrorTopicArn output",
    "video_endpoint": "VideoEndpointName output",
    "execution_name": "the job's Step Functions execution",
    "execution_arn": "ARN of that execution",
    "task_token": "the job's stored task token (a job that reached rendering_video)",
    "async_output_location": "where the video endpoint writes the job's output (s3://...)",
    "async_failure_location": "where it writes the job's failure (s3://...)",
    "source_key": "the dropped file's key (a job from the inbox)",
    "source_key_url": "that key as S3 events encode it",
    "source_version_id": "the dropped file's version",
    "source_etag": "the dropped file's ETag",
    "caller_arn": "the ARN of the IAM principal that submitted the job (API jobs; else the developer)",
    "caller_id": "that principal's unique id, the job's owner scope (AIDA... / AROA...; else the developer's)",
    "idempotency_key": "a new Idempotency-Key per invocation",
    "schedule_rule_arn": "ARN of an EventBridge rule of the stack",
}
