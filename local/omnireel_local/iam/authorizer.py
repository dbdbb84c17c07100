"""API Gateway's IAM authorizer, locally: SigV4 (service ``execute-api``) checked against the local AWS's IAM and STS.

The front door runs in the moto server's process, so the authorizer reads moto's IAM backend (users' access keys,
their policies) and STS backend (assumed-role sessions and their tokens) directly. Like API Gateway it
- refuses a request without a SigV4 ``Authorization`` header (403 ``Forbidden``), with a malformed one, with an
  unknown, inactive or expired access key, with a session key and no (or the wrong) ``X-Amz-Security-Token``, with a
  signature that does not match, or with an ``X-Amz-Date`` more than 5 minutes off;
- allows the call only if the principal's policies allow ``execute-api:Invoke`` on the route's ARN
  (``arn:aws:execute-api:<region>:<account>:<api-id>/<stage>/<METHOD>/<path>``), decided as every other call of the
  local AWS is (``decision``: the identity policies moto stores for the key -- inline, attached, group, role --
  evaluated by ``policy`` with their Conditions; the API has no resource policy; no SCP, permissions boundary
  or session policy);
- reports the caller as ``requestContext.authorizer.iam`` (``userArn``, ``userId``, ``callerId``, ``accessKey``,
  ``accountId``) with the values API Gateway reports: for an assumed role the STS ARN with its session name; as
  ``userId``/``callerId`` the IAM unique id, ``AIDA...`` for a user and ``AROA...:<session>`` for a role session
  (``patches.iam_ids`` gives moto's principals these ids: a user or role re-created with the same name gets a new
  one). The API keys its callers on it (``omnireel.core.caller``);
- refuses a role session whose role was deleted since it was assumed (re-created with the same name or not): on AWS
  the session's role id names no role any more, so nothing allows its calls.

The account root has no access key in moto, so root callers cannot be tested locally.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any

from botocore.credentials import Credentials

from . import decision, sigv4
from .policy import ALLOW, DENY, NEUTRAL, Principal, request_context

SERVICE = "execute-api"
ACTION = "execute-api:Invoke"
MAX_SKEW = timedelta(minutes=5)  # API Gateway refuses a signature dated more than 5 minutes from its clock
_AUTH = re.compile(
    r"^AWS4-HMAC-SHA256\s+Credential=(?P<credential>[^,\s]+),\s*SignedHeaders=(?P<signed>[^,\s]+),\s*"
    r"Signature=(?P<signature>[0-9a-f]{64})\s*$"
)
INVALID_TOKEN = "The security token included in the request is invalid."  # noqa: S105 - a message, not a secret
EXPIRED_TOKEN = "The security token included in the request is expired"  # noqa: S105 - a message, not a secret
SIGNATURE_MISMATCH = (
    "The request signature we calculated does not match the signature you provided. Check your AWS Secret Access "
    "Key and signing method. Consult the service documentation for details."
)


class Refused(Exception):
    """API Gateway's answer to a request its IAM authorizer refuses: 403 ``{"message": ...}``."""

    def __init__(self, message: str, error_type: str, status: int = 403):
        super().__init__(message)
        self.message = message
        self.error_type = error_type
        self.status = status


def _held_key(access_key: str) -> tuple[str, str, Any, Any] | None:
    """``(account id, partition, IAM backend, moto's key)`` of the IAM that holds ``access_key``, looked up in the
    partitions that exist only (indexing moto's backends by partition would create one)."""
    from moto.iam.models import iam_backends

    for account_id, account in list(iam_backends.items()):
        for partition in list(account.keys()):
            backend = account[partition]
            key = backend.access_keys.get(access_key)
            if key is not None:
                return account_id, partition, backend, key
    return None


def key_account(access_key: str, default: str) -> str:
    """The account whose IAM holds ``access_key``, else ``default``: moto's ``get_account_id_from`` without creating
    the partitions nobody uses (moto patch 31)."""
    held = _held_key(access_key)
    return held[0] if held is not None else default


def lookup(access_key: str, session_token: str | None) -> Principal:
    """The IAM user or assumed-role session that owns ``access_key`` in the local AWS (moto's backends), found once:
    the key's secret, the id the front door reports and moto's view of the key that the decision reads all come from
    this one lookup."""
    from moto.sts.models import sts_backends

    held = _held_key(access_key)
    if held is None:
        raise Refused(INVALID_TOKEN, "UnrecognizedClientException")
    account_id, partition, backend, key = held
    if key.status != "Active":
        raise Refused(INVALID_TOKEN, "UnrecognizedClientException")
    secret = key.secret_access_key
    if key.user_name:  # a long-term key of an IAM user
        if session_token is not None:
            raise Refused(INVALID_TOKEN, "UnrecognizedClientException")
        user = backend.get_user(key.user_name)
        view = decision.found_key(account_id, partition, access_key, secret, user_name=user.name)
        return Principal(user.arn, account_id, access_key=access_key, user_id=user.id, secret_key=secret,
                         key=view)  # fmt: skip
    session = sts_backends[account_id][partition].get_assumed_role_from_access_key(access_key)
    if session is None or session_token != session.session_token:
        raise Refused(INVALID_TOKEN, "UnrecognizedClientException")
    if session.expiration.replace(tzinfo=UTC) <= datetime.now(UTC):
        raise Refused(EXPIRED_TOKEN, "ExpiredTokenException")
    role_id = getattr(session, "role_id", None)  # patches.iam_ids: the role's id when it was assumed
    try:
        gone = role_id is None or backend.get_role_by_arn(arn=session.role_arn).id != role_id
    except Exception:  # noqa: BLE001 - moto's NoSuchEntity: the role is gone
        gone = True
    view = decision.found_key(account_id, partition, access_key, secret, session=session)
    return Principal(session.arn, account_id, access_key=access_key, user_id=session.user_id,
                     secret_key=secret, session_token=session_token, role_gone=gone, key=view)  # fmt: skip


def authorize(*, method: str, target: str, headers: list[tuple[str, str]], body: bytes, region: str,
              route_arn: str, now: datetime | None = None) -> Principal:  # fmt: skip
    """Check the request's SigV4 signature and the caller's ``execute-api:Invoke`` permission; raise ``Refused``."""
    lowered: dict[str, list[str]] = {}
    for name, value in headers:
        lowered.setdefault(name.lower(), []).append(value)
    authorization = lowered.get("authorization", [""])[-1]
    if not authorization:
        raise Refused("Forbidden", "ForbiddenException")
    match = _AUTH.match(authorization)
    if not match:
        raise Refused(
            f"Authorization header requires 'Credential', 'SignedHeaders' and 'Signature' parameters "
            f"(AWS4-HMAC-SHA256). Authorization={authorization[:64]}",
            "IncompleteSignatureException",
        )
    parts = match["credential"].split("/")
    if len(parts) != 5 or parts[4] != "aws4_request":
        raise Refused(f"Credential should be scoped to a valid region, not {match['credential'][:64]!r}.",
                      "IncompleteSignatureException")  # fmt: skip
    access_key, day, scope_region, service = parts[:4]
    if service != SERVICE or scope_region != region:
        raise Refused(
            f"Credential should be scoped to correct service and region: '{SERVICE}' in '{region}'.",
            "InvalidSignatureException",
        )
    amz_date = lowered.get("x-amz-date", [""])[-1]
    try:
        signed_at = datetime.strptime(amz_date, "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC)
    except ValueError:
        raise Refused("Authorization header requires existence of either a 'X-Amz-Date' or a 'Date' header.",
                      "IncompleteSignatureException") from None  # fmt: skip
    if day != amz_date[:8]:
        raise Refused("Credential should be scoped to a valid date.", "InvalidSignatureException")
    signed = match["signed"].split(";")
    if "host" not in signed:
        raise Refused("'Host' must be a 'SignedHeader' in the AWS Authorization.", "IncompleteSignatureException")
    clock = now or datetime.now(UTC)
    if signed_at < clock - MAX_SKEW:
        raise Refused(f"Signature expired: {amz_date} is now earlier than {_stamp(clock - MAX_SKEW)} "
                      f"({_stamp(clock)} - 5 min.)", "InvalidSignatureException")  # fmt: skip
    if signed_at > clock + MAX_SKEW:
        raise Refused(f"Signature not yet current: {amz_date} is still later than {_stamp(clock + MAX_SKEW)} "
                      f"({_stamp(clock)} + 5 min.)", "InvalidSignatureException")  # fmt: skip

    token = lowered.get("x-amz-security-token", [None])[-1]
    principal = lookup(access_key, token)  # the one lookup of the key

    # The payload line is the hash of the body as received, as API Gateway computes it: a signed X-Amz-Content-SHA256
    # of another body (or "UNSIGNED-PAYLOAD") does not pass (issue 27 item 7). Canonicalisation is botocore's (sigv4).
    expected = sigv4.header_signature(
        method=method, url=f"http://{lowered.get('host', [''])[-1]}{target}", headers=headers, body=body,
        signed=signed, credentials=Credentials(access_key, principal.secret_key, token), service=SERVICE,
        region=region, amz_date=amz_date, payload=sigv4.received_body_hash(body),
    )  # fmt: skip
    if not sigv4.matches(expected, match["signature"]):
        raise Refused(SIGNATURE_MISMATCH, "InvalidSignatureException")

    verdict = NEUTRAL if principal.role_gone else _decide(principal, target, body, route_arn)[0]
    if verdict != ALLOW:
        raise Refused(
            f"User: {principal.arn} is not authorized to perform: execute-api:Invoke on resource: {route_arn}"
            + (" with an explicit deny" if verdict == DENY else ""),
            "AccessDeniedException",
        )
    return principal


def _decide(principal: Principal, target: str, body: bytes, route_arn: str) -> tuple[str, str]:
    """``execute-api:Invoke`` on the route, decided as every call of the local AWS is (``decision``): the caller's
    policies as moto stores them, evaluated by ``policy`` with their Conditions (``aws:username``,
    ``aws:PrincipalArn``, ``aws:SourceIp``, ...)."""
    account, key = principal.account_id, principal.key  # moto's view of the key, from the one lookup
    caller = Principal(key.arn, account)  # as the API handlers' door sees it: moto's ARN of the key
    context = request_context(SERVICE, ACTION, target, {}, body, caller)
    return decision.decide(key, ACTION, route_arn, context, account)


def _stamp(moment: datetime) -> str:
    return moment.strftime("%Y%m%dT%H%M%SZ")
