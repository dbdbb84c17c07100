"""The webhook signing secret in Secrets Manager (template.yaml: WebhookSigningSecret), as a ``whsec_`` value."""

from __future__ import annotations

import json
from functools import cache

from omnireel.aws.clients import client

SECRET_PREFIX = "whsec_"  # noqa: S105 - the Standard Webhooks prefix, not a secret


def as_whsec(secret_string: str) -> str:
    """The stored secret is ``{"key": <base64 alphabet, 44 characters>}`` (GenerateSecretString); consumers get it
    in the Standard Webhooks form ``whsec_<base64>``."""
    key = json.loads(secret_string)["key"]
    return key if key.startswith(SECRET_PREFIX) else SECRET_PREFIX + key


@cache
def signing_secret(secret_arn: str) -> str:
    """Read once per execution environment (a rotated secret reaches functions as their environments recycle)."""
    return as_whsec(client("secretsmanager").get_secret_value(SecretId=secret_arn)["SecretString"])
