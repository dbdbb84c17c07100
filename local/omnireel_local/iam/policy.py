"""IAM policy evaluation for the local AWS: which calls AWS would allow, from identity and resource policies.

moto 5.2.5 ships an evaluator (``moto/iam/access_control.py``) that the local stack cannot use as it is: it ignores
most Condition operators (an Allow whose Condition does not hold even becomes an explicit Deny), it authorises most
non-S3 calls against the resource ``"*"`` (so a policy scoped to a table or a function never matches), and it
crashes on a trust policy with a service principal. ``patches.iam_auth`` installs this module in its place.

What is evaluated, as AWS does within one account (https://docs.aws.amazon.com/IAM/latest/UserGuide/
reference_policies_evaluation-logic.html): an explicit Deny in any policy wins; otherwise an Allow in the caller's
identity policies or in the resource's policy (bucket, topic, queue) allows; otherwise the call is denied.
Statements match on Action/NotAction (case-insensitive wildcards), Resource/NotResource, Principal (resource
policies) and Condition (the operators below, with ``IfExists`` and ``ForAnyValue:``/``ForAllValues:``). A Condition
with an operator this module does not know makes an Allow not apply and a Deny apply (fail closed), and is logged.

``resource_arn`` names the resource of the calls the pipeline makes, for the services whose moto handlers pass ``"*"``.
A call whose resource it cannot name is evaluated against ``"*"``: only a statement with ``Resource: "*"`` allows it.
"""

from __future__ import annotations

import ipaddress
import json
import logging
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

log = logging.getLogger("omnireel_local.iam")

ALLOW, DENY, NEUTRAL = "Allow", "Deny", "Neutral"


def as_list(value: Any) -> list[Any]:
    if value is None:
        return []
    return list(value) if isinstance(value, (list, tuple)) else [value]


def wildcard(pattern: str, value: str, *, ignore_case: bool = False) -> bool:
    """IAM's wildcard match: ``*`` any run of characters, ``?`` one character, everything else literal."""
    return _wildcard_regex(str(pattern), ignore_case).fullmatch(str(value)) is not None


@lru_cache(maxsize=4096)
def _wildcard_regex(pattern: str, ignore_case: bool) -> re.Pattern[str]:
    """One compiled expression per policy pattern (speed only: every request of the local AWS checks its caller's
    policies, a few hundred pattern matches, and building each expression a character at a time was most of that)."""
    regex = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)
    return re.compile(regex, (re.IGNORECASE | re.DOTALL) if ignore_case else re.DOTALL)


# ---------------------------------------------------------------- conditions
def _string_eq(actual: str, expected: str) -> bool:
    return str(actual) == str(expected)


def _string_eq_ic(actual: str, expected: str) -> bool:
    return str(actual).lower() == str(expected).lower()


def _string_like(actual: str, expected: str) -> bool:
    return wildcard(expected, actual)


def _bool(actual: str, expected: str) -> bool:
    return str(actual).lower() == str(expected).lower()


def _ip_address(actual: str, expected: str) -> bool:
    """``IpAddress``: the address is in the CIDR block (or is the address) given."""
    try:
        return ipaddress.ip_address(str(actual)) in ipaddress.ip_network(str(expected), strict=False)
    except ValueError:
        return False


def _numeric(compare: Any) -> Any:
    def check(actual: str, expected: str) -> bool:
        try:
            return bool(compare(float(actual), float(expected)))
        except (TypeError, ValueError):
            return False

    return check


# operator -> (match one actual value against one expected value, negated)
_OPERATORS: dict[str, tuple[Any, bool]] = {
    "StringEquals": (_string_eq, False),
    "StringNotEquals": (_string_eq, True),
    "StringEqualsIgnoreCase": (_string_eq_ic, False),
    "StringNotEqualsIgnoreCase": (_string_eq_ic, True),
    "StringLike": (_string_like, False),
    "StringNotLike": (_string_like, True),
    "ArnEquals": (_string_like, False),
    "ArnLike": (_string_like, False),
    "ArnNotEquals": (_string_like, True),
    "ArnNotLike": (_string_like, True),
    "Bool": (_bool, False),
    "IpAddress": (_ip_address, False),
    "NotIpAddress": (_ip_address, True),
    "NumericEquals": (_numeric(lambda a, e: a == e), False),
    "NumericNotEquals": (_numeric(lambda a, e: a == e), True),
    "NumericLessThan": (_numeric(lambda a, e: a < e), False),
    "NumericLessThanEquals": (_numeric(lambda a, e: a <= e), False),
    "NumericGreaterThan": (_numeric(lambda a, e: a > e), False),
    "NumericGreaterThanEquals": (_numeric(lambda a, e: a >= e), False),
}


class UnsupportedCondition(Exception):
    pass


def _lookup(context: Mapping[str, Any], key: str) -> list[str] | None:
    """Condition keys are case-insensitive."""
    lowered = key.lower()
    for name, value in context.items():
        if name.lower() == lowered:
            return [str(v) for v in as_list(value)]
    return None


def _condition_holds(operator: str, key: str, expected: list[Any], context: Mapping[str, Any]) -> bool:
    qualifier, _, name = operator.rpartition(":")
    if_exists = name.endswith("IfExists")
    name = name.removesuffix("IfExists")
    actual = _lookup(context, key)
    if name == "Null":
        wanted = str(expected[0]).lower() == "true"
        return (actual is None) == wanted
    if name not in _OPERATORS:
        raise UnsupportedCondition(operator)
    match, negated = _OPERATORS[name]
    if actual is None:
        if if_exists or qualifier == "ForAllValues":
            return True
        return negated  # a negated operator holds for a missing key, a positive one does not

    def positive(value: str) -> bool:
        return any(match(value, e) for e in expected)

    if qualifier == "ForAllValues":
        hits = [positive(v) for v in actual]
        return all(not h for h in hits) if negated else all(hits)
    hit = any(positive(v) for v in actual)
    return not hit if negated else hit


def conditions_hold(condition: Mapping[str, Any] | None, context: Mapping[str, Any]) -> bool:
    for operator, keys in (condition or {}).items():
        for key, expected in (keys or {}).items():
            if not _condition_holds(operator, key, as_list(expected), context):
                return False
    return True


# ---------------------------------------------------------------- statements
def _principal_matches(spec: Any, principal: Principal | None) -> bool:
    if spec == "*":
        return True
    if principal is None or not isinstance(spec, Mapping):
        return False
    for kind, values in spec.items():
        for value in as_list(values):
            value = str(value)
            if kind == "AWS":
                if value == "*" or principal.matches_aws(value):
                    return True
            elif kind == "Service" and principal.service == value:
                return True
    return False


def statement_effect(
    statement: Mapping[str, Any],
    action: str,
    resource: str,
    context: Mapping[str, Any],
    principal: Principal | None = None,
    *,
    resource_policy: bool = False,
) -> str:
    if "NotAction" in statement:
        if any(wildcard(p, action, ignore_case=True) for p in as_list(statement["NotAction"])):
            return NEUTRAL
    elif not any(wildcard(p, action, ignore_case=True) for p in as_list(statement.get("Action"))):
        return NEUTRAL
    if "NotResource" in statement:
        if any(wildcard(p, resource) for p in as_list(statement["NotResource"])):
            return NEUTRAL
    elif "Resource" in statement:
        if not any(wildcard(p, resource) for p in as_list(statement["Resource"])):
            return NEUTRAL
    elif not resource_policy:
        return NEUTRAL  # an identity policy statement without Resource is invalid; AWS rejects it at creation
    if resource_policy:
        if "NotPrincipal" in statement:
            if _principal_matches(statement["NotPrincipal"], principal):
                return NEUTRAL
        elif not _principal_matches(statement.get("Principal"), principal):
            return NEUTRAL
    effect = str(statement.get("Effect", "Deny"))
    try:
        if not conditions_hold(statement.get("Condition"), context):
            return NEUTRAL
    except UnsupportedCondition as exc:
        log.warning("condition operator %s is not evaluated locally: the statement %s", exc, "applies (Deny)"
                    if effect == DENY else "does not apply (Allow)")  # fmt: skip
        return DENY if effect == DENY else NEUTRAL
    return DENY if effect == DENY else ALLOW


def evaluate(
    documents: Iterable[Mapping[str, Any]],
    action: str,
    resource: str,
    context: Mapping[str, Any],
    principal: Principal | None = None,
    *,
    resource_policy: bool = False,
) -> str:
    """ALLOW, DENY (an explicit Deny matched) or NEUTRAL (nothing matched) for a set of policy documents."""
    result = NEUTRAL
    for document in documents:
        for statement in as_list(document.get("Statement")):
            effect = statement_effect(statement, action, resource, context, principal, resource_policy=resource_policy)
            if effect == DENY:
                return DENY
            if effect == ALLOW:
                result = ALLOW
    return result


def policy_source(policy: Any) -> Any:
    """What moto stores for a policy (a JSON string, a dict with ``policy_document``, a Policy object), unwrapped: its
    JSON text, or the mapping it is held as."""
    if isinstance(policy, Mapping):
        policy = policy.get("policy_document", policy)
    if hasattr(policy, "versions"):
        policy = next(v for v in policy.versions if v.is_default).document
    if isinstance(policy, bytes):
        policy = policy.decode()
    return policy


def document(policy: Any) -> dict[str, Any]:
    """A policy document from what moto stores (``policy_source``, parsed)."""
    source = policy_source(policy)
    return json.loads(source) if isinstance(source, str) else dict(source)


@dataclass(frozen=True)
class Principal:
    """The caller, the one class for it at every door: an IAM user, a role session
    (``arn:aws:sts::ACCOUNT:assumed-role/ROLE/SESSION``) or an AWS service (``service``: a trust policy's principal).

    Policies see ``arn`` and ``account_id`` (and ``role_arn``, derived). The front door (``authorizer``) also fills
    in what its one lookup of the signing key found: the key, its secret and session token, the IAM unique id it
    reports, whether the session's role is gone, and ``key``, moto's view of the key (its ARN and policies) that the
    decision reads (``decision.decide``).
    """

    arn: str
    account_id: str
    service: str | None = None
    access_key: str = ""
    user_id: str = ""
    secret_key: str = field(default="", repr=False)
    session_token: str | None = field(default=None, repr=False)
    role_gone: bool = False  # a role session whose role was deleted (and perhaps re-created) since it was assumed
    key: Any = field(default=None, repr=False, compare=False)
    role_arn: str | None = field(init=False, default=None)  # a role session's role

    def __post_init__(self) -> None:
        if ":assumed-role/" in self.arn:
            role = self.arn.split(":assumed-role/", 1)[1].split("/", 1)[0]
            object.__setattr__(self, "role_arn", f"arn:aws:iam::{self.account_id}:role/{role}")

    def authorizer_iam(self) -> dict[str, Any]:
        """The caller as API Gateway reports it in ``requestContext.authorizer.iam``."""
        return {
            "accessKey": self.access_key,
            "accountId": self.account_id,
            "callerId": self.user_id,
            "cognitoIdentity": None,
            "principalOrgId": None,
            "userArn": self.arn,
            "userId": self.user_id,
        }

    def matches_aws(self, value: str) -> bool:
        if value in (self.account_id, f"arn:aws:iam::{self.account_id}:root"):
            return True
        return wildcard(value, self.arn) or (self.role_arn is not None and wildcard(value, self.role_arn))


# ---------------------------------------------------------------- request -> resource, context
def _json(body: bytes | str | None) -> dict[str, Any]:
    try:
        data = json.loads(body or b"{}")
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def _param(data: Mapping[str, Any], name: str) -> str | None:
    value = data.get(name)
    if isinstance(value, list):
        value = value[0] if value else None
    return str(value) if value is not None else None


_TRANSACT_ACTIONS = {
    "Put": "dynamodb:PutItem",
    "Update": "dynamodb:UpdateItem",
    "Delete": "dynamodb:DeleteItem",
    "ConditionCheck": "dynamodb:ConditionCheckItem",
    "Get": "dynamodb:GetItem",
}


def transaction_items(action: str, body: bytes | str | None, region: str, account: str) -> list[tuple[str, str]]:
    """DynamoDB TransactWriteItems / TransactGetItems are not IAM actions of their own: AWS authorises each item as
    its single-item action on its table (Update -> dynamodb:UpdateItem ...). Returns (action, table ARN) per item."""
    if action not in ("dynamodb:TransactWriteItems", "dynamodb:TransactGetItems"):
        return []
    out = []
    for entry in _json(body).get("TransactItems") or []:
        for kind, spec in (entry or {}).items():
            table = str((spec or {}).get("TableName", ""))
            arn = table if table.startswith("arn:") else f"arn:aws:dynamodb:{region}:{account}:table/{table}"
            out.append((_TRANSACT_ACTIONS.get(kind, f"dynamodb:{kind}"), arn))
    return out


def resource_arn(
    service: str, action: str, path: str, data: Mapping[str, Any], body: bytes | str | None, region: str, account: str
) -> str:
    """The ARN a call acts on, for the calls the local stack's code makes; ``"*"`` if this module cannot tell."""
    operation = action.split(":", 1)[1]
    raw_path = unquote(urlsplit(path).path)
    if service == "dynamodb":
        table = _json(body).get("TableName")
        if table:
            index = _json(body).get("IndexName")
            arn = table if str(table).startswith("arn:") else f"arn:aws:dynamodb:{region}:{account}:table/{table}"
            return f"{arn}/index/{index}" if index else arn
    elif service == "lambda":
        if mapping := re.match(r"^/[^/]+/event-source-mappings/([^/]+)", raw_path):
            return f"arn:aws:lambda:{region}:{account}:event-source-mapping:{mapping[1]}"
        match = re.match(r"^/[^/]+/functions/([^/]+)", raw_path)
        if match:
            name = match[1]
            if name.startswith("arn:"):
                return name
            qualifier = parse_qs(urlsplit(path).query).get("Qualifier", [None])[0]
            arn = f"arn:aws:lambda:{region}:{account}:function:{name}"
            return f"{arn}:{qualifier}" if qualifier and qualifier != "$LATEST" else arn
    elif service == "states":
        payload = _json(body)
        for field in ("stateMachineArn", "executionArn", "mapRunArn"):
            if payload.get(field):
                return str(payload[field])
        if operation == "CreateStateMachine" and payload.get("name"):  # AWS authorises it on the new machine's ARN
            return f"arn:aws:states:{region}:{account}:stateMachine:{payload['name']}"
    elif service == "sns":
        topic = _param(data, "TopicArn") or _json(body).get("TopicArn")
        if topic:
            return str(topic)
        subscription = _param(data, "SubscriptionArn")
        if subscription and subscription.count(":") == 6:  # a subscription acts on its topic
            return subscription.rsplit(":", 1)[0]
    elif service == "sqs":
        payload = _json(body)
        queue = (
            _param(data, "QueueUrl") or payload.get("QueueUrl") or _param(data, "QueueName") or payload.get("QueueName")
        )
        if queue:
            return f"arn:aws:sqs:{region}:{account}:{str(queue).rstrip('/').rsplit('/', 1)[-1]}"
    elif service == "sagemaker":
        match = re.match(r"^/endpoints/([^/]+)/", raw_path)
        name = match[1] if match else _json(body).get("EndpointName")
        if name:
            return f"arn:aws:sagemaker:{region}:{account}:endpoint/{str(name).lower()}"
        if config := _json(body).get("EndpointConfigName"):
            return f"arn:aws:sagemaker:{region}:{account}:endpoint-config/{str(config).lower()}"
        if model := _json(body).get("ModelName"):
            return f"arn:aws:sagemaker:{region}:{account}:model/{str(model).lower()}"
    elif service == "events" and operation == "PutEvents":
        buses = {e.get("EventBusName") or "default" for e in _json(body).get("Entries") or []}
        bus = next(iter(buses)) if len(buses) == 1 else None
        if bus:
            return bus if bus.startswith("arn:") else f"arn:aws:events:{region}:{account}:event-bus/{bus}"
    elif service == "secretsmanager":
        secret = _json(body).get("SecretId")
        if secret:
            return (
                secret
                if str(secret).startswith("arn:")
                else f"arn:aws:secretsmanager:{region}:{account}:secret:{secret}"
            )
    elif service == "iam":
        user = _param(data, "UserName")
        if user:
            return f"arn:aws:iam::{account}:user/{user}"
        role = _param(data, "RoleName")
        if role:  # the role's path is known only when the call names it (CreateRole)
            return f"arn:aws:iam::{account}:role{_param(data, 'Path') or '/'}{role}"
    elif service == "sts":
        role_arn = _param(data, "RoleArn")
        if role_arn:
            return str(role_arn)
    return "*"


# The local identities that stand in for AWS services (identities.ADMIN_USER: the stack process as CloudFormation, and
# as Lambda sending an on-failure record or EventBridge a dead letter). Their calls carry
# aws:PrincipalIsAWSService "true", as the services' own calls do on AWS; every other caller's carry "false", so a
# resource policy that refuses principals other than the stack's roles and services (issue 33: the topics' and queues'
# "Only..." Deny statements in template.yaml) refuses the developer and any scratch principal as AWS would.
SERVICE_STAND_INS = frozenset({"omnireel-local-admin"})


def request_context(
    service: str, action: str, path: str, data: Mapping[str, Any], body: bytes | str | None, principal: Principal
) -> dict[str, Any]:
    """The condition keys the local stack can supply for a call."""
    stand_in = ":user/" in principal.arn and principal.arn.rsplit("/", 1)[1] in SERVICE_STAND_INS
    context: dict[str, Any] = {
        # The local endpoint is plain HTTP on loopback; it stands in for AWS's TLS endpoints (see docs/reliability.md).
        "aws:SecureTransport": "true",
        "aws:PrincipalArn": principal.role_arn or principal.arn,
        "aws:PrincipalAccount": principal.account_id,
        "aws:PrincipalIsAWSService": "true" if stand_in or principal.service else "false",
        "aws:SourceIp": "127.0.0.1",
    }
    if ":user/" in principal.arn:
        context["aws:username"] = principal.arn.rsplit("/", 1)[1]
    query = parse_qs(urlsplit(path).query, keep_blank_values=True)
    if service == "s3" and action in ("s3:ListBucket", "s3:ListBucketVersions"):
        context["s3:prefix"] = (query.get("prefix") or [""])[0]
        if "delimiter" in query:
            context["s3:delimiter"] = query["delimiter"][0]
    if service == "monitoring" or action.startswith("cloudwatch:"):
        namespace = _param(data, "Namespace") or _json(body).get("Namespace")
        if namespace:
            context["cloudwatch:namespace"] = namespace
    return context


__all__ = [
    "ALLOW",
    "DENY",
    "NEUTRAL",
    "Principal",
    "conditions_hold",
    "document",
    "evaluate",
    "policy_source",
    "request_context",
    "resource_arn",
    "wildcard",
]
