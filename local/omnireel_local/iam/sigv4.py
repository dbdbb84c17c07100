"""Verifying a SigV4 signature, one way for every door of the local stack: header auth on the local AWS's API calls
(``patches.iam_auth`` patch 9), presigned S3 URLs (patch 9) and the HTTP API's front door (``authorizer``).

Every canonical request is botocore's own (``SigV4Auth`` / ``S3SigV4QueryAuth``: path normalisation, query and header
canonicalisation, the string to sign, the signing key), restricted to the headers the client says it signed; nothing
here builds a canonical request by hand. What differs between the doors is only the payload line, and it is always
decided from the body *as received*:

- the front door (API Gateway) and every service but S3: the SHA-256 of the received body, whatever the request
  declares (a signed ``X-Amz-Content-SHA256`` of another body, or ``UNSIGNED-PAYLOAD``, does not pass);
- S3 header auth: the declared ``X-Amz-Content-SHA256`` -- ``UNSIGNED-PAYLOAD`` and the streaming forms as S3 takes
  them (chunk signatures are not verified locally), a hex digest only if it is the received body's;
- a presigned URL: ``UNSIGNED-PAYLOAD``, as S3 defines query authentication.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Iterable
from typing import Any
from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

from botocore.auth import UNSIGNED_PAYLOAD, S3SigV4QueryAuth, SigV4Auth
from botocore.awsrequest import AWSRequest, HTTPHeaders
from botocore.credentials import Credentials

STREAMING_PREFIX = "STREAMING-"


def received_body_hash(body: bytes) -> str:
    return hashlib.sha256(body).hexdigest()


def s3_payload_hash(declared: str | None, body: bytes) -> str | None:
    """The payload line S3 signs over: the declared hash if S3 accepts it for ``body``, else None (a mismatch)."""
    if declared is None:
        return received_body_hash(body)
    if declared == UNSIGNED_PAYLOAD or declared.startswith(STREAMING_PREFIX):
        return declared
    return declared if hmac.compare_digest(declared, received_body_hash(body)) else None


class _Canonical:
    """botocore's canonical request over exactly the ``signed`` headers, with ``payload`` as its last line."""

    def __init__(self, signed: Iterable[str], payload: str) -> None:
        self._signed = {name.lower() for name in signed}
        self._payload = payload

    def headers_to_sign(self, request: AWSRequest) -> HTTPHeaders:
        headers = HTTPHeaders()
        for name, value in request.headers.items():
            if name.lower() in self._signed:
                headers[name.lower()] = value
        return headers

    def canonical_request(self, request: AWSRequest) -> str:
        text: str = super().canonical_request(request)  # type: ignore[misc]
        return text.rsplit("\n", 1)[0] + "\n" + self._payload

    def signature_of(self, request: AWSRequest) -> str:
        """botocore's signature of ``request`` with this canonical request."""
        signer: Any = self
        return str(signer.signature(signer.string_to_sign(request, self.canonical_request(request)), request))


class _HeaderVerifier(_Canonical, SigV4Auth):
    def __init__(self, credentials: Credentials, service: str, region: str, signed: Iterable[str], payload: str,
                 normalize_path: bool) -> None:  # fmt: skip
        _Canonical.__init__(self, signed, payload)
        SigV4Auth.__init__(self, credentials, service, region)
        self._normalize = normalize_path

    def _normalize_url_path(self, path: str) -> str:
        return super()._normalize_url_path(path) if self._normalize else path  # S3 signs the path as sent


class _QueryVerifier(_Canonical, S3SigV4QueryAuth):
    def __init__(self, credentials: Credentials, region: str, signed: Iterable[str]) -> None:
        _Canonical.__init__(self, signed, UNSIGNED_PAYLOAD)
        S3SigV4QueryAuth.__init__(self, credentials, "s3", region)


def _request(method: str, url: str, headers: Iterable[tuple[str, str]], body: bytes, amz_date: str) -> AWSRequest:
    """The request as received (``_Canonical.headers_to_sign`` picks the signed headers out of it)."""
    request = AWSRequest(method=method, url=url, data=body)
    for name, value in headers:
        request.headers[name] = value  # HTTPHeaders keeps repeated headers (signed as "a,b")
    request.context["timestamp"] = amz_date
    return request


def header_signature(*, method: str, url: str, headers: Iterable[tuple[str, str]], body: bytes,
                     signed: Iterable[str], credentials: Credentials, service: str, region: str, amz_date: str,
                     payload: str) -> str:  # fmt: skip
    """The signature of an ``Authorization: AWS4-HMAC-SHA256 ...`` request: ``url`` is scheme, host, the path as sent
    and the raw query; ``payload`` the payload line (``received_body_hash`` / ``s3_payload_hash``)."""
    verifier = _HeaderVerifier(credentials, service, region, signed, payload, normalize_path=service != "s3")
    return verifier.signature_of(_request(method, url, headers, body, amz_date))


def presigned_signature(*, method: str, url: str, headers: Iterable[tuple[str, str]], credentials: Credentials,
                        region: str) -> str:  # fmt: skip
    """The signature of a presigned S3 URL (``url`` with its query as sent, ``X-Amz-Signature`` included or not)."""
    parts = urlsplit(url)
    query = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if k != "X-Amz-Signature"]
    params = dict(query)
    signed = params.get("X-Amz-SignedHeaders", "host").split(";")
    unsigned_url = urlunsplit((parts.scheme, parts.netloc, parts.path, urlencode(query, quote_via=quote, safe="-_.~"),
                               ""))  # fmt: skip
    verifier = _QueryVerifier(credentials, region, signed)
    return verifier.signature_of(_request(method, unsigned_url, headers, b"", params.get("X-Amz-Date", "")))


def matches(expected: str, given: str) -> bool:
    return hmac.compare_digest(expected, given)
