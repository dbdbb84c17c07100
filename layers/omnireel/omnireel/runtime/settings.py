"""Typed configuration, read once from the environment at cold start.

Each function declares the settings model it needs; a missing or malformed variable fails the
cold start with a message naming it, instead of failing later mid-job. Field ``jobs_table`` is
read from ``JOBS_TABLE`` and so on (upper-case field name).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Annotated, Any, Literal, Self

import msgspec

# What pydantic read as a boolean (msgspec reads true/false/1/0): kept, so no environment that worked stops working.
_TRUE = {"1", "on", "t", "true", "y", "yes"}
_FALSE = {"0", "off", "f", "false", "n", "no"}


class _EnvSettings(msgspec.Struct, frozen=True, kw_only=True):
    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Self:
        env = os.environ if environ is None else environ
        values: dict[str, Any] = {name: env[name.upper()] for name in cls.__struct_fields__ if name.upper() in env}
        fields = msgspec.structs.fields(cls)
        for field in fields:  # a boolean in any spelling pydantic read; anything else is left to msgspec to refuse
            if field.type is bool and field.name in values and values[field.name].lower() in _TRUE | _FALSE:
                values[field.name] = values[field.name].lower() in _TRUE
        try:
            return msgspec.convert(values, cls, strict=False)  # lax: "30" is read as 30
        except msgspec.ValidationError as exc:
            # Name every variable that is wrong (msgspec stops at the first).
            bad = []
            for field in fields:
                if field.name not in values:
                    bad += [field.name] if field.required else []
                    continue
                try:
                    msgspec.convert(values[field.name], field.type, strict=False)
                except msgspec.ValidationError:
                    bad.append(field.name)
            names = ", ".join(name.upper() for name in bad)
            raise RuntimeError(f"invalid or missing environment variables for {cls.__name__}: {names}") from exc


class JobStoreSettings(_EnvSettings, frozen=True, kw_only=True):
    jobs_table: str
    job_ttl_days: Annotated[int, msgspec.Meta(ge=1, le=3650)] = 30
    # Accounting (omnireel.usage): the usage table (per-caller pending counters, usage per day) and template.yaml
    # CallerMaxPendingJobs. Unset: jobs are not counted (a stack before issue 34).
    usage_table: str | None = None
    caller_max_pending_jobs: Annotated[int, msgspec.Meta(ge=1, le=100000)] = 100


class ArtifactSettings(JobStoreSettings, frozen=True, kw_only=True):
    """The jobs table and the artifacts bucket (every function that reads artifacts also reads jobs)."""

    artifacts_bucket: str
    presign_seconds: Annotated[int, msgspec.Meta(ge=60, le=43200)] = 3600  # a role session lasts at most 12 h
    # The admission table (omnireel.admission): slots, holders and waiting jobs. Set for every function (Globals);
    # the functions that grant, release or show a queue position read it.
    admission_table: str | None = None


class ApiSettings(ArtifactSettings, frozen=True, kw_only=True):
    state_machine_arn: str
    # The profile's default for video.num_inference_steps (dev: 4 for smoke tests, prod: 30).
    default_video_steps: Annotated[int, msgspec.Meta(ge=1, le=100)] = 30
    job_events_topic_arn: str  # DELETE /jobs/{id} publishes job.cancelled
    event_bus_name: str = "default"
    webhook_secret_arn: str = ""  # GET /webhooks/secret: the master key the caller's secret is derived from
    # How long a function keeps the master key (a rotation reaches warm functions within it; at most 5 minutes).
    webhook_key_cache_seconds: Annotated[float, msgspec.Meta(ge=0, le=300)] = 300.0
    # What a rotation waits beyond the key cache (omnireel.webhooks.secrets PICKUP_MARGIN: the write's latency, Secrets
    # Manager's propagation, the clocks). Lower only where writer and readers share one clock (the local stack's tests).
    webhook_pickup_margin_seconds: Annotated[float, msgspec.Meta(ge=1, le=300)] = 30.0
    # http:// to a loopback address is allowed for webhooks (the local stack only; template parameter, default false).
    webhook_allow_loopback_http: bool = False
    # template.yaml CallerScope: who owns jobs, keys and the webhook secret when the caller is an assumed role -- the
    # role ("role", the default) or each of its sessions ("session"): omnireel.core.caller.
    caller_scope: Literal["role", "session"] = "role"
    # Batches (POST /batches, .jsonl drops): unset disables them.
    batches_table: str | None = None
    batch_queue_url: str | None = None
    # POST /batches/uploads: the inbox bucket its presigned PUTs go to (prompts/uploads/ only); unset disables uploads.
    inbox_bucket: str | None = None


class InboxSettings(ApiSettings, frozen=True, kw_only=True):
    # A drop over its caller's CallerMaxPendingJobs waits on this queue (unset: it fails at once, with the reason) ...
    inbox_retry_queue_url: str | None = None
    # ... at most this long (template.yaml BatchMaxDeferralSeconds: how long queued work may wait for a place).
    batch_max_deferral_seconds: Annotated[int, msgspec.Meta(ge=1, le=1209600)] = 604800


class BatchSettings(InboxSettings, frozen=True, kw_only=True):
    """BatchSubmit: the fan-out."""

    batches_table: str
    batch_queue_url: str
    # template.yaml BatchMaxInFlightJobs: jobs of one batch running at once (a per-batch cap since issue 34: the GPUs
    # are shared across callers by admission, omnireel.admission).
    batch_max_in_flight_jobs: Annotated[int, msgspec.Meta(ge=1, le=100000)] = 100
    batch_retry_base_seconds: Annotated[int, msgspec.Meta(ge=1, le=60)] = 2
    # template.yaml BatchMaxDeferralSeconds: a line still without an in-flight slot this long after it was first
    # queued fails with that reason (its job.failed) instead of waiting forever.
    batch_max_deferral_seconds: Annotated[int, msgspec.Meta(ge=1, le=1209600)] = 604800
    # The batch queue's redrive maxReceiveCount: on this receive a work item that still fails ends its lines (each a
    # failed job naming the error) instead of going to the dead-letter queue with nothing to tell (tests/unit/template).
    batch_max_receives: Annotated[int, msgspec.Meta(ge=1, le=1000)] = 5


class VideoSettings(ArtifactSettings, frozen=True, kw_only=True):
    """InvokeVideo: the async video request (InvokeEndpointAsync) that GenerateImage staged."""

    video_endpoint_name: str
    # SageMaker: InvocationTimeoutSeconds <= 3600, RequestTTLSeconds 60..21600.
    video_invocation_timeout_seconds: Annotated[int, msgspec.Meta(ge=1, le=3600)] = 900
    video_request_ttl_seconds: Annotated[int, msgspec.Meta(ge=60, le=21600)] = 3600
    video_instance_type: str = ""  # template.yaml VideoInstanceType: what a job's usage names and prices


class ImageSettings(ArtifactSettings, frozen=True, kw_only=True):
    """GenerateImage: the image call, then the video request it stages (so both model ids); InvokeVideo queues it."""

    image_endpoint_name: str
    # template.yaml ImageInstanceTypes, comma-separated (pools: priority order): what a job's usage names and prices
    image_instance_types: str = ""
    job_events_topic_arn: str  # job.image_ready
    event_bus_name: str = "default"
    image_model_id: str = "black-forest-labs/FLUX.2-klein-4B"
    video_model_id: str = "Wan-AI/Wan2.1-VACE-1.3B-diffusers"


class ResultSettings(ArtifactSettings, frozen=True, kw_only=True):
    pass


class PublishSettings(ArtifactSettings, frozen=True, kw_only=True):
    job_events_topic_arn: str
    event_bus_name: str = "default"


class BatchProgressSettings(PublishSettings, frozen=True, kw_only=True):
    batches_table: str


class BatchReconcileSettings(PublishSettings, frozen=True, kw_only=True):
    """ReconcileBatches: lines whose terminal event never arrived, intakes that stopped (omnireel.batches.reconcile)."""

    batches_table: str
    # template.yaml BatchReconcileGraceSeconds: how long a line's job must have been terminal (or a batch's intake
    # silent) before the reconciler repairs it; longer than a terminal event normally takes to be counted.
    batch_reconcile_grace_seconds: Annotated[int, msgspec.Meta(ge=1, le=86400)] = 900
    # BatchDeadLetterQueue: dead-lettered work items fail their unrecorded lines (omnireel.batches.reconcile).
    batch_dead_letter_queue_url: str | None = None
    # A line holding a slot whose job was written but whose execution never started (its submitter killed between
    # the two, and its work item dead-lettered or lost): started here (omnireel.batches.reconcile).
    state_machine_arn: str


class DeadlineSettings(PublishSettings, frozen=True, kw_only=True):
    # template.yaml JobDeadlineSeconds: longer than any execution can run (tests/unit/template derives the bound).
    job_deadline_seconds: Annotated[int, msgspec.Meta(ge=1)]
    state_machine_arn: str


class AdmissionSettings(PublishSettings, frozen=True, kw_only=True):
    """WaitForSlot and the admission healing schedule: each endpoint's capacity (instances from DescribeEndpoint x
    per-instance concurrency, template.yaml ImageConcurrencyPerInstance / VideoMaxConcurrentInvocationsPerInstance)."""

    admission_table: str
    image_endpoint_name: str
    video_endpoint_name: str
    image_concurrency_per_instance: Annotated[int, msgspec.Meta(ge=1, le=64)] = 1
    video_max_concurrent_invocations_per_instance: Annotated[int, msgspec.Meta(ge=1, le=1000)] = 1


class AdmissionHealSettings(AdmissionSettings, frozen=True, kw_only=True):
    state_machine_arn: str  # is a holder's (or a waiting job's) execution still running?
    # template.yaml AdmissionHealGraceSeconds: a grant or a queue entry younger than this is left alone (Gate.grace_s)
    admission_heal_grace_seconds: Annotated[float, msgspec.Meta(ge=5, le=3600)] = 60.0


class WebhookSettings(JobStoreSettings, frozen=True, kw_only=True):
    webhook_secret_arn: str
    webhook_key_cache_seconds: Annotated[float, msgspec.Meta(ge=0, le=300)] = 300.0
    webhook_pickup_margin_seconds: Annotated[float, msgspec.Meta(ge=1, le=300)] = 30.0  # as ApiSettings'
    # batch.completed is signed with the batch owner's secret (read from its record); each attempt is recorded there
    batches_table: str | None = None
    webhook_queue_url: str
    webhook_allow_loopback_http: bool = False
    # Exponential backoff between attempts (template: WebhookRetryBaseSeconds; SQS maxReceiveCount = max attempts).
    webhook_retry_base_seconds: Annotated[int, msgspec.Meta(ge=1, le=43200)] = 30
    webhook_max_attempts: Annotated[int, msgspec.Meta(ge=1, le=1000)] = 13
    webhook_connect_timeout_seconds: Annotated[float, msgspec.Meta(gt=0, le=10)] = 3.0
    # One deadline per attempt: resolution, connect, TLS, request and answer together (template: the batch, the
    # concurrency, this deadline and the function's Timeout are sized together; tests/unit/template checks the rule).
    webhook_attempt_deadline_seconds: Annotated[float, msgspec.Meta(gt=0, le=60)] = 10.0
    # Records of one batch delivered at once (threads: the attempts wait on the network, not the CPU).
    webhook_delivery_concurrency: Annotated[int, msgspec.Meta(ge=1, le=10)] = 10
