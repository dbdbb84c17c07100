"""One signed HTTP exchange with the API, with bounded retries.

Retried (with exponential backoff and jitter, honouring ``Retry-After`` up to ``MAX_RETRY_AFTER_S``): connection
failures, timeouts, 429, 502, 503 and 504 -- but only for requests that are safe to repeat: ``GET``, ``DELETE`` (a
cancel's repeat answers 409 "cancelled", which the client reads as done) and a ``POST`` that carries an
``Idempotency-Key`` (the API answers its repeat with the same job). Every attempt is signed afresh (a retry must not
carry a stale ``X-Amz-Date``).
"""

from __future__ import annotations

import json
import random
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any

from .errors import CredentialsError, TransportError, api_error
from .signing import signed_headers

RETRYABLE_STATUS = frozenset({429, 502, 503, 504})
MAX_RETRY_AFTER_S = 10.0
USER_AGENT = "omnireel-client/0.1"


@dataclass
class Reply:
    status: int
    headers: dict[str, str]
    body: Any


class Transport:
    def __init__(self, api_url: str, region: str, credentials: Any, *, timeout: float = 35.0, attempts: int = 4,
                 backoff_s: float = 0.5) -> None:  # fmt: skip
        if not api_url.startswith(("http://", "https://")):
            raise CredentialsError(f"the API URL {api_url!r} is not http(s)")
        self.api_url = api_url.rstrip("/")
        self.region = region
        self.credentials = credentials
        self.timeout = timeout
        self.attempts = max(1, attempts)
        self.backoff_s = backoff_s

    def request(self, method: str, path: str, body: Any = None, headers: dict[str, str] | None = None,
                ok: tuple[int, ...] = (200,)) -> Reply:  # fmt: skip
        """The decoded reply of an answer in ``ok``; any other answer raises its ``ApiError``."""
        reply = self.exchange(method, path, body, headers)
        if reply.status not in ok:
            raise api_error(reply.status, reply.body)
        return reply

    def exchange(self, method: str, path: str, body: Any = None, headers: dict[str, str] | None = None) -> Reply:
        url = self.api_url + path
        data = json.dumps(body).encode() if body is not None else None
        base = {"Accept": "application/json", "User-Agent": USER_AGENT, **(headers or {})}
        if data is not None:
            base["Content-Type"] = "application/json"
        repeatable = method in ("GET", "HEAD", "DELETE") or "Idempotency-Key" in base
        if self.credentials is None:
            raise CredentialsError("no AWS credentials to sign the request (a profile, AWS_* variables, a role...)")
        for attempt in range(1, self.attempts + 1):
            signed = signed_headers(method, url, data, base, self.credentials, self.region)
            request = urllib.request.Request(url, data=data, method=method, headers=signed)  # noqa: S310 - http(s)
            last = attempt == self.attempts or not repeatable
            try:
                with urllib.request.urlopen(request, timeout=self.timeout) as response:  # noqa: S310
                    return Reply(response.status, dict(response.headers.items()), _decode(response.read()))
            except urllib.error.HTTPError as exc:
                reply = Reply(exc.code, dict(exc.headers.items()), _decode(exc.read()))
                if exc.code not in RETRYABLE_STATUS or last:
                    return reply
                self._pause(attempt, reply.headers.get("Retry-After"))
            except (urllib.error.URLError, TimeoutError, ConnectionError) as exc:
                if last:
                    raise TransportError(f"the API at {self.api_url} is unreachable: {_reason(exc)}") from exc
                self._pause(attempt, None)
        raise AssertionError("unreachable")  # pragma: no cover - the last attempt returns or raises

    def _pause(self, attempt: int, retry_after: str | None) -> None:
        delay = self.backoff_s * 2 ** (attempt - 1) * (0.5 + random.random())  # jitter, not crypto
        if retry_after and retry_after.strip().isdigit():
            delay = max(delay, min(float(retry_after), MAX_RETRY_AFTER_S))
        time.sleep(delay)


def _reason(exc: Exception) -> str:
    return str(getattr(exc, "reason", None) or exc)


def _decode(raw: bytes) -> Any:
    try:
        return json.loads(raw) if raw else None
    except ValueError:
        return raw.decode(errors="replace")
