"""The IAM decision of one call, for every door into the local AWS: moto's API handlers (``patches.iam_auth`` patch 9,
with S3's existence rule, patch 10) and the HTTP API's front door (``authorizer``, ``execute-api:Invoke``).

One way to gather what governs a call -- the caller's identity policies as moto stores them (an IAM user's inline,
attached and group policies; a role session's inline and attached role policies: moto's ``collect_policies``) and the
resource's own policy (a bucket's, a topic's or a queue's) -- and one evaluator for them (``policy.evaluate``,
Conditions included): an explicit Deny anywhere wins, else an Allow in either allows, else the call is denied.
``decide_call`` adds what a call of the local AWS's API needs on top: a DynamoDB transaction's items each decided on
their own table, and an ``sts:AssumeRole`` also decided by the role's trust policy.
"""

from __future__ import annotations

import contextlib
from typing import Any

from .policy import ALLOW, DENY, NEUTRAL, Principal, document, evaluate, policy_source, transaction_items


def access_key(account: str, access_key_id: str, session_token: str | None) -> Any:
    """moto's view of the key that signed a call (``IAMUserAccessKey`` / ``AssumedRoleAccessKey``): its ARN and its
    policies. Raises moto's ``CreateAccessKeyFailure`` for a key it does not know."""
    from moto.iam import access_control

    headers = {"X-Amz-Security-Token": session_token} if session_token else {}
    return access_control.create_access_key(account, "aws", access_key_id, headers)


def found_key(account: str, partition: str, access_key_id: str, secret: str, *, user_name: str | None = None,
              session: Any = None) -> Any:  # fmt: skip
    """moto's view of a key already found in its IAM backend (``user_name``) or STS backend (``session``): what
    ``access_key`` returns for it, built from what was found instead of searching moto's users and sessions again
    (the front door's one lookup, ``authorizer.lookup``)."""
    from moto.iam import access_control

    view: Any
    if session is None:
        view = object.__new__(access_control.IAMUserAccessKey)
        view._owner_user_name = user_name
    else:
        view = object.__new__(access_control.AssumedRoleAccessKey)
        view._owner_role_name = session.role_arn.split("/")[-1]
        view._session_name = session.session_name
        view._session_token = session.session_token
    view.account_id, view.partition = account, partition
    view._access_key_id, view._secret_access_key = access_key_id, secret
    return view


def identity_policies(key: Any) -> list[Any]:
    """The caller's identity policies as moto stores them; none for a session of a role deleted since (nothing is
    allowed)."""
    try:
        return list(key.collect_policies())
    except Exception:  # noqa: BLE001 - moto raises its NoSuchEntity for a role that no longer exists
        return []


# Evaluations of the same policy texts for the same call (action, resource, condition keys, principal) give the same
# answer: they are kept, by the texts as moto stores them, so a call pays for reading its policies from moto but not
# for parsing and evaluating them again (~6 % of the local AWS's CPU per call; py-spy of a GetItem loop). A changed
# policy is another text, so another key; a policy given as anything but its text is evaluated every time.
_EVALUATIONS: dict[Any, str] = {}
_EVALUATIONS_MAX = 8192


def _source(policy: Any) -> str | None:
    """The JSON text of a policy as moto stores it (what ``document`` parses), or None if it is held as a mapping."""
    source = policy_source(policy)
    return source if isinstance(source, str) else None


def evaluated(policies: list[Any], action: str, resource: str, context: dict[str, Any], principal: Principal, *,
              resource_policy: bool = False) -> str:  # fmt: skip
    """``evaluate`` over moto's stored ``policies``, answered from the kept evaluations when their texts were
    evaluated for this call before."""
    texts = tuple(_source(p) for p in policies)
    key: Any = None
    if None not in texts:
        try:
            key = (texts, action, resource, tuple(sorted(context.items())), principal, resource_policy)
            known = _EVALUATIONS.get(key)
        except TypeError:  # a condition value or a principal field that cannot be a key: evaluate every time
            key = known = None
        if known is not None:
            return known
    verdict = evaluate([document(p) for p in policies], action, resource, context, principal,
                       resource_policy=resource_policy)  # fmt: skip
    if key is not None:
        if len(_EVALUATIONS) >= _EVALUATIONS_MAX:
            _EVALUATIONS.clear()
        _EVALUATIONS[key] = verdict
    return verdict


def resource_policy_sources(resource: str, account: str) -> list[Any]:
    """The resource policy that governs the call's resource, as moto stores it: a bucket's, a topic's or a queue's."""
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
    return [policy] if policy else []


def decide(key: Any, action: str, resource: str, context: dict[str, Any], account: str) -> tuple[str, str]:
    """(``ALLOW`` | ``DENY`` | ``NEUTRAL``, why not) for ``key`` calling ``action`` on ``resource``."""
    principal = Principal(key.arn, account)
    identity = evaluated(identity_policies(key), action, resource, context, principal)
    on_resource = evaluated(
        resource_policy_sources(resource, account), action, resource, context, principal, resource_policy=True
    )
    if DENY in (identity, on_resource):
        return DENY, "an explicit deny in a policy"
    if ALLOW in (identity, on_resource):
        return ALLOW, ""
    return NEUTRAL, "no identity-based policy allows the action"


def decide_call(key: Any, action: str, resource: str, context: dict[str, Any], principal: Principal, *, body: Any,
                region: str, account: str) -> tuple[str, str, str, str]:  # fmt: skip
    """The decision on one call of the local AWS's API (patch 9): (decision, why not, and the action and resource it
    is about). A DynamoDB transaction is allowed only if each item's own action on its own table is (the first refused
    item is named); an allowed ``sts:AssumeRole`` must also be allowed by the role's trust policy."""
    verdict, why = decide(key, action, resource, context, account)
    items = transaction_items(action, body, region, account)
    if items:  # a DynamoDB transaction: every item's own action on its own table must be allowed
        verdict, why = ALLOW, ""
        for item_action, item_resource in items:
            verdict, why = decide(key, item_action, item_resource, context, account)
            if verdict != ALLOW:
                action, resource = item_action, item_resource
                break
    if verdict == ALLOW and action == "sts:AssumeRole" and not _trusts(resource, action, context, principal, account):
        verdict, why = NEUTRAL, "the role's trust policy does not allow the caller"
    return verdict, why, action, resource


def _trusts(role_arn: str, action: str, context: dict[str, Any], principal: Principal, account: str) -> bool:
    """Whether the role's trust policy allows ``principal`` to assume it (an unknown role: moto answers the call)."""
    from moto.iam.models import iam_backends

    try:
        role = iam_backends[account]["aws"].get_role_by_arn(role_arn)
        trust = document(role.assume_role_policy_document)
    except Exception:  # noqa: BLE001 - an unknown role: moto answers it
        return True
    return evaluate([trust], action, role_arn, context, principal, resource_policy=True) == ALLOW
