"""omnireel domain package: prompt -> image -> video on vLLM-Omni endpoints.

Four layers; an arrow is "may import" (``tests/unit/domain/test_boundaries.py`` fences it, see
``docs/development.md``):

- **models and rules** (no AWS, no I/O): ``batch``, ``batch_events``, ``bounded``, ``caller``, ``errors``,
  ``events``, ``image_request``, ``job``, ``media``, ``mp4``, ``notification``, ``records``, ``reference_image``,
  ``request``, ``s3uri``, ``video_request``. They import only each other and pure libraries (msgspec for the records
  and events, pyvips, urllib3's multipart encoder): never ``omnireel.aws``, boto3 or botocore. No pydantic: nothing on
  a function's cold path imports it (``docs/decisions.md``; a test imports every handler to check).
- **use cases** (one operation each, written against the adapters): ``submission`` (accept a request), ``inbox`` (a
  dropped file becomes a job), ``steps`` (the pipeline's steps), ``staging`` (stage the video request: apart, so only
  GenerateImage loads the image and multipart libraries), ``outcome`` (finish a job: terminal transition and its one
  event), ``deadline`` (the safety net), ``job_view`` (GET /jobs/{id}), ``artifact_links`` (presigned links),
  ``batch_intake`` (start a batch), ``batch_fanout`` (split steps and lines -> jobs, backpressure), ``batch_progress``
  (counts, manifest, batch.completed).
  -> models and rules, ``omnireel.aws``, ``observability``.
- **Lambda glue** (shared by the handlers in ``functions/``): ``settings`` (typed environment), ``observability``
  (Logger, Metrics, the tracer), ``tracing`` (the X-Ray SDK or a no-op: XRAY_SDK_TRACING), ``step_handler`` (domain
  errors -> state machine errors).
- **adapters** ``omnireel.aws``: thin botocore clients that speak the domain's language (the only place botocore is
  imported; boto3 is not imported at all: ``omnireel.aws.clients``). -> models and rules, ``observability``.

Handlers in ``functions/`` parse input, call one use case and map errors. Product code (``functions/``, ``layers/``,
``relay/``) never imports the local stack (``omnireel_local``) or the CLI (``omnireel_cli``).
"""

__version__ = "0.1.0"
