"""Bearer-token authentication, compared in constant time.

Where the token comes from (first match): ``OMNIREEL_RELAY_TOKEN`` (local), a Secrets Manager secret named by
``OMNIREEL_RELAY_TOKEN_SECRET_ID`` (SecretString, either the token or ``{"token": "..."}``), or an SSM SecureString
parameter named by ``OMNIREEL_RELAY_TOKEN_SSM_PARAMETER``. It is fetched once at start-up and cached.

How a client presents it:
- ``Authorization: Bearer <token>`` header (CLI, servers, any vLLM-Omni client that can set headers);
- browsers cannot set headers on a WebSocket, so they offer two subprotocols:
  ``new WebSocket(url, ["omnireel.v1", "omnireel.bearer." + token])``; the relay selects ``omnireel.v1``
  and never echoes the token. (Not a query parameter: those end up in ALB access logs.)
"""

from __future__ import annotations

import asyncio
import hmac
import logging

from .protocol import BEARER_SUBPROTOCOL_PREFIX
from .settings import Settings
from .token_secret import TokenSourceError, token_from_secret_string

__all__ = ["Authenticator", "TokenSourceError", "load_token"]

log = logging.getLogger(__name__)


def _fetch_secret(secret_id: str, region: str | None) -> str:
    import boto3

    value = boto3.client("secretsmanager", region_name=region).get_secret_value(SecretId=secret_id)["SecretString"]
    return token_from_secret_string(value, secret_id)


def _fetch_parameter(name: str, region: str | None) -> str:
    import boto3

    resp = boto3.client("ssm", region_name=region).get_parameter(Name=name, WithDecryption=True)
    return resp["Parameter"]["Value"].strip()


async def load_token(settings: Settings) -> str:
    if settings.token:
        token = settings.token
    elif settings.token_secret_id:
        token = await asyncio.to_thread(_fetch_secret, settings.token_secret_id, settings.region)
    elif settings.token_ssm_parameter:
        token = await asyncio.to_thread(_fetch_parameter, settings.token_ssm_parameter, settings.region)
    else:  # pragma: no cover - Settings validation forbids it
        raise TokenSourceError("no token source configured")
    if len(token) < 16:
        log.warning("relay token is shorter than 16 characters")
    return token


class Authenticator:
    def __init__(self, token: str) -> None:
        if not token:
            raise TokenSourceError("empty relay token")
        self._token = token.encode()

    def _matches(self, candidate: str) -> bool:
        return hmac.compare_digest(candidate.encode(), self._token)

    def check(self, authorization: str | None, subprotocols: list[str]) -> bool:
        """True when the Authorization header or an ``omnireel.bearer.`` subprotocol carries the token."""
        ok = False
        if authorization:
            scheme, _, value = authorization.strip().partition(" ")
            if scheme.lower() == "bearer" and self._matches(value.strip()):
                ok = True
        for proto in subprotocols:
            if proto.startswith(BEARER_SUBPROTOCOL_PREFIX) and self._matches(proto[len(BEARER_SUBPROTOCOL_PREFIX) :]):
                ok = True
        return ok
