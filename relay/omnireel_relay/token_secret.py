"""The relay token as stored in Secrets Manager: the SecretString is the token itself, or a JSON object
``{"token": "..."}`` (or a JSON string). One parser, for the relay (``auth.py``) and for ``omnireel tts``."""

from __future__ import annotations

import json


class TokenSourceError(RuntimeError):
    pass


def token_from_secret_string(value: str, secret_id: str) -> str:
    """The token in a SecretString; ``TokenSourceError`` naming ``secret_id`` when it holds none."""
    try:
        parsed = json.loads(value)
    except ValueError:
        return value.strip()
    if isinstance(parsed, dict) and isinstance(parsed.get("token"), str):
        return str(parsed["token"])
    if isinstance(parsed, str):
        return parsed
    raise TokenSourceError(f"secret {secret_id} must be a string or a JSON object with a 'token' key")
