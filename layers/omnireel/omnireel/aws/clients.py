"""boto3 clients, created once per execution environment and reused across invocations.

``AWS_ENDPOINT_URL`` (honoured by botocore itself) points every client at the local stack.
"""

from __future__ import annotations

from functools import cache

import boto3
from botocore.config import Config

# Standard retry mode: exponential backoff with jitter on throttling and transient errors.
_DEFAULT = Config(retries={"mode": "standard", "max_attempts": 4}, connect_timeout=5, read_timeout=30)
# The image endpoint runs a model: give it time, and let the state machine (not botocore) retry
# the slow failures so every attempt is visible in the execution history.
_MODEL_CALL = Config(retries={"mode": "standard", "max_attempts": 2}, connect_timeout=5, read_timeout=120)


@cache
def client(service: str):
    config = _MODEL_CALL if service == "sagemaker-runtime" else _DEFAULT
    return boto3.client(service, config=config)


@cache
def table(name: str):
    return boto3.resource("dynamodb", config=_DEFAULT).Table(name)
