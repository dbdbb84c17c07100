"""One signed HTTP exchange with the API, with bounded retries.

Retried (with exponential backoff and jitter, honouring ``Retry-After`` up to ``MAX_RETRY_AFTER_S``; a 429's up to
``MAX_RATE_LIMIT_WAIT_S``, since the API's ``TooManyPendingJobs`` asks for longer than a 503 does): connection
failures, timeouts, 429, 502, 503 and 504 -- but only for requests that are safe to repeat: ``GET``, ``DELETE`` (a
cancel's repeat answers 409 "cancelled", which the client reads as done) and a ``POST`` that carries an
``Idempotency-Key`` (the API answers its repeat with the same job). Every attempt is signed afresh (a retry must not
carry a stale ``X-Amz-Date``). A broken exchange (a malformed status line, a body cut short, a reset) is a connection
failure too.

Redirects are never followed: urllib would repeat the request, with its ``Authorization`` and ``Idempotency-Key``, at
whatever ``Location`` says (another host too). A 3xx is a ``RedirectError``; a success whose body is not the JSON object
the API sends is an ``UnexpectedResponseError``. Every failure is an ``OmnireelClientError``.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import random
import re
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from .errors import CredentialsError, RedirectError, TransportError, UnexpectedResponseError, api_error
from .signing import signed_headers

RETRYABLE_STATUS = frozenset({429, 502, 503, 504})
MAX_RETRY_AFTER_S = 10.0
# A 429 (the caller's CallerMaxPendingJobs, issue 34): its Retry-After (30 s from the API) is honoured up to this per
# pause; after the client's attempts it is a RateLimitedError whose ``retry_after_s`` says when to come back.
MAX_RATE_LIMIT_WAIT_S = 60.0
USER_AGENT = "omnireel-client/0.1"
# What building a typed value from an answer of the wrong shape raises (a missing key, a list for an object...).
SHAPE_ERRORS = (KeyError, TypeError, ValueError, AttributeError, ArithmeticError)
T = TypeVar("T")


@dataclass
class Reply:
    status: int
    headers: dict[str, str]
    body: Any

    def header(self, name: str) -> str | None:
        """A header of the answer, whatever its case."""
        return next((v for k, v in self.headers.items() if k.lower() == name.lower()), None)


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    """A 3xx comes back as the answer (an ``HTTPError``): never followed."""

    def redirect_request(self, req: Any, fp: Any, code: int, msg: str, headers: Any, newurl: str) -> None:
        return None


class _TlsOnFirstUse(urllib.request.HTTPSHandler):
    """urllib's HTTPS handler, its TLS context (the system's CA certificates: ~40 ms of CPU to load) made at the first
    ``https`` request instead of when the client is built: a client of a plain ``http`` API (the local stack) never
    loads it, and each CLI command starts that much sooner. The context, once made, is urllib's own default."""

    def __init__(self) -> None:
        urllib.request.AbstractHTTPHandler.__init__(self)
        self._ready = False

    def https_open(self, req: Any) -> Any:
        if not self._ready:
            urllib.request.HTTPSHandler.__init__(self)  # sets the context and host name checking as urllib does
            self._ready = True
        return super().https_open(req)


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
        self._opener = urllib.request.build_opener(_NoRedirects(), _TlsOnFirstUse())

    def request(self, method: str, path: str, body: Any = None, headers: dict[str, str] | None = None,
                ok: tuple[int, ...] = (200,)) -> Reply:  # fmt: skip
        """The decoded reply of an answer in ``ok`` (its body a JSON object, as the API sends); any other answer raises
        its ``ApiError``, a 3xx ``RedirectError``, a body of another shape ``UnexpectedResponseError``."""
        reply = self.exchange(method, path, body, headers)
        if reply.status not in ok:
            raise api_error(reply.status, reply.body, retry_after_seconds(reply.header("Retry-After")))
        if not isinstance(reply.body, dict):
            raise UnexpectedResponseError(
                f"{method} {path} answered {reply.status} with {_describe(reply)}, not the API's JSON object "
                f"(is {self.api_url} the omnireel API?)",
                reply.status, reply.headers, reply.body,
            )  # fmt: skip
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
                reply = self._attempt(request)
            except (OSError, http.client.HTTPException) as exc:  # refused, reset, timeout, bad status line, cut short
                if last:
                    raise TransportError(_failure(self.api_url, exc)) from exc
                self._pause(attempt, None)
                continue
            if 300 <= reply.status < 400:
                location = reply.header("Location")
                raise RedirectError(
                    f"{method} {path} answered {reply.status}, a redirect to {location!r}: not followed (it would "
                    "carry this request's signature there)",
                    reply.status, reply.headers, reply.body, location,
                )  # fmt: skip
            if reply.status in RETRYABLE_STATUS and not last:
                self._pause(attempt, reply.header("Retry-After"), reply.status)
                continue
            return reply
        raise AssertionError("unreachable")  # pragma: no cover - the last attempt returns or raises

    def _attempt(self, request: urllib.request.Request) -> Reply:
        """One exchange, its body read whole (a body cut short raises here, inside the retry loop)."""
        try:
            with self._opener.open(request, timeout=self.timeout) as response:
                return Reply(response.status, dict(response.headers.items()), _decode(response.read()))
        except urllib.error.HTTPError as exc:  # an answer: 3xx, 4xx, 5xx
            with contextlib.closing(exc):
                return Reply(exc.code, dict((exc.headers or {}).items()), _decode(exc.read()))

    def _pause(self, attempt: int, retry_after: str | None, status: int | None = None) -> None:
        delay = self.backoff_s * 2 ** (attempt - 1) * (0.5 + random.random())  # jitter, not crypto
        seconds = retry_after_seconds(retry_after)
        if seconds is not None:
            delay = max(delay, min(seconds, MAX_RATE_LIMIT_WAIT_S if status == 429 else MAX_RETRY_AFTER_S))
        time.sleep(delay)


def retry_after_seconds(value: str | None) -> float | None:
    """A ``Retry-After`` of delay-seconds (ASCII digits: "²".isdigit() is True); None for anything else."""
    if value and re.fullmatch(r"[0-9]{1,6}", value.strip()):
        return float(value)
    return None


def parse_answer(reply: Reply, build: Callable[[dict[str, Any]], T]) -> T:
    """``build(reply.body)``; an answer without the fields and types the API sends is an ``UnexpectedResponseError``
    (not a ``KeyError`` or ``TypeError`` from deep inside the models)."""
    try:
        return build(reply.body)
    except SHAPE_ERRORS as exc:
        raise UnexpectedResponseError(
            f"an answer {reply.status} is not shaped as the API's ({type(exc).__name__}: {str(exc)[:200]})",
            reply.status, reply.headers, reply.body,
        ) from exc  # fmt: skip


def _describe(reply: Reply) -> str:
    body = reply.body
    if body is None:
        return "an empty body (or JSON null)"
    if isinstance(body, list):
        return "a JSON array"
    if isinstance(body, str):
        kind = reply.header("Content-Type") or "no Content-Type"
        return f"a body that is not JSON ({kind}: {body[:80]!r})"
    return f"JSON {type(body).__name__} {str(body)[:80]!r}"


def _failure(api_url: str, exc: BaseException) -> str:
    if isinstance(exc, http.client.HTTPException) and not isinstance(exc, ConnectionError):
        return f"the answer of the API at {api_url} broke off or is not HTTP: {type(exc).__name__}: {str(exc)[:200]}"
    return f"the API at {api_url} is unreachable: {str(getattr(exc, 'reason', None) or exc) or type(exc).__name__}"


def _decode(raw: bytes) -> Any:
    try:
        return json.loads(raw) if raw else None
    except (ValueError, RecursionError):  # not JSON, not UTF-8, or nested deeper than the parser goes
        return raw.decode(errors="replace")
