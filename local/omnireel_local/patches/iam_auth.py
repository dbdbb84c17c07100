"""IAM, enforced on every call of the local AWS (switched on after provisioning: ``enforce_iam``): the moto patch that
wires moto's request handling to ``omnireel_local.iam`` -- SigV4 verified by ``iam/sigv4.py``, the decision taken by
``iam/decision.py`` / ``iam/policy.py`` -- with S3's existence rule and bucket policies (local/IAM.md).

``install_iam`` (patch 9) installs three named patches: ``install_authorisation`` (9: ``authenticate_and_authorise``
on every request), ``install_missing_key_rule`` (10: ``missing_key_answer``) and ``install_bucket_policies`` (11)."""

from __future__ import annotations

import logging
import time
from datetime import UTC, datetime
from typing import Any
from urllib.parse import ParseResult, parse_qs, urlencode, urlparse

from ..iam import decision as iam_decision
from ..iam import policy as iam_policy
from ..iam import sigv4
from ..iam.identities import session_expired
from .cards import MOTO_BUG, Context, Patch

log = logging.getLogger("omnireel_local.moto")


def enforce_iam(moto_endpoint: str) -> None:
    """Switch moto's authentication on: from now on every request must be signed by a known key and is authorised."""
    import httpx

    httpx.post(f"{moto_endpoint}/moto-api/reset-auth", content=b"0", timeout=10).raise_for_status()


# Signing names whose IAM action prefix differs (the credential scope names the signing name).
_IAM_PREFIX = {"monitoring": "cloudwatch", "email": "ses"}
# API operations whose IAM action has another name (Service Authorization Reference).
_ACTION_ALIASES = {
    "lambda:Invoke": "lambda:InvokeFunction",
    "lambda:InvokeWithResponseStream": "lambda:InvokeFunction",
    # SQS batch calls are authorised as their single-message action (there is no sqs:SendMessageBatch permission).
    "sqs:SendMessageBatch": "sqs:SendMessage",
    "sqs:DeleteMessageBatch": "sqs:DeleteMessage",
    "sqs:ChangeMessageVisibilityBatch": "sqs:ChangeMessageVisibility",
}
# Query-protocol and REST-XML services answer errors in XML; the others in JSON.
_JSON_SERVICES = {"dynamodb", "lambda", "states", "sagemaker", "events", "secretsmanager", "logs", "sqs"}


def install_iam(ctx: Context) -> None:
    """Patches 9-11: IAM enforcement as AWS does it (off until ``enforce_iam``). See iam/policy.py for the evaluator."""
    install_authorisation()
    install_missing_key_rule()
    install_bucket_policies()


def install_authorisation() -> None:
    """Patch 9: every request moto handles is authenticated and authorised by ``authenticate_and_authorise``."""
    from moto.core.authorization import ActionAuthenticatorMixin

    ActionAuthenticatorMixin._authenticate_and_authorize_action = authenticate_and_authorise


def install_missing_key_rule() -> None:
    """Patch 10: S3 answers a GET/HEAD of a missing key with 403 AccessDenied unless the caller may s3:ListBucket the
    bucket (``missing_key_answer``)."""
    from moto.s3.responses import S3Response

    moto_key_response = S3Response.key_response

    def key_response(self: Any, request: Any, full_url: str, headers: Any) -> Any:
        return missing_key_answer(self, request, full_url, moto_key_response(self, request, full_url, headers))

    S3Response.key_response = key_response


def install_bucket_policies() -> None:
    """Patch 11: bucket policies: moto's S3 handler evaluates them itself with its Condition-blind evaluator (the
    template's DenyInsecureTransport would deny every call). Patch 9 evaluates them with the identity policies
    instead."""
    from moto.iam import access_control
    from moto.s3.models import FakeBucket

    FakeBucket.get_permission = lambda self, action, resource: access_control.PermissionResult.NEUTRAL


def error(service: str, code: str, message: str, status: int) -> Exception:
    """The service's own error for a refused call: S3's XML error, a JSON or a query-protocol (XML) error."""
    from moto.core.exceptions import JsonRESTError
    from moto.core.exceptions import _RESTError as RESTError
    from moto.s3.exceptions import S3ClientError

    if service == "s3":
        return S3ClientError(code, message)  # its HTTP status comes from moto's S3 error table
    exc: Any
    if service in _JSON_SERVICES:
        exc = JsonRESTError(code if code.endswith("Exception") else f"{code}Exception", message)
    else:
        exc = RESTError(code, message)
    exc.code = status
    return exc


# 9. Authentication and authorisation of every request (moto's own evaluator: see iam/policy.py's docstring).
#    SigV4 header auth with a known IAM user key or STS session (expired sessions refused: moto never expires
#    them), presigned S3 URLs, unsigned requests refused; then identity + resource policies with Conditions.
def authenticate_and_authorise(self: Any, iam_request_cls: type, resource: str = "*") -> None:
    """In place of moto's ``ActionAuthenticatorMixin._authenticate_and_authorize_action`` (``self``: moto's response
    handler of the call): who signed the call (``authenticate``), then the decision (``iam/decision.py``)."""
    from moto import settings as moto_settings
    from moto.core.authorization import ActionAuthenticatorMixin
    from moto.iam import access_control

    if ActionAuthenticatorMixin.request_count < moto_settings.INITIAL_NO_AUTH_ACTION_COUNT:
        ActionAuthenticatorMixin.request_count += 1
        return
    if self.headers.get("X-Amz-Target") in ActionAuthenticatorMixin.PUBLIC_OPERATIONS:
        return
    s3 = iam_request_cls is access_control.S3IAMRequest
    parsed = urlparse(self.uri)
    path = self.raw_path + (f"?{parsed.query}" if parsed.query else "")
    account = self.current_account
    raw_action = self._get_action()
    raw_action = raw_action[0] if isinstance(raw_action, list) else raw_action
    key, service_prefix = authenticate(self, iam_request_cls, s3=s3, parsed=parsed, path=path, action=raw_action)
    prefix = _IAM_PREFIX.get(service_prefix, service_prefix)
    action = _ACTION_ALIASES.get(f"{prefix}:{raw_action}", f"{prefix}:{raw_action}")
    if action == "sts:GetCallerIdentity":
        return
    if resource == "*" and not s3:
        resource = iam_policy.resource_arn(prefix, action, path, self.data, self.raw_body, self.region, account)
    principal = iam_policy.Principal(key.arn, account)
    context = iam_policy.request_context(prefix, action, path, self.data, self.raw_body, principal)
    decision, why, action, resource = iam_decision.decide_call(
        key, action, resource, context, principal, body=self.raw_body, region=self.region, account=account
    )
    missing_bucket = s3 and action != "s3:CreateBucket" and not _bucket_exists(resource, account)
    if decision != iam_policy.ALLOW and missing_bucket:
        # S3 answers a bucket that does not exist with 404 NoSuchBucket whoever asks (the well-known existence
        # oracle: 403 means "exists, not yours"); moto's handler answers it. The AWS sample's deploy.py reads
        # HeadBucket's 404 as "create it" (issue 27 item 8). CreateBucket itself is still authorised.
        self._omnireel_caller = (key, principal)
        return
    if decision != iam_policy.ALLOW:
        message = f"User: {key.arn} is not authorized to perform: {action} on resource: {resource} because {why}"
        log.info("IAM: denied %s", message)
        raise error("s3" if s3 else prefix, "AccessDenied", message, 403)
    self._omnireel_caller = (key, principal)


def authenticate(self: Any, iam_request_cls: type, *, s3: bool, parsed: ParseResult, path: str,
                 action: str) -> tuple[Any, str]:  # fmt: skip
    """moto's access key that signed the call (a SigV4 header or a presigned S3 URL) and the service it was signed for;
    raises the service's error for an unsigned call, an expired session or a signature that does not match."""
    account = self.current_account
    if "Authorization" not in self.headers:
        query = parse_qs(parsed.query, keep_blank_values=True)
        if not (s3 and ("X-Amz-Credential" in query or "AWSAccessKeyId" in query)):
            service = "s3" if s3 else (self.service_name or "")
            raise error(service, "AccessDenied" if s3 else "MissingAuthenticationToken",
                        "Request is missing Authentication Token", 403)  # fmt: skip
        key = presigned_key(self, query, account)
        if session_expired(key._access_key_id, account):  # a URL cannot outlive the credentials that signed it
            raise error("s3", "ExpiredToken", "The provided token has expired.", 400)
        return key, "s3"
    iam_request = iam_request_cls(
        account_id=account, method=self.method, path=path, data=self.data, body=self.raw_body,
        headers=self.headers, action=action,
    )  # fmt: skip
    key = iam_request._access_key
    service_prefix = iam_request._service
    if session_expired(iam_request._access_key._access_key_id, account):
        raise error(service_prefix, "ExpiredToken", "The security token included in the request is expired",
                    400 if s3 else 403)  # fmt: skip
    if not signature_matches(iam_request):
        iam_request._raise_signature_does_not_match()
    return key, service_prefix


def presigned_key(self: Any, query: dict[str, list[str]], account: str) -> Any:
    """Verify a presigned S3 URL (SigV4 query authentication); returns moto's access key that signed it.

    SigV2 (``AWSAccessKeyId=...&Signature=...``) is refused as S3 refuses it on buckets created after June 2020.
    """
    from moto.iam import access_control

    def first(name: str) -> str:
        return (query.get(name) or [""])[0]

    if "X-Amz-Credential" not in query:
        raise error("s3", "InvalidRequest", "The authorization mechanism you have provided is not supported. "
                    "Please use AWS4-HMAC-SHA256.", 400)  # fmt: skip
    token = first("X-Amz-Security-Token") or first("x-amz-security-token")
    access_key_id = first("X-Amz-Credential").split("/", 1)[0]
    signed_at = datetime.strptime(first("X-Amz-Date"), "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC)
    expires = signed_at.timestamp() + int(first("X-Amz-Expires") or 0)
    if time.time() > expires:
        raise error("s3", "AccessDenied", "Request has expired", 403)
    try:
        key = iam_decision.access_key(account, access_key_id, token or None)
    except access_control.CreateAccessKeyFailure as exc:
        raise error("s3", "InvalidAccessKeyId" if exc.reason == "InvalidId" else "InvalidToken",
                    "The AWS Access Key Id you provided does not exist in our records.", 403) from exc  # fmt: skip
    url = f"http://{self.headers.get('Host', 'localhost')}{self.raw_path}?{urlparse(self.uri).query}"
    scope_region = ([*first("X-Amz-Credential").split("/"), "", "", ""])[2]
    expected = sigv4.presigned_signature(method=self.method, url=url, headers=list(self.headers.items()),
                                         credentials=key.create_credentials(), region=scope_region)  # fmt: skip
    if not sigv4.matches(expected, first("X-Amz-Signature")):
        raise error("s3", "SignatureDoesNotMatch", "The request signature we calculated does not match the "
                    "signature you provided. Check your key and signing method.", 403)  # fmt: skip
    return key


def signature_matches(request: Any) -> bool:
    """The request's SigV4 header signature, verified by ``sigv4`` (botocore's canonical request, the body as
    received). moto hands some requests over transformed, so each spelling it may have made is tried: REST paths
    without their trailing slash (Lambda ListFunctions), and a form POST whose body the form parser consumed
    (its parameters re-encoded as moto does)."""
    authorization = request._headers["Authorization"]
    signed = request._get_string_between("SignedHeaders=", ",", authorization).split(";")
    given = request._get_string_between("Signature=", ",", authorization)
    headers = list(request._create_headers_for_aws_request(signed, request._headers).items())
    date = next((v for k, v in headers if k.lower() == "x-amz-date"), "")
    declared = next((v for k, v in headers if k.lower() == "x-amz-content-sha256"), None)
    host = next((v for k, v in headers if k.lower() == "host"), "localhost")
    credentials = request._access_key.create_credentials()
    path, _, query = request._path.partition("?")
    paths = [request._path] if path.endswith("/") else [request._path, f"{path}/" + (f"?{query}" if query else "")]
    bodies: list[bytes] = [_as_bytes(request._body)]
    if not request._body and request._method == "POST" and request._data:
        bodies.append(urlencode(list(request._data.items()), doseq=True).encode())
    for candidate in paths:
        for body in bodies:
            s3 = request._service == "s3"
            payload = sigv4.s3_payload_hash(declared, body) if s3 else sigv4.received_body_hash(body)
            if payload is None:
                continue
            expected = sigv4.header_signature(
                method=request._method, url=f"http://{host}{candidate}", headers=headers, body=body,
                signed=signed, credentials=credentials, service=request._service, region=request._region,
                amz_date=date, payload=payload,
            )  # fmt: skip
            if sigv4.matches(expected, given):
                return True
    return False


def _as_bytes(body: Any) -> bytes:
    if body is None:
        return b""
    return body.encode() if isinstance(body, str) else bytes(body)


def _bucket_exists(resource: str, account: str) -> bool:
    from moto.s3.models import s3_backends

    bucket = resource.removeprefix("arn:aws:s3:::").split("/", 1)[0]
    if not bucket or bucket == "*":
        return True  # ListBuckets and the like: not about one bucket
    return bucket in s3_backends[account]["aws"].buckets


# 10. S3 answers a GET/HEAD of a missing key with 403 AccessDenied unless the caller may s3:ListBucket the bucket
#     (a 404 would tell a caller without list rights which keys do not exist). The ListBucket check sees the key
#     as s3:prefix, so a prefix-scoped ListBucket grant is honoured (as AWS does; ceph/ceph#68577 documents it).
def missing_key_answer(self: Any, request: Any, full_url: str, answer: Any) -> Any:
    """moto's ``answer`` to a key request (``self``: moto's S3 response handler), or 403 for a missing key the caller
    may not list."""
    status, response_headers, body = answer
    caller = getattr(self, "_omnireel_caller", None)
    if status != 404 or request.method not in ("GET", "HEAD") or caller is None:
        return status, response_headers, body
    if b"NoSuchBucket" in (body if isinstance(body, bytes) else str(body).encode()):
        return status, response_headers, body
    key, principal = caller
    bucket, object_key = self.parse_bucket_name_from_url(request, full_url), self.parse_key_name()
    resource = f"arn:aws:s3:::{bucket}"
    context = {**iam_policy.request_context("s3", "s3:GetObject", "/", {}, b"", principal), "s3:prefix": object_key}
    if iam_decision.decide(key, "s3:ListBucket", resource, context, self.current_account)[0] == iam_policy.ALLOW:
        return status, response_headers, body
    if request.method == "HEAD":
        return 403, {"status": 403}, b""
    return self.serialized(_access_denied_result())


def _access_denied_result() -> Any:
    from moto.core.responses import ActionResult
    from moto.s3.exceptions import S3AccessDeniedError

    return ActionResult(S3AccessDeniedError())


CARDS = [
    Patch(
        "9",
        "IAM on every call: SigV4, then identity and resource policies with Conditions",
        aws="Every call is signed (SigV4 header or presigned URL, within its expiry; expired sessions refused) and "
        "allowed by the caller's and the resource's policies, Conditions included, on the call's resource ARN.",
        moto="Signs its parsed parameters (every bodyless GET failed), never expires STS sessions, ignores most "
        'Conditions (an Allow whose Condition fails became an explicit Deny), authorises non-S3 calls against "*" '
        "and crashes on a service-principal trust policy.",
        test="tests/e2e/test_iam.py::test_an_unknown_access_key_is_refused_by_the_local_aws",
        upstream=MOTO_BUG,
        installs=install_iam,
    ),
    Patch(
        "10",
        "A missing key is 403 without s3:ListBucket",
        aws="GET/HEAD of a missing key is 404 only for a caller who may s3:ListBucket the bucket (the key as "
        "s3:prefix), else 403 AccessDenied.",
        moto="404 NoSuchKey for everyone.",
        test="tests/e2e/test_iam.py::test_a_missing_key_is_403_without_list_bucket_and_404_with_it",
        upstream=MOTO_BUG,
        installs=None,
        installed_with="9",
    ),
    Patch(
        "11",
        "Bucket policies decided by patch 9's evaluator",
        aws="Bucket policies are evaluated with the identity policies, Conditions included (aws:SecureTransport).",
        moto="The S3 handler evaluates bucket policies itself, Condition-blind: DenyInsecureTransport denied every "
        "call.",
        test="tests/e2e/test_pipeline.py::test_s3_drop_path_produces_a_decodable_mp4",
        upstream=MOTO_BUG,
        installs=None,
        installed_with="9",
    ),
]
