"""AWS clients, created once per execution environment and reused across invocations.

Created with botocore, the SDK's core, rather than through boto3: ``boto3.client(...)`` is a thin wrapper around the
same ``create_client`` call (same credentials chain, region, endpoints, retries, ``Config``), but importing boto3 also
imports its resource layer and s3transfer, ~0.07x of the cold-start yardstick in every function for nothing the
functions use (docs/benchmarks.md, docs/decisions.md). ``AWS_ENDPOINT_URL`` (honoured by botocore itself) points every
client at the local stack.
"""

from __future__ import annotations

from functools import cache

import botocore.session
from botocore.config import Config

# Standard retry mode: exponential backoff with jitter on throttling and transient errors.
_DEFAULT = Config(retries={"mode": "standard", "max_attempts": 4}, connect_timeout=5, read_timeout=30)
# S3: SigV4 (AWS4-HMAC-SHA256) for everything, presigned URLs included -- the SDK default for presigning is still
# SigV2 (AWSAccessKeyId=...&Signature=...), which newer regions and S3 policies refuse -- and the regional
# virtual-hosted endpoint (bucket.s3.<region>.amazonaws.com), so a link never goes through the global endpoint's
# redirect. A custom endpoint (the local stack) keeps path-style URLs.
_S3 = _DEFAULT.merge(
    Config(signature_version="s3v4", s3={"addressing_style": "virtual", "us_east_1_regional_endpoint": "regional"})
)
# The image endpoint runs a model: give it time, and let the state machine (not botocore) retry
# the slow failures so every attempt is visible in the execution history.
_MODEL_CALL = Config(retries={"mode": "standard", "max_attempts": 2}, connect_timeout=5, read_timeout=120)


@cache
def _session() -> botocore.session.Session:
    """One session per execution environment, as boto3's default session (credentials and config read once)."""
    return botocore.session.get_session()


@cache
def client(service: str):
    config = {"sagemaker-runtime": _MODEL_CALL, "s3": _S3}.get(service, _DEFAULT)
    return _session().create_client(service, config=config)
