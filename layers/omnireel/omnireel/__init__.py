"""omnireel domain package: prompt -> image -> video on vLLM-Omni endpoints.

Folders are capabilities, so a feature is found by its folder:

- ``jobs/``: the request, the job record and its lifecycle, and every use case from submission to the terminal event
  (a dropped file, the pipeline's steps, staging, cancellation, listing, the deadline);
- ``batches/``: many requests in one submission: the batch record, intake, fan-out, progress, the reconciler;
- ``admission/``: one fair queue in front of each model endpoint: slots, who is served next, the healing schedule;
- ``events/``: what consumers receive: the event types, the job events, ``job.image_ready``, ``batch.completed``;
- ``webhooks/``: where a delivery may go, which secret signs it, each attempt;
- ``usage/``: per-caller accounting: the pending-jobs limit, what a job used and an estimate of its cost, the one price
  table, GET /usage;
- ``media/``: the model containers' wire contracts: image and video requests, the reference image, output checks, the
  async notification;
- ``core/``: the words three or more folders share: typed errors, bounded text, record structs, the caller scope, the
  clock, job ids, S3 URIs and object versions, SQS message text (``tests/unit/architecture/test_rooms.py`` keeps such
  words here);
- ``runtime/``: what every Lambda function's runtime shares: settings, observability, the handler decorators;
- ``aws/``: the AWS adapters (the only place botocore is imported; boto3 is not imported at all).

Across the folders, every module belongs to exactly one of four layers; an arrow is "may import". The list below is
the map itself: ``tests/unit/architecture/test_boundaries.py`` reads it, checks that it names every module of the
package exactly once, and fences the arrows (see ``docs/development.md``).

- **models and rules** (no AWS, no I/O; they import only each other and pure libraries: msgspec for the records and
  events, pyvips, urllib3's multipart encoder; no pydantic: nothing on a function's cold path imports it):
  ``admission.metrics``, ``admission.pool``, ``core.bounded``, ``core.caller``, ``core.clock``, ``core.errors``,
  ``core.ids``, ``core.records``, ``core.s3uri``, ``core.sqs_text``, ``jobs.job``, ``jobs.request``, ``batches.batch``,
  ``batches.record``, ``events.batch_events``, ``events.event_types``, ``events.job_events``, ``events.published``,
  ``media.image_request``, ``media.mp4``, ``media.notification``, ``media.png``, ``media.reference_image``,
  ``media.video_request``, ``webhooks.secrets``, ``usage.limits``, ``usage.metering``, ``usage.prices``.
- **adapters** (talk to the world outside the function; -> models and rules, adapters, ``runtime.observability``):
  every module of ``aws`` (thin botocore clients that speak the domain's language), ``webhooks.target`` (DNS: where a
  webhook may be sent) and ``webhooks.delivery`` (HTTP: one signed POST to a receiver).
- **use cases** (one operation each, written against the adapters; -> models and rules, adapters, use cases,
  ``runtime.observability``):
  ``jobs.submission`` (accept a request), ``jobs.inbox`` (a dropped file becomes a job), ``jobs.steps`` (the
  pipeline's steps), ``jobs.staging`` (stage the video request: apart, so only GenerateImage loads the image and
  multipart libraries), ``jobs.outcome`` (finish a job: terminal transition and its one event), ``jobs.cancellation``
  (DELETE /jobs/{id}), ``jobs.listing`` (GET /jobs), ``jobs.deadline`` (the safety net), ``jobs.job_view``
  (GET /jobs/{id}), ``jobs.artifact_links`` (presigned links), ``events.progress`` (``job.image_ready``),
  ``batches.intake`` (start a batch), ``batches.fanout`` (split steps and lines -> jobs, backpressure),
  ``batches.progress`` (counts, manifest, batch.completed), ``batches.reconcile`` (lost events, stopped intakes),
  ``batches.uploads`` (POST /batches/uploads: a presigned upload that runs as a dropped file),
  ``admission.gate`` (acquire, wait, dispatch, release, heal: who may call a model endpoint), ``admission.expiry``
  (a job not admitted within its max_queue_seconds ends expired),
  ``webhooks.submit_check`` (the webhook check at submit, its DNS lookup bounded),
  ``webhooks.dispatch`` (one queued event -> one recorded attempt), ``webhooks.signing`` (which secrets sign a
  delivery), ``usage.report`` (GET /usage), ``usage.heal`` (the pending counters' recount).
- **Lambda runtime** (shared by the handlers in ``functions/``; -> models and rules, runtime): ``runtime.settings``
  (typed environment), ``runtime.observability`` (Logger, Metrics), ``runtime.handler`` (every handler's decorator
  stack; a step's input, and its errors -> state machine errors).

Handlers in ``functions/`` parse input, call one use case and map errors. Product code (``functions/``, ``layers/``,
``relay/``) never imports the local stack (``omnireel_local``) or the CLI (``omnireel_cli``).
"""

__version__ = "0.1.0"
