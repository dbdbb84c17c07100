"""The IAM decision of one call, for every door into the local AWS: moto's API handlers (``patches.iam_auth`` patch 9,
with S3's existence rule, patch 10) and the HTTP API's front door (``authorizer``, ``execute-api:Invoke``).

One way to gather what governs a call -- the caller's identity policies as moto stores them (an IAM user's inline,
attached and group policies; a role session's inline and attached role policies: moto's ``collect_policies``) and the
resource's own policy (a bucket's, a topic's or a queue's) -- and one evaluator for them (``policy.evaluate``,
Conditions included): an explicit Deny anywhere wins, else an Allow in either allows, else the call is denied.
"""

from __future__ import annotations

import contextlib
from typing import Any

from .policy import ALLOW, DENY, NEUTRAL, Principal, document, evaluate


def access_key(account: str, access_key_id: str, session_token: str | None) -> Any:
    """moto's view of the key that signed a call (``IAMUserAccessKey`` / ``AssumedRoleAccessKey``): its ARN and its
    policies. Raises moto's ``CreateAccessKeyFailure`` for a key it does not know."""
    from moto.iam import access_control

    headers = {"X-Amz-Security-Token": session_token} if session_token else {}
    return access_control.create_access_key(account, "aws", access_key_id, headers)


def identity_documents(key: Any) -> list[dict[str, Any]]:
    """The caller's identity policy documents; none for a session of a role deleted since (nothing is allowed)."""
    try:
        policies = key.collect_policies()
    except Exception:  # noqa: BLE001 - moto raises its NoSuchEntity for a role that no longer exists
        return []
    return [document(p) for p in policies]


def resource_policies(resource: str, account: str) -> list[dict[str, Any]]:
    """The resource policy that governs the call's resource: a bucket's, a topic's or a queue's."""
    from moto.s3.models import s3_backends

    policy: Any = None
    if resource.startswith("arn:aws:s3:::") and resource != "arn:aws:s3:::*":
        bucket = s3_backends[account]["aws"].buckets.get(resource[len("arn:aws:s3:::") :].split("/", 1)[0])
        policy = bucket.policy if bucket is not None else None
    elif resource.startswith(("arn:aws:sns:", "arn:aws:sqs:")):
        from moto.sns.models import sns_backends
        from moto.sqs.models import sqs_backends

        _, _, service, region, _, name = resource.split(":", 5)
        with contextlib.suppress(Exception):  # an unknown topic or queue: the service answers it
            if service == "sns":
                policy = sns_backends[account][region].get_topic(resource).policy
            else:
                policy = sqs_backends[account][region].get_queue(name).policy
    return [document(policy)] if policy else []


def decide(key: Any, action: str, resource: str, context: dict[str, Any], account: str) -> tuple[str, str]:
    """(``ALLOW`` | ``DENY`` | ``NEUTRAL``, why not) for ``key`` calling ``action`` on ``resource``."""
    principal = Principal(key.arn, account)
    identity = evaluate(identity_documents(key), action, resource, context, principal)
    on_resource = evaluate(
        resource_policies(resource, account), action, resource, context, principal, resource_policy=True
    )
    if DENY in (identity, on_resource):
        return DENY, "an explicit deny in a policy"
    if ALLOW in (identity, on_resource):
        return ALLOW, ""
    return NEUTRAL, "no identity-based policy allows the action"
